"""The other exports: two runs compared case by case, a run's review queue, a set's cases.

* Comparison: one row per case and repeat of either run: the case's record (as run A was scored
  against it; B's, for a case only B has) and, under
  ``evalsite``, both results (``a``, ``b``: status, verdict, score, output, reviews...), the flip
  kind (``regression`` pass -> fail, ``improvement`` fail -> pass, ``same``; ``only_a`` /
  ``only_b`` for a case one run lacks) and B's score minus A's. In A's storage order, then B's
  cases A lacks.
* Review queue: the results of a run, or of a set's runs (its queue across runs), in queue order
  (:mod:`apps.evals.queries.review_queue`, narrowed by one of its filters), each with its run,
  its place, why it is there and its reviews.
* Set: the cases as canonical records (no ``evalsite`` key), in the set's order.

Rows are read :data:`~apps.evals.exports.run_rows.CHUNK` at a time, as the run export's are.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import batched
from typing import Any

from django.db.models import Q, QuerySet

from apps.evals.exports.run_rows import (
    CHUNK,
    RESULT_FIELDS,
    ROOT,
    ExportTable,
    case_fields,
    result_chunks,
    result_columns,
    result_data,
    reviews_by_result,
    scored_cases,
)
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from apps.evals.queries.compare import check_comparable
from apps.evals.queries.review_queue import QUEUE_FILTERS, ReviewQueue
from evalcore.errors import InvalidInputError
from evalcore.tables import CASE_COLUMNS, columns

KINDS = ("regression", "improvement", "same", "only_a", "only_b")
"""The flip kinds of a comparison row."""


def flip_kind(a: EvalResult | None, b: EvalResult | None) -> str:
    """How the case moved from A to B (see :data:`KINDS`)."""
    if b is None:
        return "only_a"
    if a is None:
        return "only_b"
    if a.passed and not b.passed:
        return "regression"
    if b.passed and not a.passed:
        return "improvement"
    return "same"


def _side(result: EvalResult | None, reviews: dict[int, list[dict[str, Any]]]) -> dict[str, Any] | None:
    return None if result is None else result_data(result, reviews.get(result.pk, []))


def compare_table(run_a: EvalRun, run_b: EvalRun, *, visible: Q | None = None) -> ExportTable:
    """Runs A (baseline) and B (candidate) aligned per case (see the module docstring).

    Raises:
        CompareError: Runs of different sets, or one run twice.
    """
    check_comparable(run_a, run_b)
    table = [
        *CASE_COLUMNS,
        *columns("a_run", "b_run", "kind", kind="text", under=ROOT),
        *columns("repeat", kind="int", under=ROOT),
        *columns("score_delta", kind="float", under=ROOT),
        *result_columns((*ROOT, "a")),
        *result_columns((*ROOT, "b")),
    ]
    return ExportTable(table, _compare_rows(run_a, run_b, visible), f"compare-{run_a.pk}-{run_b.pk}")


def _partners(run: EvalRun, case_ids: set[str], visible: Q | None) -> dict[tuple[str, int], EvalResult]:
    rows = EvalResult.objects.filter(eval_run=run, case_id__in=case_ids).select_related("run").only(*RESULT_FIELDS)
    if visible is not None:
        rows = rows.filter(visible)
    return {(r.case_id, r.repeat_index): r for r in rows}


def _compare_rows(run_a: EvalRun, run_b: EvalRun, visible: Q | None) -> Iterator[dict[str, Any]]:
    for first, second, flipped in ((run_a, run_b, False), (run_b, run_a, True)):
        for chunk in result_chunks(first, visible):
            ids = {r.case_id for r in chunk}
            others = _partners(second, ids, visible)
            if flipped:  # B's pass: only the cases A lacks (the others were written with A's)
                chunk = [r for r in chunk if (r.case_id, r.repeat_index) not in others]
                if not chunk:
                    continue
            cases = scored_cases(run_a.eval_set_id, chunk)  # as A saw them (B, for a case only B has)
            pairs = [(r, others.get((r.case_id, r.repeat_index))) for r in chunk]
            reviews = reviews_by_result(x.pk for pair in pairs for x in pair if x is not None)
            for mine, theirs in pairs:
                a, b = (theirs, mine) if flipped else (mine, theirs)
                delta = b.score - a.score if a and b and a.score is not None and b.score is not None else None
                row = cases[(mine.eval_run_id, mine.case_id)]
                row["evalsite"] = {
                    "a_run": run_a.pk,
                    "b_run": run_b.pk,
                    "repeat": mine.repeat_index,
                    "kind": flip_kind(a, b),
                    "score_delta": delta,
                    "a": _side(a, reviews),
                    "b": _side(b, reviews),
                }
                yield row


def queue_table(
    eval_run: EvalRun, *, user: Any = None, queue_filter: str = "all", visible: Q | None = None
) -> ExportTable:
    """The run's review queue in queue order, narrowed by ``queue_filter`` (a key of
    :data:`~apps.evals.queries.review_queue.QUEUE_FILTERS`; ``mine`` needs ``user``).

    Raises:
        InvalidInputError: An unknown filter.
    """
    queue = ReviewQueue([eval_run])
    return review_queue_table(queue, eval_run.eval_set_id, f"review-queue-{eval_run.pk}", user, queue_filter, visible)


def review_queue_table(
    queue: ReviewQueue, eval_set_id: int, name: str, user: Any, queue_filter: str, visible: Q | None
) -> ExportTable:
    """A review queue (a run's, or a set's across its runs) in queue order, narrowed by
    ``queue_filter``; each row names its run (``evalsite.eval_run``). ``name`` is the file's stem.

    Raises:
        InvalidInputError: An unknown filter.
    """
    if queue_filter not in QUEUE_FILTERS:
        raise InvalidInputError(
            f"unknown queue filter {queue_filter!r}; filters are: {', '.join(QUEUE_FILTERS)}", field="filter"
        )
    table = [
        *CASE_COLUMNS,
        *columns("eval_run", kind="text", under=ROOT),
        *columns("repeat", "position", kind="int", under=ROOT),
        *columns("queue_reason", kind="text", under=ROOT),
        *result_columns(ROOT),
    ]
    items = queue.filtered(user, queue_filter)
    return ExportTable(table, _queue_rows(eval_set_id, items, visible), name)


def _queue_rows(eval_set_id: int, items: list[Any], visible: Q | None) -> Iterator[dict[str, Any]]:
    position = 0
    for chunk in batched(items, CHUNK):
        results = EvalResult.objects.filter(pk__in=[i.result_id for i in chunk]).select_related("run")
        if visible is not None:
            results = results.filter(visible)
        by_id = {r.pk: r for r in results.only(*RESULT_FIELDS)}
        cases = scored_cases(eval_set_id, by_id.values())
        reviews = reviews_by_result(by_id)
        for item in chunk:
            position += 1
            result = by_id.get(item.result_id)
            if result is None:  # not readable by the caller, or deleted since the queue was read
                continue
            row = cases[(result.eval_run_id, result.case_id)]
            data = result_data(result, reviews.get(result.pk, []))
            row["evalsite"] = {"position": position, "queue_reason": item.reason or None, **data}
            yield row


SET_FORMATS = ("jsonl", "csv", "parquet", "adk")
"""What a set exports as: the table formats and an ADK eval set."""


def set_table(eval_set: EvalSet) -> ExportTable:
    """The set's cases as canonical records, in the set's order."""
    cases = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id")
    return ExportTable(list(CASE_COLUMNS), case_rows(cases), eval_set.name)


def case_rows(cases: QuerySet[EvalCase]) -> Iterator[dict[str, Any]]:
    """The cases as canonical records, streamed (the set export, the admin's "Export as JSONL")."""
    for case in cases.iterator(chunk_size=CHUNK):
        yield case_fields(case, case.case_id)
