"""Cost and latency arithmetic (evalcore.costs) and the cost / latency gates (evalcore.gates)."""

from __future__ import annotations

import pytest

from evalcore.costs import (
    CostFigures,
    Prices,
    Usage,
    case_latency,
    cost_usd,
    estimate_tokens,
    mean_t_interval,
    quantile_ranks,
    t_quantile_975,
    usage_block,
)
from evalcore.gates import GateError, check_gates, parse_gate
from evalcore.report import ReportBuilder
from evalcore.runtime.models import chat_response_from_openai
from evalcore.tracing import Tracer

PRICES = Prices("m", input=1.0, output=4.0, cached_input=0.25, reasoning=8.0)


def test_each_kind_of_token_is_priced_at_its_own_rate_and_unknown_models_are_unpriced():
    usage = Usage(tokens_in=1000, tokens_out=500, cached_in=400, reasoning=100)
    # 600·1 + 400·0.25 + 400·4 + 100·8 = 3,100 per million
    assert cost_usd(usage, PRICES) == pytest.approx(3100e-6)
    assert cost_usd(Usage(tokens_in=10, cached_in=50), PRICES) == pytest.approx(10 * 0.25e-6)  # capped at the total
    assert cost_usd(usage, None) is None  # never $0


def test_openai_usage_details_are_read():
    body = {
        "model": "m",
        "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 20,
            "completion_tokens": 9,
            "prompt_tokens_details": {"cached_tokens": 12},
            "completion_tokens_details": {"reasoning_tokens": 5},
        },
    }
    response = chat_response_from_openai(body, default_model="m")
    assert (response.tokens_cached_in, response.tokens_reasoning) == (12, 5)
    assert (
        chat_response_from_openai({**body, "usage": {"prompt_tokens": 1}}, default_model="m").tokens_cached_in is None
    )


def test_model_time_and_ttft_come_from_the_targets_chat_spans_not_the_simulators():
    tracer = Tracer(trace_id="t", run_id="t", keep=True)
    with tracer.span("invoke_agent", "a"):
        with tracer.span("chat", "m") as span:
            span.set(ttft_ms=12.5, tokens_cached_in=3, tokens_reasoning=2)
        with tracer.span("chat", "m"):
            pass
    with tracer.span("user_simulator", "user"):
        with tracer.span("chat", "sim") as span:
            span.set(tokens_cached_in=100)
    latency = case_latency(tracer.events)
    assert latency.model_calls == 2 and (latency.cached_in, latency.reasoning) == (3, 2)
    assert latency.ttft_ms == 12.5 and latency.model_ms is not None and latency.model_ms >= 0
    assert case_latency([]).model_ms is None


def test_tokens_are_reported_estimated_or_absent_and_say_which():
    latency = case_latency([])
    common = {"latency": latency, "case_input": "x" * 40, "output": {"a": 1}, "metadata": {"ttft_ms": 7}}
    assert usage_block(tokens_in=5, tokens_out=1, model="m", **common)["source"] == "reported"
    estimated = usage_block(tokens_in=None, tokens_out=None, model="m", **common)
    assert (estimated["source"], estimated["tokens_in"], estimated["tokens_out"]) == ("estimated", 10, 2)
    assert estimated["ttft_ms"] == 7  # a target's own report, when the trace has none
    assert usage_block(tokens_in=None, tokens_out=None, model=None, **common)["source"] == "none"
    assert (estimate_tokens(None), estimate_tokens(""), estimate_tokens("abcde")) == (0, 0, 2)


def test_t_quantile_and_mean_interval():
    assert t_quantile_975(10) == pytest.approx(2.228, abs=0.002)
    assert t_quantile_975(30) == pytest.approx(2.042, abs=0.001)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile_975(0)
    values = [float(v) for v in range(1, 11)]
    got = mean_t_interval(10, sum(values), sum(v * v for v in values))
    assert got is not None and got.mean == 5.5
    half = 2.2622 * 3.02765 / 10**0.5  # t(0.975, 9) · s / √n
    assert got.low == pytest.approx(5.5 - half, abs=0.01) and got.high == pytest.approx(5.5 + half, abs=0.01)
    small = mean_t_interval(3, 3.0, 3.0)
    assert small is not None and (small.low, small.high) == (None, None)
    assert mean_t_interval(0, 0.0, 0.0) is None


def test_quantile_ranks_are_order_statistics_bracketing_the_quantile():
    ranks = quantile_ranks(100, 0.5)
    assert ranks is not None and ranks.point == 50 and ranks.low == 40 and ranks.high == 61
    p95 = quantile_ranks(40, 0.95)
    assert p95 is not None and p95.point == 38 and p95.high is None  # past the largest value
    few = quantile_ranks(5, 0.5)
    assert few is not None and (few.point, few.low, few.high) == (3, None, None)
    assert quantile_ranks(0, 0.5) is None
    with pytest.raises(ValueError, match="quantile"):
        quantile_ranks(10, 1.0)


def test_cost_gates_parse_with_percent_and_say_partial_coverage():
    gate = parse_gate("delta:cost<=+10%")
    assert gate.threshold == pytest.approx(0.1) and gate.needs_baseline and gate.on_costs
    assert parse_gate("cost_per_case<=0.002").on_costs and not parse_gate("cost_per_case<=0.002").needs_baseline
    with pytest.raises(GateError, match="% threshold"):
        parse_gate("pass_rate>=80%")
    with pytest.raises(GateError, match="delta:cost"):
        parse_gate("delta:latency<=0.1")
    report = ReportBuilder("r").build()
    figures = CostFigures(n_cases=10, n_priced=8, cost_per_case_usd=0.001, n_latency=10, p95_latency_ms=2500.0)
    gates = [parse_gate(t) for t in ("cost_per_case<=0.002", "p95_latency_ms<=2000", "delta:cost<=0.1")]
    cost, latency, delta = check_gates(report, gates, costs=figures)
    assert cost.held and cost.coverage_note == "on n=8/10 cases: 2 not covered"
    assert not latency.held and latency.actual == 2500.0 and latency.coverage_note is None
    assert not delta.held and delta.actual is None  # no baseline: never holds
    (without,) = check_gates(report, gates[:1])
    assert not without.held and without.actual is None
