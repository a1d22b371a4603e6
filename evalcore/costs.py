"""Cost and latency of a case: prices per million tokens, token usage (reported or estimated),
model time and time to first token, and the intervals a run's figures carry.

Plain values only (no Django): the portal stores the results (``apps.evals.models.CaseCost``) and
aggregates them in SQL; the statistics here say which rows to read and how to turn sums into an
interval.

Token accounting follows OpenAI's ``usage``: ``prompt_tokens`` include the cached ones
(``prompt_tokens_details.cached_tokens``) and ``completion_tokens`` include the reasoning ones
(``completion_tokens_details.reasoning_tokens``); each part is priced at its own rate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evalcore.simulator import SPAN_KIND as SIMULATOR_SPAN
from evalcore.stats import MIN_INTERVAL_CASES, Z_95
from evalcore.tracing import TraceEvent

CHARS_PER_TOKEN = 4.0
"""Characters per token when an endpoint reported no usage (OpenAI's rule of thumb for English
text); tokens counted this way are labelled *estimated* everywhere they are shown."""

MODEL_SPAN = "chat"
"""Span kind of one model call (OpenTelemetry GenAI's ``chat``): its ``elapsed_ms`` is model time."""


@dataclass(frozen=True, slots=True)
class Prices:
    """One model's prices, USD per million tokens.

    Attributes:
        model: The model name the prices apply to.
        input: Prompt tokens not read from the cache.
        output: Completion tokens that are not reasoning tokens.
        cached_input: Prompt tokens the endpoint reports as cached.
        reasoning: Completion tokens the endpoint reports as reasoning.
        version: The price table's version of these figures (0: not from a table).
    """

    model: str
    input: float
    output: float
    cached_input: float
    reasoning: float
    version: int = 0


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one party (target, judge or simulated user) spent on one case.

    Attributes:
        tokens_in: Prompt tokens, cached ones included.
        tokens_out: Completion tokens, reasoning ones included.
        cached_in: Of ``tokens_in``, those read from the prompt cache.
        reasoning: Of ``tokens_out``, the reasoning tokens.
        estimated: The endpoint reported nothing: counts estimated from text length.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cached_in: int = 0
    reasoning: int = 0
    estimated: bool = False


def cost_usd(usage: Usage, prices: Prices | None) -> float | None:
    """What ``usage`` cost at ``prices``, USD; ``None`` when the model has no price (unpriced is
    never $0).

    cost = ((in − cached)·input + cached·cached_input + (out − reasoning)·output +
    reasoning·reasoning) / 10⁶, with the cached and reasoning parts capped at their totals.
    """
    if prices is None:
        return None
    cached = min(max(usage.cached_in, 0), usage.tokens_in)
    reasoning = min(max(usage.reasoning, 0), usage.tokens_out)
    return (
        (usage.tokens_in - cached) * prices.input
        + cached * prices.cached_input
        + (usage.tokens_out - reasoning) * prices.output
        + reasoning * prices.reasoning
    ) / 1_000_000.0


def estimate_tokens(value: Any) -> int:
    """Tokens of ``value`` by :data:`CHARS_PER_TOKEN` (a string as it is, anything else as
    compact JSON); at least 1 for a non-empty value, 0 for ``None`` / ``""``."""
    if value is None:
        return 0
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


@dataclass(frozen=True, slots=True)
class CaseLatency:
    """What the trace of one case says about its model calls.

    Attributes:
        model_ms: Sum of the target's model-call spans, ms (``None``: no model span).
        ttft_ms: Time to the first token of the first model call that streamed, ms (``None``:
            none streamed, or no target reported it).
        cached_in: Cached prompt tokens the target's model calls reported.
        reasoning: Reasoning tokens the target's model calls reported.
        model_calls: The target's model calls.
    """

    model_ms: float | None
    ttft_ms: float | None
    cached_in: int
    reasoning: int
    model_calls: int


def case_latency(events: Iterable[TraceEvent]) -> CaseLatency:
    """Model time, TTFT and the cache / reasoning token counts of one case, from its trace.

    Reads the ``span_end`` events of kind :data:`MODEL_SPAN` that are not inside a
    :data:`SIMULATOR_SPAN` (the simulated user's calls are not the target's); a span's
    ``ttft_ms``, ``tokens_cached_in`` and ``tokens_reasoning`` attributes are set by a model
    client that knows them (:class:`evalcore.runtime.agent.Agent` copies them from the response).
    """
    parents: dict[str, str | None] = {}
    kinds: dict[str, str] = {}
    ends: list[dict[str, Any]] = []
    for event in events:
        payload = event.payload
        span_id = payload.get("span_id")
        if event.type == "span_begin" and isinstance(span_id, str):
            parents[span_id] = payload.get("parent_span_id")
            kinds[span_id] = str(payload.get("kind") or "")
        elif event.type == "span_end" and payload.get("kind") == MODEL_SPAN:
            ends.append(payload)
    model_ms = 0.0
    ttft: float | None = None
    cached = reasoning = calls = 0
    for payload in ends:
        if _under(payload.get("parent_span_id"), parents, kinds, SIMULATOR_SPAN):
            continue
        calls += 1
        model_ms += float(payload.get("elapsed_ms") or 0.0)
        if ttft is None and isinstance(payload.get("ttft_ms"), int | float):
            ttft = float(payload["ttft_ms"])
        cached += _count(payload.get("tokens_cached_in"))
        reasoning += _count(payload.get("tokens_reasoning"))
    return CaseLatency(model_ms if calls else None, ttft, cached, reasoning, calls)


def _under(span_id: Any, parents: Mapping[str, str | None], kinds: Mapping[str, str], kind: str) -> bool:
    seen = 0
    while isinstance(span_id, str) and seen < 1000:
        if kinds.get(span_id) == kind:
            return True
        span_id = parents.get(span_id)
        seen += 1
    return False


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_block(
    *,
    latency: CaseLatency,
    tokens_in: int | None,
    tokens_out: int | None,
    model: str | None,
    case_input: Any,
    output: Any,
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """The run record's ``metadata["usage"]``: how the target's tokens were counted, its cached /
    reasoning tokens, model time and TTFT.

    ``source`` is ``reported`` when the target reported tokens, ``estimated`` when it named a
    model but reported none (then ``tokens_in`` / ``tokens_out`` here are estimates from the
    input's and output's length, :func:`estimate_tokens`; the run's own token fields stay empty),
    ``none`` when there is no model to price. A target may report ``ttft_ms`` / ``model_ms`` in
    its metadata; the trace's figures win when it has model spans.
    """
    block: dict[str, Any] = {
        "model_ms": latency.model_ms if latency.model_ms is not None else _ms(metadata.get("model_ms")),
        "ttft_ms": latency.ttft_ms if latency.ttft_ms is not None else _ms(metadata.get("ttft_ms")),
        "cached_in": latency.cached_in,
        "reasoning": latency.reasoning,
    }
    if tokens_in is not None or tokens_out is not None:
        block["source"] = "reported"
    elif model:
        block.update(source="estimated", tokens_in=estimate_tokens(case_input), tokens_out=estimate_tokens(output))
    else:
        block["source"] = "none"
    return block


def _ms(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


# -- intervals -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MeanInterval:
    """A mean over cases with its 95% t-interval (``low``/``high`` ``None`` below
    :data:`~evalcore.stats.MIN_INTERVAL_CASES` cases)."""

    mean: float
    low: float | None
    high: float | None
    n: int


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom, by the Cornish–Fisher
    expansion of Hill (1970, CACM algorithm 396) around the normal quantile; within 0.002 of the
    exact value from ``df = 5`` on.

    Raises:
        ValueError: ``df < 1``.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    z = Z_95
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_t_interval(n: int, total: float, total_sq: float) -> MeanInterval | None:
    """The mean of ``n`` values from their sum and sum of squares (what SQL's ``SUM`` gives), with
    the t-interval mean ± t₀.₉₇₅,ₙ₋₁ · s/√n over cases (Student 1908); ``None`` at n = 0.

    Costs are skewed, so the interval is the large-sample one: fine from tens of cases, rough
    below; under :data:`~evalcore.stats.MIN_INTERVAL_CASES` there is none.
    """
    if n <= 0:
        return None
    mean = total / n
    if n < MIN_INTERVAL_CASES:
        return MeanInterval(mean, None, None, n)
    variance = max(0.0, (total_sq - n * mean * mean) / (n - 1))
    half = t_quantile_975(n - 1) * math.sqrt(variance / n)
    return MeanInterval(mean, mean - half, mean + half, n)


@dataclass(frozen=True, slots=True)
class QuantileRanks:
    """Which order statistics (1-based ranks in ascending order) give a quantile and its interval.

    Attributes:
        point: The nearest-rank estimate ``ceil(q·n)``.
        low, high: The ranks bounding a ~95% distribution-free interval, ``None`` when the sample
            is too small for that side (fewer than :data:`~evalcore.stats.MIN_INTERVAL_CASES`
            values, or the rank would fall outside 1..n).
    """

    point: int
    low: int | None
    high: int | None


def quantile_ranks(n: int, q: float) -> QuantileRanks | None:
    """The order statistics of the ``q`` quantile of ``n`` values and its 95% interval.

    The interval is the distribution-free order-statistic one: the number of values below the
    true quantile is Binomial(n, q), so the ranks ``n·q ∓ 1.96·√(n·q·(1−q))`` (rounded outwards)
    bracket it with ~95% coverage (Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2,
    the large-sample form). ``None`` at n = 0.

    Raises:
        ValueError: ``q`` outside (0, 1).
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if n <= 0:
        return None
    point = min(n, max(1, math.ceil(q * n)))
    if n < MIN_INTERVAL_CASES:
        return QuantileRanks(point, None, None)
    spread = Z_95 * math.sqrt(n * q * (1.0 - q))
    low = math.floor(n * q - spread)
    high = math.ceil(n * q + spread) + 1
    return QuantileRanks(point, low if low >= 1 else None, high if high <= n else None)


# -- gates ---------------------------------------------------------------------------------


COST_METRICS = ("cost_per_case", "p50_latency_ms", "p95_latency_ms")
"""Gate metrics read from a run's cost and latency figures (:class:`CostFigures`)."""

COST_BASELINE_METRICS = ("delta:cost",)
"""Cost gate metrics that compare with a baseline run."""


@dataclass(frozen=True, slots=True)
class CostFigures:
    """A run's cost and latency, as the gates read them (plain values: the portal computes them).

    Attributes:
        n_cases: The run's results.
        n_priced: Results whose whole cost is known.
        cost_per_case_usd: Mean USD per priced case (``None``: none priced).
        n_latency: Results with a wall time.
        p50_latency_ms, p95_latency_ms: Nearest-rank percentiles of the wall time, ms.
        delta_cost: Relative change of the mean cost per case against the baseline on the cases
            priced in both runs (``mean_run / mean_baseline − 1``: ``0.1`` is 10% dearer);
            ``None`` without a baseline, without such cases, or with a baseline that cost $0.
        n_paired: Cases priced in both runs (``k`` of ``delta_cost``'s ``n=k/N``).
    """

    n_cases: int
    n_priced: int
    cost_per_case_usd: float | None
    n_latency: int = 0
    p50_latency_ms: float | None = None
    p95_latency_ms: float | None = None
    delta_cost: float | None = None
    n_paired: int = 0

    def metric(self, name: str) -> float | None:
        """The value of a cost gate metric (``None``: not measured)."""
        values = {
            "cost_per_case": self.cost_per_case_usd,
            "p50_latency_ms": self.p50_latency_ms,
            "p95_latency_ms": self.p95_latency_ms,
            "delta:cost": self.delta_cost,
        }
        return values.get(name)

    def coverage(self, name: str) -> int:
        """Cases a cost gate metric covers (``k`` of ``n=k/N``, ``N`` being :attr:`n_cases`)."""
        if name == "cost_per_case":
            return self.n_priced
        if name == "delta:cost":
            return self.n_paired
        return self.n_latency
