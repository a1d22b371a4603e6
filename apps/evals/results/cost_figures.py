"""A run's cost and latency figures (:class:`RunCostLatency`) computed from its cost rows
(:class:`~apps.evals.models.CaseCost`), and their stored form.

One grouped SQL aggregate for every run asked, then a few single-row reads per run on the
``(eval_run, wall_ms)`` index for the wall-time percentiles and their intervals (the medians of
model time and TTFT, unindexed, are one sort each and carry no interval). Costing a run
(:mod:`apps.evals.results.costs`) stores the result in ``EvalRun.summary["cost_latency"]``
(:func:`figures_record`), so a page reads one JSON value per run
(:func:`apps.evals.queries.costs.cost_latency`) however many cases it has.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db import connection

from apps.evals.models import CaseCost, EvalResult, EvalRun
from evalcore.costs import mean_t_interval, quantile_ranks

MEAN_METHOD = "t"
"""How the cost intervals are made: a 95% t-interval over cases (:func:`evalcore.costs.mean_t_interval`)."""

QUANTILE_METHOD = "order-statistic"
"""How the latency intervals are made: distribution-free order statistics (:func:`evalcore.costs.quantile_ranks`)."""


class Estimate(NamedTuple):
    """A figure with its 95% interval: ``(value, lo, hi)``; ``lo`` / ``hi`` ``None`` when the
    sample is too small for that bound (fewer than 10 values, or a p95 rank past the largest)."""

    value: float
    lo: float | None
    hi: float | None


@dataclass(frozen=True, slots=True)
class RunCostLatency:
    """One run's cost and latency figures.

    Attributes:
        eval_run_id: The run.
        n_cases: Its results (cases × repeats).
        n_priced: Results whose whole cost is known (target, and judge / simulated user where they
            spent tokens): the coverage of ``cost_per_case_usd`` is ``n_priced / n_cases``.
        cost_per_case_usd: Mean total USD per priced case with its t-interval; ``None``: none priced.
        cost_target_usd, cost_judge_usd, cost_simulator_usd: The same for each party alone, over the
            cases where that party's cost is known; ``None`` when the run had no such spend (no
            judge, no simulated user) or none of it is priced.
        n_target_priced, n_judge, n_judge_priced, n_simulator, n_simulator_priced: Coverage of each
            party: cases it was priced on, of the cases it took part in (judge / simulator).
        latency_p50_ms, latency_p95_ms: The target's wall time per case (ms), median and 95th
            percentile with order-statistic intervals; ``None``: no timings.
        n_latency: Results with a wall time.
        model_p50_ms: Median model time (sum of the target's model calls), ms, without an interval;
            ``None``: no model spans.
        ttft_p50_ms: Median time to first token, ms, without an interval; ``None``: nothing streamed.
        tokens_estimated: Some target tokens were estimated (the endpoint reported no usage).
        n_tokens_estimated: How many results' target tokens were estimated.
        cost_method, latency_method: How the intervals are made (:data:`MEAN_METHOD`, :data:`QUANTILE_METHOD`).
    """

    eval_run_id: str
    n_cases: int
    n_priced: int
    cost_per_case_usd: Estimate | None
    cost_target_usd: Estimate | None
    cost_judge_usd: Estimate | None
    cost_simulator_usd: Estimate | None
    latency_p50_ms: Estimate | None
    latency_p95_ms: Estimate | None
    tokens_estimated: bool
    n_target_priced: int = 0
    n_judge: int = 0
    n_judge_priced: int = 0
    n_simulator: int = 0
    n_simulator_priced: int = 0
    n_latency: int = 0
    model_p50_ms: Estimate | None = None
    ttft_p50_ms: Estimate | None = None
    n_tokens_estimated: int = 0
    cost_method: str = MEAN_METHOD
    latency_method: str = QUANTILE_METHOD

    @property
    def costed(self) -> bool:
        """Cost rows exist for this run (it finished, or was re-priced)."""
        return self.n_priced > 0 or self.n_target_priced > 0 or self.n_latency > 0

    def cost_line(self) -> str:
        """``cost per case $0.000895 [0.00088, 0.00091] (n=10/10 priced; target $0.000095 …, judge …)``:
        the run's cost in words, with coverage, each party apart, and how tokens were counted."""
        parts = [f"cost per case {_usd(self.cost_per_case_usd)} (n={self.n_priced}/{self.n_cases} priced"]
        if self.n_priced < self.n_cases:
            parts[0] += f"; {self.n_cases - self.n_priced} unpriced: a model with no price, never counted as $0"
        parts[0] += ")"
        parts.append(f"target {_usd(self.cost_target_usd)} (n={self.n_target_priced}/{self.n_cases})")
        if self.n_judge:
            parts.append(f"judge {_usd(self.cost_judge_usd)} (n={self.n_judge_priced}/{self.n_judge})")
        if self.n_simulator:
            parts.append(
                f"simulated user {_usd(self.cost_simulator_usd)} (n={self.n_simulator_priced}/{self.n_simulator})"
            )
        tokens = (
            f"target tokens estimated from text length on {self.n_tokens_estimated} case(s)"
            if self.tokens_estimated
            else "tokens as the endpoint reported them"
        )
        return " · ".join(parts) + f" · {tokens} · 95% t-intervals over cases"

    def latency_line(self) -> str:
        """``latency p50 812 ms [790, 840] · p95 1,930 ms [1,850, —] (n=10/10) · model time p50 …``."""
        coverage = f"n={self.n_latency}/{self.n_cases}"
        parts = [f"latency p50 {_ms(self.latency_p50_ms)} · p95 {_ms(self.latency_p95_ms)} ({coverage})"]
        if self.model_p50_ms is not None:
            parts.append(f"model time p50 {_ms(self.model_p50_ms)}")
        if self.ttft_p50_ms is not None:
            parts.append(f"time to first token p50 {_ms(self.ttft_p50_ms)}")
        return " · ".join(parts) + " · 95% order-statistic intervals"


def _usd(estimate: Estimate | None) -> str:
    if estimate is None:
        return "—"
    value, lo, hi = estimate
    bounds = f" [{_g(lo)}, {_g(hi)}]" if lo is not None or hi is not None else ""
    return f"${_g(value)}{bounds}"


def _g(value: float | None) -> str:
    """Three significant digits, never in exponent form (``0.0000950``, ``0.000895``, ``12.3``)."""
    if value is None:
        return "—"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


def _ms(estimate: Estimate | None) -> str:
    if estimate is None:
        return "—"
    value, lo, hi = estimate
    low = "—" if lo is None else f"{lo:,.0f}"
    high = "—" if hi is None else f"{hi:,.0f}"
    bounds = f" [{low}, {high}]" if lo is not None or hi is not None else ""
    return f"{value:,.0f} ms{bounds}"


_TABLE = CaseCost._meta.db_table

# one row per run: counts, sums and sums of squares of each cost column (NULL: unpriced / absent)
_AGGREGATE_SQL = f"""
SELECT eval_run_id,
       COUNT(total_usd), SUM(total_usd), SUM(total_usd * total_usd),
       COUNT(target_usd), SUM(target_usd), SUM(target_usd * target_usd),
       SUM(CASE WHEN judge_calls > 0 OR judge_usd IS NOT NULL THEN 1 ELSE 0 END),
       COUNT(judge_usd), SUM(judge_usd), SUM(judge_usd * judge_usd),
       SUM(CASE WHEN simulator_calls > 0 OR simulator_usd IS NOT NULL THEN 1 ELSE 0 END),
       COUNT(simulator_usd), SUM(simulator_usd), SUM(simulator_usd * simulator_usd),
       SUM(CASE WHEN tokens_estimated THEN 1 ELSE 0 END),
       COUNT(wall_ms), COUNT(model_ms), COUNT(ttft_ms)
FROM {_TABLE}
WHERE eval_run_id IN ({{placeholders}})
GROUP BY eval_run_id
"""


def aggregate_cost_latency(run_ids: Sequence[str]) -> dict[str, RunCostLatency]:
    """Cost and latency of each run in ``run_ids`` computed from its cost rows (an id not found is
    left out); :func:`apps.evals.queries.costs.cost_latency` reads the copy stored when the run was
    costed, and this for a run without one.

    A run with no cost rows yet (still running, or stored before prices existed: ``evalsite
    reprice RUN`` costs it) has ``n_priced == 0`` and every figure ``None``.

    Cost: one grouped aggregate over the runs' cost rows, one count of their results, and up to
    nine single-row index reads per run (three ranks each of p50, p95 and the model-time median).
    """
    ids = list(dict.fromkeys(run_ids))
    if not ids:
        return {}
    counts = _result_counts(ids)
    placeholders = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(_AGGREGATE_SQL.format(placeholders=placeholders), ids)
        rows = {row[0]: row[1:] for row in cursor.fetchall()}
    out: dict[str, RunCostLatency] = {}
    for run_id in ids:
        if run_id not in counts:
            continue
        row = rows.get(run_id)
        if row is None:
            out[run_id] = RunCostLatency(
                eval_run_id=run_id,
                n_cases=counts[run_id],
                n_priced=0,
                cost_per_case_usd=None,
                cost_target_usd=None,
                cost_judge_usd=None,
                cost_simulator_usd=None,
                latency_p50_ms=None,
                latency_p95_ms=None,
                tokens_estimated=False,
            )
            continue
        (n_total, s_total, q_total, n_target, s_target, q_target, n_judge, n_judge_priced, s_judge, q_judge) = row[:10]
        (n_sim, n_sim_priced, s_sim, q_sim, n_est, n_wall, n_model, n_ttft) = row[10:]
        out[run_id] = RunCostLatency(
            eval_run_id=run_id,
            n_cases=counts[run_id],
            n_priced=int(n_total),
            cost_per_case_usd=_mean(n_total, s_total, q_total),
            cost_target_usd=_mean(n_target, s_target, q_target),
            cost_judge_usd=_mean(n_judge_priced, s_judge, q_judge),
            cost_simulator_usd=_mean(n_sim_priced, s_sim, q_sim),
            latency_p50_ms=_quantile(run_id, "wall_ms", int(n_wall), 0.5),
            latency_p95_ms=_quantile(run_id, "wall_ms", int(n_wall), 0.95),
            tokens_estimated=bool(n_est),
            n_target_priced=int(n_target),
            n_judge=int(n_judge or 0),
            n_judge_priced=int(n_judge_priced),
            n_simulator=int(n_sim or 0),
            n_simulator_priced=int(n_sim_priced),
            n_latency=int(n_wall),
            model_p50_ms=_quantile(run_id, "model_ms", int(n_model), 0.5),
            ttft_p50_ms=_quantile(run_id, "ttft_ms", int(n_ttft), 0.5),
            n_tokens_estimated=int(n_est or 0),
        )
    return out


def _result_counts(ids: list[str]) -> dict[str, int]:
    counts = {run_id: 0 for run_id in _existing(ids)}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT eval_run_id, COUNT(*) FROM {EvalResult._meta.db_table} "
            f"WHERE eval_run_id IN ({', '.join(['%s'] * len(ids))}) GROUP BY eval_run_id",
            ids,
        )
        counts.update({run_id: int(n) for run_id, n in cursor.fetchall()})
    return counts


def _existing(ids: list[str]) -> list[str]:
    return list(EvalRun.objects.filter(pk__in=ids).values_list("pk", flat=True))


def _mean(n: int | None, total: float | None, total_sq: float | None) -> Estimate | None:
    interval = mean_t_interval(int(n or 0), float(total or 0.0), float(total_sq or 0.0))
    if interval is None:
        return None
    return Estimate(interval.mean, interval.low, interval.high)


def _quantile(run_id: str, column: str, n: int, q: float) -> Estimate | None:
    ranks = quantile_ranks(n, q)
    if ranks is None:
        return None
    if column not in _INDEXED:  # one sort for the point; its interval would cost two more
        return Estimate(_kth(run_id, column, ranks.point), None, None)
    value = _kth(run_id, column, ranks.point)
    low = _kth(run_id, column, ranks.low) if ranks.low is not None else None
    high = _kth(run_id, column, ranks.high) if ranks.high is not None else None
    return Estimate(value, low, high)


_INDEXED = ("wall_ms",)
"""Columns with an ``(eval_run, column)`` index: the k-th value is an index walk, no sort."""


def _kth(run_id: str, column: str, rank: int) -> float:
    """The ``rank``-th smallest (1-based) non-null ``column`` of the run's cost rows."""
    assert column in ("wall_ms", "model_ms", "ttft_ms")  # never text from outside
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {column} FROM {_TABLE} WHERE eval_run_id = %s AND {column} IS NOT NULL "
            f"ORDER BY {column} LIMIT 1 OFFSET %s",
            [run_id, rank - 1],
        )
        row = cursor.fetchone()
    return float(row[0])


def figures_record(figures: RunCostLatency) -> dict[str, Any]:
    """The JSON form stored on the run (``summary["cost_latency"]``): an estimate as a list
    ``[value, lo, hi]``."""
    return {
        f.name: (list(value) if isinstance(value := getattr(figures, f.name), tuple) else value)
        for f in dataclasses.fields(figures)
    }


_ESTIMATES = frozenset(f.name for f in dataclasses.fields(RunCostLatency) if "Estimate" in str(f.type))


def figures_from_record(record: Mapping[str, Any]) -> RunCostLatency | None:
    """The figures back from their stored form; ``None`` when it is not one (an older shape)."""
    try:
        values: dict[str, Any] = {
            key: (Estimate(*value) if key in _ESTIMATES and value is not None else value)
            for key, value in record.items()
            if key in _NAMES
        }
        return RunCostLatency(**values)
    except (TypeError, ValueError):
        return None


_NAMES = frozenset(f.name for f in dataclasses.fields(RunCostLatency))
