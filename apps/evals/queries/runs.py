"""Reads of eval runs: the run history in its orders, the compare picker's recent runs, runs per
set and how often a set's test split was used."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, FloatField, QuerySet
from django.db.models.functions import Cast, NullIf

from apps.evals.models import EvalRun, EvalRunStatus, EvalSet, Split
from evalcore.errors import InvalidInputError
from evalcore.splits import ALL

# Newest run first; runs queued but not started yet (``started`` NULL) come before all of them.
# Spelled out because the default differs: SQLite sorts NULL last in descending order,
# PostgreSQL first.
NEWEST_FIRST = F("started").desc(nulls_first=True)


RUN_ORDERS: dict[str, tuple[Any, ...]] = {
    "": (NEWEST_FIRST, "-pk"),
    "oldest": (F("started").asc(nulls_last=True), "pk"),
    "-pass_rate": (F("sort_pass_rate").desc(nulls_last=True), NEWEST_FIRST, "-pk"),
    "pass_rate": (F("sort_pass_rate").asc(nulls_last=True), NEWEST_FIRST, "-pk"),
    "name": ("name", NEWEST_FIRST, "-pk"),
    "target": ("target_id", "variant", NEWEST_FIRST, "-pk"),
}
"""Orders of the run history (``""``: newest first, queued ones before all)."""


def eval_run_history(
    *,
    set_id: int | None = None,
    target_id: str | None = None,
    variant: str | None = None,
    split: str | None = None,
    status: str | None = None,
    order: str = "",
) -> QuerySet[EvalRun]:
    """Eval runs in ``order`` (a key of :data:`RUN_ORDERS`; unknown: newest first), filtered;
    ``None`` means no filter.

    An empty ``variant`` is a filter (runs without a variant), not "any". The heavy JSON
    columns (summary, config, scorer specs) are deferred; ``eval_set`` and ``created_by`` are
    joined.

    Raises:
        InvalidInputError: An unknown status.
    """
    if status is not None and status not in EvalRunStatus.values:
        raise InvalidInputError(
            f"unknown status {status!r}; choose one of {', '.join(EvalRunStatus.values)}", field="status"
        )
    runs = EvalRun.objects.select_related("eval_set", "created_by").defer("summary", "config", "scorer_specs")
    for name, value in (
        ("eval_set_id", set_id),
        ("target_id", target_id),
        ("variant", variant),
        ("split", split),
        ("status", status),
    ):
        if value is not None:
            runs = runs.filter(**{name: value})
    if order in ("pass_rate", "-pass_rate"):
        passed = Cast(F("n_passed"), FloatField())
        runs = runs.annotate(sort_pass_rate=passed / NullIf(F("n_done"), 0))
    return runs.order_by(*RUN_ORDERS.get(order, RUN_ORDERS[""]))


def latest_runs(eval_set_id: int | None = None, limit: int = 200) -> QuerySet[EvalRun]:
    """Recent runs (newest first) for the compare picker, optionally of one set."""
    runs = EvalRun.objects.select_related("eval_set").order_by(NEWEST_FIRST, "-pk")
    if eval_set_id is not None:
        runs = runs.filter(eval_set_id=eval_set_id)
    return runs[:limit]


def test_split_runs(eval_set: EvalSet, *, variant: str | None = None, target_id: str | None = None) -> int:
    """How many eval runs touched the test split of a set (``all`` includes test; re-scores not counted)."""
    runs = EvalRun.objects.filter(eval_set=eval_set, split__in=[Split.TEST, ALL], source_eval_run__isnull=True)
    if variant is not None:
        runs = runs.filter(variant=variant)
    if target_id is not None:
        runs = runs.filter(target_id=target_id)
    return runs.count()


def eval_run_counts_by_set() -> dict[int, int]:
    """``{set id: eval runs}`` for every set with runs (one grouped query)."""
    rows = EvalRun.objects.values("eval_set_id").annotate(n=Count("id")).order_by()
    return {row["eval_set_id"]: row["n"] for row in rows}
