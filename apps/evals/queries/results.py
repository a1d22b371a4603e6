"""Reads of a run's per-case results: one page of the table (filtered, searched, sorted in the
database), a result's neighbours, the newest results, the live high-water mark.

A run's results page stays fast on 100,000-case runs: it never loads all results, and reads one
page through the ``(eval_run, status, id)`` / ``(eval_run, case_id)`` indexes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.core.exceptions import EmptyResultSet
from django.db.models import F, Max, QuerySet

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, ResultStatus
from apps.evals.queries.cached import while_unchanged
from apps.evals.queries.paging import Paged, num_pages
from apps.evals.queries.search import ResultQuery, search_results
from evalcore.errors import InvalidInputError

# NULL placement spelled out: SQLite sorts NULL first ascending, PostgreSQL last. Results with no
# score (errored cases) sort with the lowest scores, on both.
RESULT_ORDERS = {
    "arrival": ("id",),
    "score": (F("score").asc(nulls_first=True), "id"),
    "-score": (F("score").desc(nulls_last=True), "id"),
    "case": ("case_id", "repeat_index"),
}

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
    (exact, and it saves a COUNT over 100k rows); for an ended run a count cached while the run
    is unchanged (:func:`~apps.evals.queries.cached.while_unchanged`, keyed by the filter's SQL: a
    status filter of a million-result run counts ~300,000 rows, once); else a count."""
    if not filtered and eval_run.status == EvalRunStatus.FINISHED:
        return eval_run.n_done
    if eval_run.status in (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING):
        return results.count()
    try:
        sql, params = results.query.sql_with_params()
    except EmptyResultSet:
        return 0
    key = hashlib.sha256(repr((sql, params)).encode()).hexdigest()[:32]
    return while_unchanged(f"filtered-count.1.{key}", (eval_run,), results.count)


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
