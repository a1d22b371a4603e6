"""The selectors (apps.evals.queries): the one home of per-split counts, eval-run history,
result filters, the "comparable" check and the figures the pages chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest
from django.core.cache import cache

from apps.evals.api.schemas import RunSplit
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalRunStatus, ResultStatus, Split
from apps.evals.queries.compare import CompareError, check_comparable, compare_runs, suggested_partner
from apps.evals.queries.figures import (
    latest_finished_set,
    latest_target_variant,
    overfit_gap,
    splits_figures,
    trend_series,
)
from apps.evals.queries.results import filter_results, latest_results
from apps.evals.queries.rules import compare_rules, result_rules, run_rule_aggregates
from apps.evals.queries.runs import eval_run_history
from apps.evals.queries.sets import set_cases, split_counts, split_counts_by_set
from apps.evals.views.forms import CompareForm
from evalcore.errors import InvalidInputError
from evalcore.splits import SPLIT_CHOICES
from evalcore.types import SPLITS, CaseStatus
from tests.apps.factories import make_eval_run, make_eval_set

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_one_vocabulary_matches_the_engine():
    assert ResultStatus.values == [s.value for s in CaseStatus]
    assert Split.values == list(SPLITS)
    assert get_args(RunSplit) == SPLIT_CHOICES
    assert set(EvalRunStatus.values) == {"queued", "running", "finished", "failed", "interrupted"}


@pytest.mark.django_db
def test_split_counts_name_every_split_even_empty_ones():
    full = make_eval_set("full", 7)  # c0..c6 cycle train/dev/test
    only_dev = make_eval_set("dev-only", 2, splits=("dev",))
    make_eval_set("empty", 0)
    assert split_counts(full) == {"train": 3, "dev": 2, "test": 2}
    assert split_counts(only_dev) == {"train": 0, "dev": 2, "test": 0}
    by_set = split_counts_by_set()
    assert by_set == {full.pk: {"train": 3, "dev": 2, "test": 2}, only_dev.pk: {"train": 0, "dev": 2, "test": 0}}


@pytest.mark.django_db
def test_eval_run_history_filters_and_orders_newest_first_queued_on_top():
    eval_set = make_eval_set("h", 3)
    old = make_eval_run(eval_set, [True], variant="", started=T0)
    new = make_eval_run(eval_set, [False], variant="v2", started=T0 + timedelta(hours=1), status="failed")
    queued = make_eval_run(eval_set, [True], variant="v2", started=T0)
    queued.started = None
    queued.status = EvalRunStatus.QUEUED
    queued.save()
    assert [r.pk for r in eval_run_history()] == [queued.pk, new.pk, old.pk]
    assert [r.pk for r in eval_run_history(variant="")] == [old.pk]  # "" means "no variant", not "any"
    assert [r.pk for r in eval_run_history(variant="v2", status="failed")] == [new.pk]
    assert list(eval_run_history(set_id=eval_set.pk + 1)) == []
    with pytest.raises(InvalidInputError, match="unknown status 'done'") as caught:
        eval_run_history(status="done")
    assert caught.value.field == "status"


@pytest.mark.django_db
def test_filter_results_by_status_and_case_search():
    eval_set = make_eval_set("r", 6)
    eval_run = make_eval_run(eval_set, [True, False, "errored", True], case_ids=["a1", "a2", "b1", "b2"])
    rows = EvalResult.objects.filter(eval_run=eval_run)
    assert sorted(r.case_id for r in filter_results(rows, status="passed")) == ["a1", "b2"]
    assert sorted(r.case_id for r in filter_results(rows, search="B")) == ["b1", "b2"]
    assert [r.case_id for r in filter_results(rows, status="errored", search="b")] == ["b1"]
    assert filter_results(rows).count() == 4
    with pytest.raises(InvalidInputError, match="unknown status 'ok'"):
        filter_results(rows, status="ok")


@pytest.mark.django_db
def test_comparable_check_is_shared_by_the_form():
    one, other = make_eval_set("one", 3), make_eval_set("other", 3)
    a, b = make_eval_run(one, [True]), make_eval_run(one, [False])
    stranger = make_eval_run(other, [True])
    check_comparable(a, b)
    with pytest.raises(CompareError, match="two different runs"):
        check_comparable(a, a)
    with pytest.raises(CompareError, match="only runs of the same set") as caught:
        check_comparable(a, stranger)
    assert caught.value.field == "b"
    form = CompareForm({"a": a.pk, "b": stranger.pk})
    assert not form.is_valid()
    assert form.non_field_errors() == [str(caught.value)]


@pytest.mark.django_db
def test_suggested_partner_prefers_the_same_targets_earlier_run():
    eval_set = make_eval_set("p", 3)
    earlier_same = make_eval_run(eval_set, [True], target_id="t", started=T0)
    make_eval_run(eval_set, [True], target_id="other", started=T0 + timedelta(hours=1))
    run = make_eval_run(eval_set, [True], target_id="t", started=T0 + timedelta(hours=2))
    later_same = make_eval_run(eval_set, [True], target_id="t", started=T0 + timedelta(hours=3))
    assert suggested_partner(run) == earlier_same
    # the first run of a target has no earlier one: any other run of the set, newest first
    assert suggested_partner(earlier_same) == later_same
    alone = make_eval_run(make_eval_set("alone", 1), [True])
    assert suggested_partner(alone) is None


def _split_summary(**rates: float) -> dict:
    return {"splits": {name: {"n": 10, "pass_rate": rate} for name, rate in rates.items()}}


@pytest.mark.django_db
def test_splits_figures_gap_is_train_minus_test_of_the_latest_values():
    eval_set = make_eval_set("g", 3)
    make_eval_run(eval_set, [True], target_id="t", variant="v", started=T0, summary=_split_summary(train=0.9, test=0.6))
    make_eval_run(
        eval_set, [True], target_id="t", variant="v", started=T0 + timedelta(hours=1), summary=_split_summary(dev=0.5)
    )
    make_eval_run(
        eval_set, [True], target_id="t", variant="v", started=T0 + timedelta(hours=2), summary=_split_summary(test=0.8)
    )
    make_eval_run(eval_set, [True], target_id="t", variant="other", started=T0, summary=_split_summary(train=0.1))
    figures = splits_figures(eval_set, "t", "v")
    assert [row["gap"] for row in figures.rows] == [pytest.approx(0.3), None, None]
    assert [row["dev"] for row in figures.rows] == [None, 0.5, None]
    # the gap series: at each run that moved train or test, latest train minus latest test
    assert [p.value for p in figures.gap.points] == [pytest.approx(0.3), pytest.approx(0.1)]
    assert [s.name for s in figures.lines] == ["train", "dev", "test"]
    assert overfit_gap(0.7, None) is None and overfit_gap(0.7, 0.75) == pytest.approx(-0.05)


@pytest.mark.django_db
def test_trend_series_per_variant_with_the_split_filter():
    eval_set = make_eval_set("tr", 3)
    make_eval_run(eval_set, [True, True], variant="a", split="dev", started=T0)
    make_eval_run(eval_set, [True, False], variant="a", split="test", started=T0 + timedelta(hours=1))
    make_eval_run(
        eval_set, [False, False], variant="b", split="dev", started=T0, summary={"metrics": {"sim": {"mean": 0.25}}}
    )
    make_eval_run(eval_set, [True], variant="b", split="dev", started=T0, status="running")  # live: not a figure
    series, names = trend_series(eval_set, "pass_rate")
    assert {s.name: [p.value for p in s.points] for s in series} == {"echo/a": [1.0, 0.5], "echo/b": [0.0]}
    assert names == ["pass_rate", "sim"]
    dev_only, _ = trend_series(eval_set, "pass_rate", "dev")
    assert {s.name: [p.value for p in s.points] for s in dev_only} == {"echo/a": [1.0], "echo/b": [0.0]}
    scored, _ = trend_series(eval_set, "sim")
    assert {s.name: [p.value for p in s.points] for s in scored} == {"echo/b": [0.25]}


@pytest.mark.django_db
def test_latest_target_variant_is_the_newest_finished_runs():
    eval_set = make_eval_set("lt", 3)
    assert latest_target_variant(eval_set) is None
    make_eval_run(eval_set, [True], target_id="old", variant="a", started=T0)
    make_eval_run(eval_set, [True], target_id="new", variant="b", started=T0 + timedelta(hours=2))
    make_eval_run(eval_set, [True], target_id="mid", variant="c", started=T0 + timedelta(hours=1))
    running = make_eval_run(eval_set, [True], target_id="live", variant="d", started=T0 + timedelta(hours=3))
    running.status = EvalRunStatus.RUNNING
    running.save()
    make_eval_run(make_eval_set("elsewhere", 1), [True], target_id="other", started=T0 + timedelta(hours=4))
    assert latest_target_variant(eval_set) == ("new", "b")
    # same start: the larger key decides, so the answer does not change between page loads
    tie = make_eval_run(eval_set, [True], target_id="tie", variant="", started=T0 + timedelta(hours=2))
    new = EvalRun.objects.get(eval_set=eval_set, target_id="new")
    assert latest_target_variant(eval_set) == (("tie", "") if tie.pk > new.pk else ("new", "b"))


@pytest.mark.django_db
def test_latest_results_are_the_newest_with_their_runs_in_one_query(django_assert_num_queries):
    eval_run = make_eval_run(make_eval_set("live", 4), [True, False, True], case_ids=["a", "b", "c"])
    with django_assert_num_queries(1):
        rows = latest_results(eval_run, 2)
        assert [(r.case_id, r.run.run_id) for r in rows] == [("c", f"{eval_run.id}:c"), ("b", f"{eval_run.id}:b")]


# --- the rule-adherence reads (apps.evals.queries.rules) --------------------------------------


def with_rules(eval_run: EvalRun, outcomes: dict[str, dict[str, str]]) -> EvalRun:
    """Give the run a ``rule_adherence`` scorer spec and, per case id, a score with those rule
    outcomes placed after its other scores (cases not listed keep only their other scores)."""
    eval_run.scorer_specs = [{"name": "exact_match"}, {"name": "rule_adherence", "args": {}}]
    eval_run.save(update_fields=["scorer_specs"])
    for result in EvalResult.objects.filter(eval_run=eval_run, case_id__in=list(outcomes)):
        rows = [
            {"id": rule_id, "text": f"rule {rule_id}", "outcome": o} for rule_id, o in outcomes[result.case_id].items()
        ]
        score = {"name": "rule_adherence", "value": None, "passed": None, "metadata": {"rules": rows}}
        result.scores = [*result.scores, score]
        result.save(update_fields=["scores"])
    return eval_run


@pytest.mark.django_db
def test_rule_aggregates_read_the_rule_score_among_others_and_skip_results_without_one(django_assert_num_queries):
    cache.clear()
    eval_set = make_eval_set("rules-agg", 3)
    run = with_rules(
        make_eval_run(eval_set, [True, False, "errored"]),
        {"c0": {"R1": "honoured", "R2": "rule_absent"}, "c1": {"R1": "rule_ignored"}},
    )
    found = run_rule_aggregates(run)
    assert [(a.rule_id, a.cases, a.decided, a.honoured_rate) for a in found] == [("R1", 2, 2, 0.5), ("R2", 1, 1, 0.0)]
    with django_assert_num_queries(0):  # cached while the run does not change
        assert run_rule_aggregates(run) == found
    EvalRun.objects.filter(pk=run.pk).update(n_done=run.n_done + 1)
    run.refresh_from_db()
    with django_assert_num_queries(1):
        assert run_rule_aggregates(run) == found
    plain = make_eval_run(eval_set, [True])
    assert run_rule_aggregates(plain) == []


@pytest.mark.django_db
def test_compare_rules_counts_flips_and_caches_them(django_assert_num_queries):
    cache.clear()
    eval_set = make_eval_set("rules-cmp", 3)
    a = with_rules(make_eval_run(eval_set, [True, True, True]), {"c0": {"R1": "honoured"}, "c1": {"R1": "honoured"}})
    b = with_rules(
        make_eval_run(eval_set, [True, True, True], variant="v2"),
        {"c0": {"R1": "rule_absent"}, "c1": {"R1": "rule_absent", "R2": "honoured"}},
    )
    got = compare_rules(a, b)
    assert got.uses_rules is True and (got.run_a, got.run_b) == (a, b)
    assert [(g.rule_id, g.label, g.n, [c.case_id for c in g.cases]) for g in got.groups] == [
        ("R1", "honoured → rule_absent", 2, ["c0", "c1"]),
        ("R2", "missing → honoured", 1, ["c1"]),
    ]
    with django_assert_num_queries(0):  # cached while neither run changes
        assert compare_rules(a, b).flips == got.flips


@pytest.mark.django_db
def test_compare_rules_with_one_run_scored_by_rules_and_with_neither():
    cache.clear()
    eval_set = make_eval_set("rules-one", 2)
    plain = make_eval_run(eval_set, [True, True])
    ruled = with_rules(make_eval_run(eval_set, [True, True], variant="v2"), {"c0": {"R1": "honoured"}})
    one = compare_rules(plain, ruled)
    assert one.uses_rules is True and [(f.rule_id, f.label) for f in one.flips] == [("R1", "missing → honoured")]
    other = make_eval_run(eval_set, [True, False], variant="v3")
    neither = compare_rules(plain, other)
    assert (neither.run_a, neither.run_b, neither.groups, neither.flips, neither.uses_rules) == (
        plain,
        other,
        [],
        [],
        False,
    )


@pytest.mark.django_db
def test_result_rules_read_each_rules_outcome_from_the_rule_score_only():
    run = make_eval_run(make_eval_set("rules-case", 2), [True, True])
    result = EvalResult.objects.get(eval_run=run, case_id="c0")
    row = {
        "id": "R2",
        "text": "Never quote a price.",
        "source": "target",
        "outcome": "rule_absent",
        "turns": [1, "2"],
        "n_turns": 3,
        "presence": "dropped",
        "dropped_after": 2,
        "match": "template",
        "similarity": 100.0,
        "reason": "present in turns 1..2 of 3, then dropped",
    }
    judged = {"id": 7, "outcome": "judge_error", "turns": None, "judge_error": {"kind": "timeout", "attempts": 3}}
    other = {"name": "exact_match", "metadata": {"rules": [{"id": "X"}]}}
    result.scores = [other, {"name": "rule_adherence", "metadata": {"rules": [row, judged]}}]
    first, second = result_rules(result)
    assert (first.id, first.text, first.source, first.outcome) == (
        "R2",
        "Never quote a price.",
        "target",
        "rule_absent",
    )
    assert (first.turns, first.n_turns, first.presence, first.dropped_after) == ([1, 2], 3, "dropped", 2)
    assert (first.match, first.similarity, first.reason, first.judge_error) == (
        "template",
        100.0,
        "present in turns 1..2 of 3, then dropped",
        None,
    )
    assert (second.id, second.text, second.source, second.outcome, second.turns, second.n_turns) == (
        "7",
        "",
        "",
        "judge_error",
        [],
        0,
    )
    assert (second.presence, second.judge_error) == ("", {"kind": "timeout", "attempts": 3})
    result.scores = [other]
    assert result_rules(result) == []


@pytest.mark.django_db
def test_eval_run_history_filters_by_target_and_split_ties_by_newest_key_and_joins(django_assert_num_queries):
    eval_set = make_eval_set("hist", 2)
    first = make_eval_run(eval_set, [True], target_id="a", split="dev", started=T0)
    second = make_eval_run(eval_set, [True], target_id="a", split="test", started=T0)
    other = make_eval_run(eval_set, [True], target_id="b", split="dev", started=T0)
    # same start: the larger key first, so the order does not change between page loads
    assert [r.pk for r in eval_run_history(target_id="a")] == sorted([first.pk, second.pk], reverse=True)
    assert [r.pk for r in eval_run_history(split="dev")] == sorted([first.pk, other.pk], reverse=True)
    with django_assert_num_queries(1):  # the set and the creator come joined
        runs = list(eval_run_history())
        assert [(r.eval_set.name, r.created_by) for r in runs] == [("hist", None)] * 3
    assert {"summary", "config", "scorer_specs"} <= runs[0].get_deferred_fields()
    with pytest.raises(InvalidInputError) as caught:
        eval_run_history(status="done")
    assert str(caught.value).endswith("choose one of queued, running, finished, failed, interrupted")


@pytest.mark.django_db
def test_set_cases_in_file_order_then_by_id_with_a_case_id_search():
    eval_set = make_eval_set("order", 11)  # c0..c10: "c10" sorts before "c2" by id, after it by position
    EvalCase.objects.create(eval_set=eval_set, case_id="b-same", input="x", position=3)
    EvalCase.objects.create(eval_set=eval_set, case_id="a-same", input="x", position=3)
    ids = [c.case_id for c in set_cases(eval_set)]
    assert ids[:6] == ["c0", "c1", "c2", "a-same", "b-same", "c3"] and ids[-1] == "c10"
    assert [c.case_id for c in set_cases(eval_set, search="C1")] == ["c1", "c10"]


@pytest.mark.django_db
def test_latest_finished_set_is_the_newest_finished_runs_set_else_the_first_set():
    assert latest_finished_set() is None
    first = make_eval_set("first", 1)
    assert latest_finished_set() == first
    older, newer = make_eval_set("older", 1), make_eval_set("newer", 1)
    make_eval_run(older, [True], started=T0)
    make_eval_run(newer, [True], started=T0 + timedelta(hours=1))
    make_eval_run(first, [True], started=T0 + timedelta(hours=2), status="running")  # live: not counted
    assert latest_finished_set() == newer
    tie = make_eval_run(older, [True], started=T0 + timedelta(hours=1))  # same start: the larger key decides
    newest = EvalRun.objects.get(eval_set=newer)
    assert latest_finished_set() == (older if tie.pk > newest.pk else newer)


@pytest.mark.django_db
def test_split_figures_and_trends_read_only_their_set_and_target():
    eval_set, elsewhere = make_eval_set("mine", 2), make_eval_set("theirs", 2)
    make_eval_run(eval_set, [True], target_id="t", variant="v", started=T0, summary=_split_summary(train=0.9))
    make_eval_run(eval_set, [True], target_id="u", variant="v", started=T0, summary=_split_summary(train=0.1))
    make_eval_run(elsewhere, [False], target_id="t", variant="v", started=T0, summary=_split_summary(train=0.2))
    make_eval_run(eval_set, [False], target_id="t", variant="", started=T0 + timedelta(hours=1))
    figures = splits_figures(eval_set, "t", "v")
    assert [row["train"] for row in figures.rows] == [0.9]
    series, _ = trend_series(eval_set, "pass_rate")
    assert {s.name: [p.value for p in s.points] for s in series} == {"t/v": [1.0], "u/v": [1.0], "t/-": [0.0]}


@pytest.mark.django_db
def test_compare_runs_pages_clamp_and_the_counts_are_cached(django_assert_num_queries):
    cache.clear()
    eval_set = make_eval_set("cmp-pages", 60)
    a = make_eval_run(eval_set, ["errored"] + [True] * 59, scores=[None] + [0.5] * 59)
    b = make_eval_run(eval_set, [True] * 60, variant="v2", scores=[0.25] * 60)
    view = compare_runs(a, b)
    assert (view.page, view.page_size, view.total, view.num_pages, len(view.rows)) == (1, 50, 60, 2, 50)
    assert view.rows[0].case_id == "c0" and view.rows[0].score_delta is None  # A errored: no score, no delta
    assert view.rows[1].score_delta == pytest.approx(-0.125)  # result scores: the mean of its scores
    with django_assert_num_queries(2):  # the page and its results; the 2x2 counts come from the cache
        compare_runs(a, b, page=2)
    assert (compare_runs(a, b, page=0).page, compare_runs(a, b, page=9).page) == (1, 2)
    assert compare_runs(a, b, page_size=0).page_size == 1 and compare_runs(a, b, page_size=1000).page_size == 500
    with pytest.raises(InvalidInputError) as caught:
        compare_runs(a, b, only="bogus")
    assert str(caught.value) == "unknown filter 'bogus'; choose one of flips, regressions, improvements, same"
    assert caught.value.field == "only"
