"""The per-run cost and latency figures (apps.evals.queries.costs): coverage, intervals, percentiles."""

from __future__ import annotations

import pytest

from apps.evals.models import CaseCost
from apps.evals.queries.costs import cost_latency
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


def _cost_rows(eval_run, rows):
    results = list(eval_run.results.order_by("id"))
    CaseCost.objects.bulk_create(
        CaseCost(eval_run=eval_run, result=result, **row) for result, row in zip(results, rows, strict=True)
    )


def test_cost_and_latency_with_coverage_intervals_and_order_statistics(django_assert_max_num_queries):
    eval_set = make_eval_set(n_cases=40)
    run = make_eval_run(eval_set, [True] * 40)
    rows = []
    for i in range(40):
        priced = i < 30  # ten cases of an unpriced model: counted, never $0
        rows.append(
            {
                "target_usd": 0.001 * (1 + i % 3) if priced else None,
                "judge_usd": 0.0005,
                "judge_calls": 1,
                "total_usd": 0.001 * (1 + i % 3) + 0.0005 if priced else None,
                "wall_ms": float(i + 1),
                "model_ms": float(i + 1) / 2,
                "tokens_estimated": i == 0,
            }
        )
    _cost_rows(run, rows)
    with django_assert_max_num_queries(14):
        figures = cost_latency([run.id, "no-such-run"])[run.id]
    assert "no-such-run" not in cost_latency(["no-such-run"])
    assert (figures.n_cases, figures.n_priced, figures.n_target_priced) == (40, 30, 30)
    assert (figures.n_judge, figures.n_judge_priced) == (40, 40)
    mean, lo, hi = figures.cost_per_case_usd
    assert mean == pytest.approx(0.0025)
    assert lo < mean < hi
    assert figures.cost_target_usd.value == pytest.approx(0.002)
    assert figures.cost_judge_usd == (pytest.approx(0.0005), pytest.approx(0.0005), pytest.approx(0.0005))
    assert figures.cost_simulator_usd is None
    # nearest rank: p50 of 1..40 is the 20th, p95 the 38th; the intervals are order statistics
    assert figures.latency_p50_ms.value == 20.0
    assert figures.latency_p50_ms.lo < 20.0 < figures.latency_p50_ms.hi
    assert figures.latency_p95_ms.value == 38.0
    assert figures.latency_p95_ms.hi is None  # the upper rank falls past the 40th value
    assert figures.model_p50_ms.value == 10.0
    assert figures.tokens_estimated and figures.n_tokens_estimated == 1


def test_a_run_not_costed_yet_has_no_figures():
    run = make_eval_run(make_eval_set(n_cases=3), [True, False, True])
    figures = cost_latency([run.id])[run.id]
    assert (figures.n_cases, figures.n_priced, figures.cost_per_case_usd, figures.latency_p95_ms) == (3, 0, None, None)
    assert not figures.costed
