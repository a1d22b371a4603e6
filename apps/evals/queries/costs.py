"""Cost and latency per run: mean cost per case (target, judge, simulated user apart) with
intervals and coverage, and p50 / p95 wall time with order-statistic intervals.

:func:`cost_latency` reads the figures stored on each run when it was costed (at its end, or by
``evalsite reprice``): one query for any number of runs, whatever their size. A run without them
(still running, or stored before prices existed) is computed from its cost rows
(:func:`apps.evals.results.cost_figures.aggregate_cost_latency`: SQL aggregates).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from apps.evals.models import CaseCost, EvalResult, EvalRun
from apps.evals.results.cost_figures import (
    MEAN_METHOD,
    QUANTILE_METHOD,
    Estimate,
    RunCostLatency,
    aggregate_cost_latency,
    figures_from_record,
)
from evalcore.costs import CostFigures

__all__ = [
    "MEAN_METHOD",
    "QUANTILE_METHOD",
    "Estimate",
    "RunCostLatency",
    "cost_figures",
    "cost_latency",
]

_TABLE = CaseCost._meta.db_table


def cost_latency(run_ids: Sequence[str]) -> dict[str, RunCostLatency]:
    """Cost and latency of each run in ``run_ids`` (an id not found is left out).

    A run with no cost rows yet (still running, or stored before prices existed: ``evalsite
    reprice RUN`` costs it) has ``n_priced == 0`` and every figure ``None``.

    Cost: one query reading ``summary["cost_latency"]`` of the runs; the SQL aggregate of
    :func:`~apps.evals.results.cost_figures.aggregate_cost_latency` for those without it.
    """
    ids = list(dict.fromkeys(run_ids))
    if not ids:
        return {}
    out: dict[str, RunCostLatency] = {}
    missing: list[str] = []
    for run_id, record in EvalRun.objects.filter(pk__in=ids).values_list("pk", "summary__cost_latency"):
        figures = figures_from_record(record) if isinstance(record, dict) else None
        if figures is None:
            missing.append(run_id)
        else:
            out[run_id] = figures
    if missing:
        out.update(aggregate_cost_latency(missing))
    return {run_id: out[run_id] for run_id in ids if run_id in out}


_PAIRED_SQL = f"""
SELECT COUNT(*), SUM(base.total_usd), SUM(cand.total_usd)
FROM {_TABLE} cand
JOIN {EvalResult._meta.db_table} rc ON rc.id = cand.result_id
JOIN {EvalResult._meta.db_table} rb
  ON rb.eval_run_id = %s AND rb.case_id = rc.case_id AND rb.repeat_index = rc.repeat_index
JOIN {_TABLE} base ON base.result_id = rb.id
WHERE cand.eval_run_id = %s AND cand.total_usd IS NOT NULL AND base.total_usd IS NOT NULL
"""


def cost_figures(eval_run_id: str, baseline_id: str | None = None) -> CostFigures:
    """The cost and latency figures the gates read (:class:`evalcore.costs.CostFigures`), with
    ``delta:cost`` against ``baseline_id`` when given: the relative change of the summed cost
    over the cases (and repeats) priced in both runs.

    Cost: :func:`cost_latency` for the run, plus one join of the two runs' cost rows.
    """
    figures = cost_latency([eval_run_id]).get(eval_run_id)
    if figures is None:
        return CostFigures(n_cases=0, n_priced=0, cost_per_case_usd=None)
    delta: float | None = None
    n_paired = 0
    if baseline_id is not None:
        with connection.cursor() as cursor:
            cursor.execute(_PAIRED_SQL, [baseline_id, eval_run_id])
            n, base_total, cand_total = cursor.fetchone()
        n_paired = int(n or 0)
        if n_paired and base_total:
            delta = float(cand_total or 0.0) / float(base_total) - 1.0
    return CostFigures(
        n_cases=figures.n_cases,
        n_priced=figures.n_priced,
        cost_per_case_usd=figures.cost_per_case_usd.value if figures.cost_per_case_usd else None,
        n_latency=figures.n_latency,
        p50_latency_ms=figures.latency_p50_ms.value if figures.latency_p50_ms else None,
        p95_latency_ms=figures.latency_p95_ms.value if figures.latency_p95_ms else None,
        delta_cost=delta,
        n_paired=n_paired,
    )
