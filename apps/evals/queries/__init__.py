"""Reads of the evals app (selectors): one function per question, used by pages, API and CLI.

Writes live in ``services``. Submodules: :mod:`~apps.evals.queries.compare` (two runs case by
case) and :mod:`~apps.evals.queries.figures` (per-split and trend series shown as charts).

A run's results page stays fast on 100,000-case runs: it never loads all results, and reads one
page through the ``(eval_run, status, id)`` / ``(eval_run, case_id)`` indexes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, FloatField, Max, Q, QuerySet
from django.db.models.functions import Cast, NullIf

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalRunStatus, EvalSet, ResultStatus, Split
from apps.evals.queries.search import ResultQuery, search_results
from apps.evals.queries.tags import has_tag
from evalcore.errors import InvalidInputError
from evalcore.splits import ALL
from evalcore.types import SPLITS

# NULL placement spelled out: SQLite sorts NULL first ascending, PostgreSQL last. Results with no
# score (errored cases) sort with the lowest scores, on both.
RESULT_ORDERS = {
    "arrival": ("id",),
    "score": (F("score").asc(nulls_first=True), "id"),
    "-score": (F("score").desc(nulls_last=True), "id"),
    "case": ("case_id", "repeat_index"),
}
# Newest run first; runs queued but not started yet (``started`` NULL) come before all of them.
# Spelled out because the default differs: SQLite sorts NULL last in descending order,
# PostgreSQL first.
NEWEST_FIRST = F("started").desc(nulls_first=True)

# Columns of traces.Run a result row shows; final_answer / metadata may be large and are not read.
_RUN_FIELDS = ("run__id", "run__run_id", "run__status", "run__elapsed_ms", "run__tokens_in", "run__tokens_out")

RESULT_ROW_FIELDS = (
    "id",
    "eval_run_id",
    "case_id",
    "repeat_index",
    "split",
    "scores",
    "passed",
    "status",
    "reason",
    "score",
    *_RUN_FIELDS,
)
"""The columns a result row of a table or a comparison shows (the large JSON columns stay unread)."""


class Paged:
    """Pagination helpers over ``page`` / ``num_pages``, shaped like Django's ``Page`` so one
    pager template serves every paginated view."""

    page: int
    num_pages: int

    @property
    def has_next(self) -> bool:
        return self.page < self.num_pages

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def number(self) -> int:
        return self.page

    @property
    def paginator(self) -> Any:
        return self

    def previous_page_number(self) -> int:
        return self.page - 1

    def next_page_number(self) -> int:
        return self.page + 1


def num_pages(total: int, page_size: int) -> int:
    """Pages needed for ``total`` rows (at least 1)."""
    return max(1, -(-total // page_size))


@dataclass(slots=True)
class ResultsPage(Paged):
    """One page of an eval run's results.

    Attributes:
        rows: ``EvalResult`` objects with ``run`` joined (light columns only).
        page, page_size: The page shown (1-based) and its size.
        total: Results matching the filter.
        num_pages: Pages in all (>= 1).
        max_id: Highest result id of the whole run (the live high-water mark), 0 when none.
    """

    rows: list[EvalResult]
    page: int
    page_size: int
    total: int
    num_pages: int
    max_id: int


# -- sets and cases ------------------------------------------------------------------------------


def split_counts_by_set() -> dict[int, dict[str, int]]:
    """``{set id: {split: cases}}`` for every set with cases, every split present (0 when empty).

    One grouped query over the ``(eval_set, split)`` index; a set with no case is absent.
    """
    counts: dict[int, dict[str, int]] = {}
    for row in EvalCase.objects.values("eval_set_id", "split").annotate(n=Count("id")).order_by():
        counts.setdefault(row["eval_set_id"], dict.fromkeys(SPLITS, 0))[row["split"]] = row["n"]
    return counts


def set_listing(name: str | None = None) -> QuerySet[EvalSet]:
    """The sets by name (``name``: that one only), each annotated with its cases per split
    (``n_train``, ``n_dev``, ``n_test``), for a paginated list: the counts come with the page's
    rows in one grouped query."""
    sets = EvalSet.objects.order_by("name", "pk")
    if name is not None:
        sets = sets.filter(name=name)
    return sets.annotate(**{f"n_{split}": Count("cases", filter=Q(cases__split=split)) for split in SPLITS})


def split_counts(eval_set: EvalSet) -> dict[str, int]:
    """Cases per split of one set, every split present (0 when empty): ``{"train": n, ...}``."""
    counts = dict.fromkeys(SPLITS, 0)
    for row in EvalCase.objects.filter(eval_set=eval_set).values("split").annotate(n=Count("id")).order_by():
        counts[row["split"]] = row["n"]
    return counts


def eval_run_counts_by_set() -> dict[int, int]:
    """``{set id: eval runs}`` for every set with runs (one grouped query)."""
    rows = EvalRun.objects.values("eval_set_id").annotate(n=Count("id")).order_by()
    return {row["eval_set_id"]: row["n"] for row in rows}


def set_cases(
    eval_set: EvalSet, *, split: str | None = None, tag: str | None = None, search: str | None = None
) -> QuerySet[EvalCase]:
    """A set's cases in file order, filtered (``None`` = no filter): split, tag, case-id substring."""
    cases = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id")
    if split:
        cases = cases.filter(split=split)
    if tag:
        cases = cases.filter(has_tag(tag))
    if search:
        cases = cases.filter(case_id__icontains=search)
    return cases


# -- eval runs ----------------------------------------------------------------------------------


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


# -- results -----------------------------------------------------------------------------------


def filter_results(
    results: QuerySet[EvalResult], *, status: str | None = None, search: str | None = None
) -> QuerySet[EvalResult]:
    """``results`` narrowed to one status and a case-id substring (case-insensitive); ``None``: all.

    Raises:
        InvalidInputError: An unknown status.
    """
    if status:
        if status not in ResultStatus.values:
            raise InvalidInputError(
                f"unknown status {status!r}; choose one of {', '.join(ResultStatus.values)}", field="status"
            )
        results = results.filter(status=status)
    if search:
        results = results.filter(case_id__icontains=search)
    return results


def result_rows(eval_run: EvalRun) -> QuerySet[EvalResult]:
    """The base queryset of result rows as the table renders them (run joined, light columns)."""
    return EvalResult.objects.filter(eval_run=eval_run).select_related("run").only(*RESULT_ROW_FIELDS)


def ordered_results(results: QuerySet[EvalResult], order: str | None) -> QuerySet[EvalResult]:
    """``results`` sorted by ``arrival`` (default), ``score``, ``-score`` or ``case``.

    Raises:
        InvalidInputError: An unknown order.
    """
    if order and order not in RESULT_ORDERS:
        raise InvalidInputError(f"unknown order {order!r}; choose one of {', '.join(RESULT_ORDERS)}", field="order")
    return results.order_by(*RESULT_ORDERS[order or "arrival"])


def filtered_total(eval_run: EvalRun, results: QuerySet[EvalResult], *, filtered: bool) -> int:
    """How many results ``results`` holds: the run's own counter when unfiltered and finished
    (exact, and it saves a COUNT over 100k rows), else a count."""
    if not filtered and eval_run.status == EvalRunStatus.FINISHED:
        return eval_run.n_done
    return results.count()


def run_results(
    eval_run: EvalRun,
    *,
    status: str | None = None,
    search: str | None = None,
    order: str | None = None,
    page: int = 1,
    page_size: int = 50,
    query: ResultQuery | None = None,
) -> ResultsPage:
    """One page of an eval run's results, filtered, searched and sorted in the database.

    Args:
        eval_run: The run.
        status: ``passed`` / ``failed`` / ``errored`` / ``unscored`` or ``None`` for all.
        search: Case-id substring (case-insensitive).
        order: One of ``arrival`` (default), ``score``, ``-score``, ``case``.
        page: 1-based; clamped to the last page.
        page_size: Rows per page (1..500).
        query: Full text, tag, metadata and ranges (:class:`ResultQuery`), or ``None``.

    Raises:
        InvalidInputError: Unknown status or order; a bad ``query``.
    """
    rows = filter_results(result_rows(eval_run), status=status, search=search)
    searched = query is not None and query.active
    if query is not None and searched:
        rows = search_results(rows, eval_run, query)
    ordered = ordered_results(rows, order)
    page_size = min(max(page_size, 1), 500)
    total = filtered_total(eval_run, rows, filtered=bool(status or search or searched))
    pages = num_pages(total, page_size)
    page = min(max(page, 1), pages)
    start = (page - 1) * page_size
    return ResultsPage(list(ordered[start : start + page_size]), page, page_size, total, pages, max_result_id(eval_run))


def neighbours(result: EvalResult, *, status: str | None, search: str | None) -> tuple[int | None, int | None]:
    """Ids of the previous and next result of the same run within a filter (arrival order)."""
    siblings = filter_results(EvalResult.objects.filter(eval_run_id=result.eval_run_id), status=status, search=search)
    previous = siblings.filter(id__lt=result.id).order_by("-id").values_list("id", flat=True).first()
    following = siblings.filter(id__gt=result.id).order_by("id").values_list("id", flat=True).first()
    return previous, following


def latest_results(eval_run: EvalRun, limit: int) -> list[EvalResult]:
    """The ``limit`` newest results of a run, newest first (``run`` joined)."""
    return list(EvalResult.objects.filter(eval_run=eval_run).select_related("run").order_by("-id")[:limit])


def max_result_id(eval_run: EvalRun) -> int:
    """Highest result id of a run (the live high-water mark), 0 when none."""
    return EvalResult.objects.filter(eval_run=eval_run).aggregate(m=Max("id"))["m"] or 0
