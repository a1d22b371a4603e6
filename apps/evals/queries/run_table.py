"""The runs list as a table (issue 26): each run's name, duration, tokens, cost where known, model
and pass rate with its interval, sortable server-side by every column (``?sort=``).

Duration, tokens and cost are computed in SQL from columns and the run's report (``summary``), so
sorting by them works on SQLite and PostgreSQL alike and the heavy JSON columns stay deferred.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import BigIntegerField, F, FloatField, IntegerField, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, NullIf

from apps.evals.models import EvalRun
from evalcore.stats import FigureInterval, proportion_interval

_NEWEST = (F("started").desc(nulls_first=True), "-pk")


def _up(name: str) -> tuple[Any, ...]:
    return (F(name).asc(nulls_last=True), *_NEWEST)


def _down(name: str) -> tuple[Any, ...]:
    return (F(name).desc(nulls_last=True), *_NEWEST)


RUN_SORTS: dict[str, tuple[Any, ...]] = {
    "": _NEWEST,
    "oldest": (F("started").asc(nulls_last=True), "pk"),
    "name": _up("name"),
    "-name": _down("name"),
    "duration": _up("table_duration"),
    "-duration": _down("table_duration"),
    "tokens": _up("table_tokens"),
    "-tokens": _down("table_tokens"),
    "cost": _up("table_cost"),
    "-cost": _down("table_cost"),
    "model": _up("model"),
    "-model": _down("model"),
    "pass_rate": _up("table_pass_rate"),
    "-pass_rate": _down("table_pass_rate"),
    "target": ("target_id", "variant", *_NEWEST),
}
"""The orders of the runs table by ``?sort=`` value (``-x``: high first; a run without the value
sorts last either way; ties newest first). Unknown values read as ``""`` (newest first)."""

SORT_LABELS = {
    "": "newest first",
    "oldest": "oldest first",
    "name": "name",
    "-name": "name, Z first",
    "duration": "duration, short first",
    "-duration": "duration, long first",
    "tokens": "tokens, few first",
    "-tokens": "tokens, many first",
    "cost": "cost, low first",
    "-cost": "cost, high first",
    "model": "model",
    "-model": "model, Z first",
    "-pass_rate": "pass rate, high first",
    "pass_rate": "pass rate, low first",
    "target": "target / variant",
}
"""How the sort picker names each order (the same keys as :data:`RUN_SORTS`)."""


def run_table(runs: QuerySet[EvalRun], sort: str = "") -> QuerySet[EvalRun]:
    """``runs`` with the table's computed columns, in the order ``sort`` names.

    Annotations: ``table_duration`` (``finished - started``; ``None`` until both are set),
    ``table_tokens`` (the report's ``tokens_in + tokens_out``; ``None`` before a report),
    ``table_cost`` (the report's ``cost_usd``; ``None`` unless a price was known: never 0 for
    unknown), ``table_pass_rate`` (``n_passed / n_done``), ``table_repeat`` (the config's
    ``repeat``, for the interval's n).
    """
    tokens_in = Cast(KT("summary__tokens_in"), BigIntegerField())
    tokens_out = Cast(KT("summary__tokens_out"), BigIntegerField())
    return runs.annotate(
        table_duration=F("finished") - F("started"),
        table_tokens=tokens_in + tokens_out,
        table_cost=Cast(KT("summary__cost_usd"), FloatField()),
        table_pass_rate=Cast(F("n_passed"), FloatField()) / NullIf(F("n_done"), 0),
        table_repeat=Cast(KT("config__repeat"), IntegerField()),
    ).order_by(*RUN_SORTS.get(sort, RUN_SORTS[""]))


@dataclass(frozen=True, slots=True)
class RunRow:
    """One row of the runs table.

    Attributes:
        run: The run (annotated by :func:`run_table`).
        duration: Wall time from start to end; ``None`` while it runs or when it never started.
        tokens: Input + output tokens of its target runs; ``None`` before its report or when the
            target reported none.
        cost: US dollars, ``None`` when unknown (shown "—", never 0).
        cases: The distinct cases its pass rate is over (``n_done / repeat``): the interval's n.
        interval: The pass rate's Wilson 95% interval at ``cases`` (reason when none).
    """

    run: EvalRun
    duration: timedelta | None
    tokens: int | None
    cost: float | None
    cases: int
    interval: FigureInterval


def case_level_counts(n_done: int, n_passed: int, repeat: int | None) -> tuple[int, int]:
    """``(passes, n)`` of a run's pass rate with its distinct cases as n: with ``--repeat K`` a
    case's K results are not independent (Miller 2024, arXiv:2411.00640), so n is
    ``ceil(n_done / K)`` and the passes the same share of it (as the trend chart bounds it,
    :mod:`apps.evals.queries.figures`)."""
    if not repeat or repeat <= 1 or n_done <= 0:
        return n_passed, n_done
    cases = max(1, math.ceil(n_done / repeat))
    return min(cases, round(n_passed / n_done * cases)), cases


def run_rows(runs: list[EvalRun]) -> list[RunRow]:
    """A :class:`RunRow` per run of a page of :func:`run_table` (no query)."""
    rows = []
    for run in runs:
        passes, cases = case_level_counts(run.n_done, run.n_passed, getattr(run, "table_repeat", None))
        tokens = getattr(run, "table_tokens", None)
        rows.append(
            RunRow(
                run=run,
                duration=getattr(run, "table_duration", None),
                tokens=tokens or None,  # 0: the target reported no tokens, not "free"
                cost=getattr(run, "table_cost", None),
                cases=cases,
                interval=proportion_interval(passes, cases),
            )
        )
    return rows
