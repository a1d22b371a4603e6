"""The per-run cost and latency figures (apps.evals.queries.costs): coverage, intervals, percentiles."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.evals.models import CaseCost, ModelPrice
from apps.evals.queries.costs import cost_latency
from apps.evals.results.costs import cost_new_results
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


def test_costing_reads_estimated_tokens_the_simulated_user_and_a_cached_judge():
    for model, per_m in (("tgt", "1"), ("sim", "2"), ("judge", "4")):
        value = Decimal(per_m)
        ModelPrice.objects.create(
            model=model,
            version=1,
            input_usd_per_m=value,
            output_usd_per_m=value,
            cached_input_usd_per_m=value,
            reasoning_usd_per_m=value,
        )
    run = make_eval_run(make_eval_set(n_cases=3), [True, True, True])
    estimated, simulated, cached = run.results.select_related("run").order_by("id")
    estimated.run.model, estimated.run.tokens_in, estimated.run.tokens_out = "tgt", None, None
    estimated.run.metadata = {"usage": {"source": "estimated", "tokens_in": 300, "tokens_out": 100, "ttft_ms": 9.0}}
    simulated.run.model = "tgt"  # 10 in + 5 out reported
    simulated.run.metadata = {
        "simulator": {"kind": "llm", "model": "sim", "calls": 2, "tokens_in": 50, "tokens_out": 0}
    }
    cached.run.model = "unknown-model"
    judge_meta = {"judge_model": "judge", "judge_calls": 0, "judge_tokens_in": 0, "judge_tokens_out": 0}
    cached.scores = [{"name": "rubric_judge", "value": True, "passed": True, "metadata": judge_meta}]
    for result in (estimated, simulated, cached):
        result.run.save()
        result.save()
    block = cost_new_results(run.id)
    assert block is not None and sorted(block["prices"]["table"]) == ["sim", "tgt"]
    assert block["cost_latency"]["n_priced"] == 2
    rows = {c.result_id: c for c in CaseCost.objects.filter(eval_run=run)}
    assert rows[estimated.id].tokens_estimated and rows[estimated.id].target_usd == pytest.approx(400e-6)
    assert rows[estimated.id].ttft_ms == 9.0
    assert rows[simulated.id].simulator_usd == pytest.approx(100e-6) and rows[simulated.id].simulator_calls == 2
    assert rows[simulated.id].total_usd == pytest.approx(115e-6)
    # a judge answering from its cache spent nothing; the target's model has no price: unpriced
    assert (rows[cached.id].judge_usd, rows[cached.id].target_usd, rows[cached.id].total_usd) == (0.0, None, None)
    assert cost_new_results(run.id) is not None and CaseCost.objects.filter(eval_run=run).count() == 3  # once each
    figures = cost_latency([run.id])[run.id]
    assert (figures.n_priced, figures.n_simulator, figures.n_judge, figures.n_tokens_estimated) == (2, 1, 1, 1)
    assert "1 unpriced: a model with no price, never counted as $0" in figures.cost_line()
    assert "target tokens estimated from text length on 1 case(s)" in figures.cost_line()


def test_a_judge_error_on_every_axis_is_paid_once():
    ModelPrice.objects.create(
        model="judge",
        version=1,
        input_usd_per_m=Decimal(1),
        output_usd_per_m=Decimal(1),
        cached_input_usd_per_m=Decimal(1),
        reasoning_usd_per_m=Decimal(1),
    )
    run = make_eval_run(make_eval_set(n_cases=1), ["errored"])
    result = run.results.get()
    usage = {"judge_model": "judge", "judge_calls": 2, "judge_tokens_in": 600, "judge_tokens_out": 400}
    names = ["rubric_judge", *(f"rubric_judge.{axis}" for axis in ("accuracy", "completeness", "grounding"))]
    result.scores = [{"name": name, "value": None, "error": "judge error", "metadata": usage} for name in names]
    result.save()
    cost_new_results(run.id)
    cost = CaseCost.objects.get(result=result)
    assert (cost.judge_calls, cost.judge_usd) == (2, pytest.approx(1000e-6))


def test_results_that_spent_nothing_are_costed_in_the_database_exactly_as_in_python():
    """The one-statement costing of results with nothing to price writes the rows the per-result
    costing writes; every result with something to price (or that might have) is left to it."""
    from apps.evals.results.costs import _FIELDS, _case_cost, _cost_plain_results, current_prices

    ModelPrice.objects.create(
        model="m-1",
        version=1,
        input_usd_per_m=Decimal(1),
        output_usd_per_m=Decimal(2),
        cached_input_usd_per_m=Decimal(1),
        reasoning_usd_per_m=Decimal(2),
    )
    judged = {"judge_model": "m-1", "judge_calls": 1, "judge_tokens_in": 10, "judge_tokens_out": 5}
    shapes = {  # name: (run model, tokens, metadata, scores or None for the factory's, plain?)
        "nothing": ("", None, {}, None, True),
        "no-op usage": ("", None, {"usage": {"model_ms": None, "ttft_ms": None, "source": "none"}}, None, True),
        "cache hit": ("own", None, {"target_cache": {"hit": True}}, None, True),
        "hit 1, not true": ("", None, {"target_cache": {"hit": 1}}, None, True),
        "usage not a dict": ("", None, {"usage": "x", "simulator": [1]}, None, True),
        "model time": ("", None, {"usage": {"model_ms": 7}}, None, False),
        "ttft": ("", None, {"usage": {"ttft_ms": 3.5}}, None, False),
        "estimated": ("", None, {"usage": {"source": "estimated", "tokens_in": 100, "tokens_out": 50}}, None, False),
        "scripted user": ("", None, {"simulator": {"kind": "scripted", "calls": 0}}, None, False),
        "judge": ("", None, {}, [{"name": "rubric_judge", "value": True, "metadata": judged}], False),
        "judge word": ("", None, {}, [{"name": "x", "value": True, "explanation": "no judge_tokens_in"}], False),
        "backslash u": ("", None, {}, [{"name": "x", "value": True, "explanation": "C:\\users"}], False),
        "reported": ("", 10, {}, None, False),
    }
    run = make_eval_run(make_eval_set(n_cases=len(shapes)), [True] * len(shapes))
    plain = set()
    for result, (model, tokens, metadata, scores, is_plain) in zip(
        run.results.select_related("run").order_by("id"), shapes.values(), strict=True
    ):
        result.run.model, result.run.tokens_in, result.run.tokens_out = model, tokens, tokens
        result.run.metadata = metadata
        result.run.save()
        if scores is not None:
            result.scores = scores
            result.save()
        if is_plain:
            plain.add(result.id)
    table = current_prices()
    read = run.results.order_by("id").values_list(
        "id",
        "scores",
        "run__model",
        "run__tokens_in",
        "run__tokens_out",
        "run__elapsed_ms",
        "run__metadata__usage",
        "run__metadata__simulator",
        "run__metadata__target_cache__hit",
    )
    expected = {row[0]: _case_cost(run, row, table.get) for row in read}
    assert _cost_plain_results(run) == len(plain)
    assert set(CaseCost.objects.filter(eval_run=run).values_list("result_id", flat=True)) == plain
    block = cost_new_results(run.id)
    assert block is not None and sorted(block["prices"]["table"]) == ["m-1"]
    names = [f"{name}_id" if name in ("eval_run", "result") else name for name in _FIELDS]
    stored = {row[1]: row for row in CaseCost.objects.filter(eval_run=run).values_list(*names)}
    assert stored == expected
    assert stored[min(plain)][2:] == ("m-1", None, None, 0, None, 0, None, False, 12.5, None, None)
