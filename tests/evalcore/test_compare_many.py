"""evalcore.compare_many: N-way paired readings, ranking, flips and Pareto marks on plain values."""

from __future__ import annotations

import pytest

from evalcore.compare_many import Axis, OutcomePattern, ParetoPoint, compare_many, flip_matrix, pareto_marks
from evalcore.stats import bootstrap_pass_rate_delta, verdict


def test_pair_against_the_baseline_is_the_ab_reading_and_is_corrected():
    # 40 cases: B wins 12 flips, loses 2; C identical to A
    patterns = [
        OutcomePattern((1.0, 1.0, 1.0), 16),
        OutcomePattern((0.0, 1.0, 0.0), 12),
        OutcomePattern((1.0, 0.0, 1.0), 2),
        OutcomePattern((0.0, 0.0, 0.0), 10),
    ]
    result = compare_many(patterns)
    b = result.pairs[0]
    ab = bootstrap_pass_rate_delta(b.counts)
    assert b.interval == ab and b.verdict == verdict(b.counts, ab)  # the A/B page's own figures
    assert b.p_holm == pytest.approx(min(1.0, 2 * b.p_value))  # Holm: the smaller of two p-values doubled
    assert result.pairs[1].verdict.outcome == "no_difference" and result.pairs[1].p_holm == 1.0
    assert result.flips == flip_matrix(patterns)
    assert result.flips[1][0] == 12 and result.flips[0][1] == 2


def test_too_few_cases_calls_nothing_and_everyone_ties_with_the_best():
    patterns = [OutcomePattern((1.0, 0.0), 4), OutcomePattern((0.0, 0.0), 1)]
    result = compare_many(patterns)
    assert result.reason is not None and "too few cases" in result.reason
    assert result.best_group == [0, 1]
    assert all(entry.rank_low is None for entry in result.ranking)
    assert result.ranking[0].interval.method == "wilson"  # a pass rate's interval is valid at every n
    assert result.pairs[0].verdict.outcome == "too_few_cases" and not result.pairs[0].significant


def test_repeats_make_the_case_the_unit():
    patterns = [OutcomePattern((1.0, 0.5), 10, repeats=2), OutcomePattern((0.5, 0.5), 10, repeats=2)]
    result = compare_many(patterns)
    assert result.repeated and result.n_cases == 20 and result.n_pairs == 40
    assert result.pairs[0].counts.a_only == 10  # ten cases whose pass share fell
    assert result.ranking[0].interval.method == "bootstrap"
    assert result.pairs[0].delta == pytest.approx(-0.25)


def test_bad_patterns_are_refused():
    with pytest.raises(ValueError, match="expected 2"):
        compare_many([OutcomePattern((1.0, 0.0), 1), OutcomePattern((1.0,), 1)])
    with pytest.raises(ValueError, match="baseline index"):
        compare_many([OutcomePattern((1.0, 0.0), 3)], baseline=2)
    with pytest.raises(ValueError, match=r"0\.\.1"):
        compare_many([OutcomePattern((2.0, 0.0), 3)])
    assert compare_many([]).reason == "no cases"
    empty = compare_many([], variants=3)  # no case in every run: each run listed, nothing called
    assert empty.reason == "no cases" and len(empty.ranking) == 3 and empty.flips == [[0] * 3] * 3
    assert [p.verdict.outcome for p in empty.pairs] == ["no_pairs", "no_pairs"] and empty.best_group == [0, 1, 2]


def test_pareto_marks_the_front_and_how_sure_a_domination_is():
    points = [
        ParetoPoint(Axis(0.9, 0.85, 0.95), Axis(0.010), Axis(900, 850, 950)),  # best, slow
        ParetoPoint(Axis(0.7, 0.65, 0.75), Axis(0.002), Axis(200, 180, 220)),  # cheap and fast
        ParetoPoint(Axis(0.6, 0.55, 0.65), Axis(0.003), Axis(400, 380, 420)),  # worse than 1 on all: clearly
        ParetoPoint(Axis(0.69, 0.6, 0.78), Axis(0.002), Axis(210, 150, 260)),  # a hair behind 1: estimates only
    ]
    marks = pareto_marks(points)
    assert [m.on_front for m in marks] == [True, True, False, False]
    assert marks[2].dominated_by == (1, 3) and marks[2].clearly
    assert marks[3].dominated_by == (1,) and not marks[3].clearly
    assert marks[0].axes == ("quality", "cost", "latency")
    # an axis one point lacks is left out for all
    partial = pareto_marks([ParetoPoint(Axis(0.5), None, Axis(1)), ParetoPoint(Axis(0.6), Axis(1.0), Axis(2))])
    assert partial[0].axes == ("quality", "latency") and all(m.on_front for m in partial)
