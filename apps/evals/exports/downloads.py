"""An eval run as report files (strict JSON and JUnit XML, ``evalsite eval --json/--junit``), and
every export as a download: a run, a comparison, a review queue (a run's, or a set's across its
runs), a set (:class:`Download`).

The rows and their columns come from :mod:`apps.evals.exports.run_rows` (a run) and
:mod:`apps.evals.exports.pairs` (the others); :mod:`evalcore.tables` writes them as JSON Lines,
CSV or Parquet, :mod:`evalcore.loaders.adk_export` a set as an ADK eval set. The CLI
(``evalsite export``), the API (``/api/eval/.../export``) and the pages' buttons all call the
functions here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from apps.evals.exports.many import many_table
from apps.evals.exports.pairs import SET_FORMATS, compare_table, queue_table, review_queue_table, set_table
from apps.evals.exports.run_rows import ExportTable, has_conversation_results, run_table
from apps.evals.models import EvalCase, EvalRun, EvalSet
from apps.evals.queries.compare_many import ManyView
from apps.evals.queries.review_queue import ReviewQueue
from apps.evals.queries.set_queue import set_queue_runs
from apps.evals.results.readback import stored_case
from evalcore.atomic import write_chunks
from evalcore.conversations import is_conversation_input
from evalcore.errors import InvalidInputError
from evalcore.loaders.adk_export import adk_eval_set_chunks
from evalcore.tables import CONTENT_TYPES, FORMATS, table_chunks

SUFFIXES = {"jsonl": ".jsonl", "csv": ".csv", "parquet": ".parquet", "adk": ".evalset.json"}


class ExportFormatError(InvalidInputError):
    """An export format the thing exported does not come in."""

    field = "format"


@dataclass(slots=True)
class Download:
    """An export as bytes to send or write: the chunks (a generator, read once), a file name, a content type."""

    chunks: Iterator[bytes]
    filename: str
    content_type: str


def _check(fmt: str, allowed: tuple[str, ...]) -> str:
    if fmt not in allowed:
        raise ExportFormatError(f"unknown export format {fmt!r}; choose one of {', '.join(allowed)}")
    return fmt


def _download(table: ExportTable, fmt: str) -> Download:
    return Download(table_chunks(fmt, table.rows, table.columns), table.name + SUFFIXES[fmt], CONTENT_TYPES[fmt])


def run_download(eval_run: EvalRun, fmt: str, *, visible: Q | None = None) -> Download:
    """A run's results (``jsonl`` / ``csv`` / ``parquet``); ``visible`` filters them (``None``: all).
    A conversation case's row carries its per-turn results under ``evalsite.turns``.

    Raises:
        ExportFormatError: Another format, or ``csv`` for a run holding a conversation case.
    """
    _refuse_conversation_runs_in_csv(_check(fmt, FORMATS), eval_run)
    return _download(run_table(eval_run, visible=visible), fmt)


def _refuse_conversation_runs_in_csv(fmt: str, *runs: EvalRun) -> None:
    """Every table of run results (a run, a comparison, a review queue) refuses CSV alike when a
    run holds a conversation case: one CSV row per case cannot hold its turns."""
    if fmt != "csv":
        return
    for eval_run in runs:
        if has_conversation_results(eval_run):
            raise ExportFormatError(
                f"run {eval_run.pk} holds conversation cases: CSV cannot hold a conversation (one row per case, "
                "one input and one output, not the turns); export it as jsonl or parquet, which carry every turn"
            )


def compare_download(run_a: EvalRun, run_b: EvalRun, fmt: str, *, visible: Q | None = None) -> Download:
    """Two runs aligned per case, with the flip kind.

    Raises:
        ExportFormatError: An unknown format, or ``csv`` when a run holds a conversation case.
        CompareError: Runs of different sets, or one run twice.
    """
    _refuse_conversation_runs_in_csv(_check(fmt, FORMATS), run_a, run_b)
    return _download(compare_table(run_a, run_b, visible=visible), fmt)


def many_download(view: ManyView, fmt: str) -> Download:
    """An N-way comparison, one row per case every run holds (:mod:`apps.evals.exports.many`).

    Raises:
        ExportFormatError: An unknown format.
    """
    return _download(many_table(view), _check(fmt, FORMATS))


def queue_download(
    eval_run: EvalRun, fmt: str, *, user: Any = None, queue_filter: str = "all", visible: Q | None = None
) -> Download:
    """A run's review queue (with its reviews), in queue order.

    Raises:
        ExportFormatError: An unknown format, or ``csv`` when a run holds a conversation case.
        InvalidInputError: An unknown queue filter.
    """
    _refuse_conversation_runs_in_csv(_check(fmt, FORMATS), eval_run)
    table = queue_table(eval_run, user=user, queue_filter=queue_filter, visible=visible)
    return _download(table, fmt)


def set_queue_download(
    eval_set: EvalSet,
    fmt: str,
    *,
    runs: str | None = None,
    user: Any = None,
    queue_filter: str = "all",
    visible: Q | None = None,
) -> Download:
    """A set's review queue across its runs (``runs``: ``latest``, ``all`` or a run id, as on the
    page; :func:`~apps.evals.queries.set_queue.set_queue_runs`), with its reviews, in queue order.

    Raises:
        ExportFormatError: An unknown format, or ``csv`` when a run holds a conversation case.
        InvalidInputError: An unknown queue filter.
        NotFoundError: ``runs`` names no run of the set.
    """
    scope = set_queue_runs(eval_set, runs)
    _refuse_conversation_runs_in_csv(_check(fmt, FORMATS), *scope.runs)
    name = f"review-queue-{eval_set.name}-{scope.choice}"
    table = review_queue_table(ReviewQueue(scope.runs), eval_set.pk, name, user, queue_filter, visible)
    return _download(table, fmt)


def set_download(eval_set: EvalSet, fmt: str) -> Download:
    """A set's cases: canonical records (``jsonl`` / ``csv`` / ``parquet``) or an ADK eval set (``adk``).

    Raises:
        ExportFormatError: An unknown format, or ``csv`` for a set holding a conversation case.
    """
    if _check(fmt, SET_FORMATS) == "csv":
        _refuse_conversations_in_csv(eval_set)
    if fmt == "adk":
        rows = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id").iterator(chunk_size=500)
        chunks = adk_eval_set_chunks((stored_case(row) for row in rows), **adk_head(eval_set))
        return Download(chunks, eval_set.name + SUFFIXES["adk"], CONTENT_TYPES["adk"])
    return _download(set_table(eval_set), fmt)


def _refuse_conversations_in_csv(eval_set: EvalSet) -> None:
    """A CSV row holds one input and one expected value: a set with a conversation case cannot be
    written as CSV (flattening its turns would lose which turn expects what).

    Raises:
        ExportFormatError: The set holds a conversation case (:mod:`evalcore.conversations`).
    """
    rows = EvalCase.objects.filter(eval_set=eval_set, input__has_key="turns").order_by("position", "case_id")
    for case_id, input_value in rows.values_list("case_id", "input").iterator(chunk_size=500):
        if is_conversation_input(input_value):
            raise ExportFormatError(
                f"set {eval_set.name!r} holds conversation cases (e.g. {case_id!r}): CSV cannot hold a conversation "
                "(one row per case, one input and one expected value); export it as jsonl, parquet or adk"
            )


def adk_head(eval_set: EvalSet) -> dict[str, Any]:
    """The ADK document's ``eval_set_id``, ``name`` and ``description``: the source's when every
    case of the set came from one ADK eval set (the ADK loader keeps them in each case's metadata
    as ``eval_set_id``, ``eval_set_name``, ``eval_set_description``), else the set's name and description.
    """
    cases = EvalCase.objects.filter(eval_set=eval_set)
    source_ids = list(cases.order_by().values_list("metadata__eval_set_id", flat=True).distinct()[:2])
    if len(source_ids) != 1 or not isinstance(source_ids[0], str) or not source_ids[0]:
        return {"eval_set_id": eval_set.name, "name": eval_set.name, "description": eval_set.description}
    first = cases.order_by("position", "case_id").values_list("metadata", flat=True).first() or {}
    name, description = first.get("eval_set_name"), first.get("eval_set_description")
    return {
        "eval_set_id": source_ids[0],
        "name": name if isinstance(name, str) else None,
        "description": description if isinstance(description, str) else None,
    }


def write_download(download: Download, path: str | None) -> int:
    """Write the chunks to ``path`` (:func:`evalcore.atomic.write_chunks`: a temporary file beside
    it, renamed when complete; a device such as ``/dev/null`` written in place) or, without a
    path or with ``-``, to standard output; the number of bytes written.

    Raises:
        OSError: The file cannot be written (nothing is left at ``path`` then).
    """
    if not path or path == "-":
        count = 0
        out = sys.stdout.buffer
        for chunk in download.chunks:
            out.write(chunk)
            count += len(chunk)
        out.flush()
        return count
    return write_chunks(path, download.chunks)
