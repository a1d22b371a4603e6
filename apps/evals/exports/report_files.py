"""The report files of one finished eval run: the JSON report and the JUnit XML that
``evalsite eval --json/--junit`` and the pytest plugin write (``apps.evals.cli.gating``).

Kept apart from :mod:`apps.evals.exports.downloads` (downloads of runs, comparisons, queues and sets), so
the end of every CLI run does not import the export formats.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from django.db import connection

from apps.evals.models import EvalResult, EvalRun
from apps.traces.models import Run
from evalcore.conversations import report_turns
from evalcore.report import EvalReport
from evalcore.target_cache import METADATA_KEY as CACHE_KEY
from evalcore.target_cache import is_hit
from evalcore.types import CaseOutcome, CaseStatus, StatusReason, case_outcome


def run_info(eval_run: EvalRun) -> dict[str, Any]:
    """The run's provenance as the JSON report's ``info`` block (set name, target, git, config...)."""
    return {
        "id": eval_run.id,
        "name": eval_run.name,
        "set": eval_run.eval_set.name,
        "target_id": eval_run.target_id,
        "variant": eval_run.variant,
        "split": eval_run.split,
        "model": eval_run.model,
        "git_sha": eval_run.git_sha,
        "git_dirty": eval_run.git_dirty,
        "scorer_specs": eval_run.scorer_specs,
        "config": eval_run.config,
        "set_hash": eval_run.set_hash,
        "status": eval_run.status,
    }


def case_rows(eval_run: EvalRun) -> Iterator[dict[str, Any]]:
    """One dict per stored result, in storage order, streamed (memory does not grow with cases).
    Rows with the same stored scores share one decoded value: read the values, never change them.

    Read below the ORM, a chunk of raw rows at a time, each JSON column decoded as the field
    decodes it (:func:`_json_value`): a 10,000-result run was ~0.9 s of model instances. A run's
    metadata is decoded only when it may hold what the report copies from it (turns, a
    simulated user, a target-cache hit).
    """
    quote = connection.ops.quote_name
    sql = (
        "SELECT r.case_id, r.repeat_index, r.split, r.status, r.reason, r.passed, r.scores, "
        "t.final_answer, r.expected, r.expected_hash, t.error, t.elapsed_ms, t.run_id, t.metadata "
        f"FROM {quote(EvalResult._meta.db_table)} r JOIN {quote(Run._meta.db_table)} t ON t.id = r.run_id "
        "WHERE r.eval_run_id = %s ORDER BY r.id"
    )
    parsed: dict[str, Any] = {}
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, [eval_run.pk])
        while chunk := cursor.fetchmany(1000):
            for row in chunk:
                yield _case_row(row, parsed)


def _case_row(row: tuple[Any, ...], parsed: dict[str, Any]) -> dict[str, Any]:
    """A report case from one raw row of :func:`case_rows`' query. ``parsed``: the scores decoded
    so far by their stored text (a run's results mostly repeat a few: each is decoded once, and
    the rows that share it share the value: read the rows' values, never change them)."""
    (case_id, repeat_index, split, status, reason, passed, scores, output) = row[:8]
    (expected, expected_hash, error, elapsed_ms, run_id, metadata) = row[8:]
    text = scores
    scores = parsed.get(text) if isinstance(text, str) else None
    if scores is None:
        scores = _json_value(text)
        if isinstance(text, str) and len(text) <= _SHARED_TEXT:
            if len(parsed) >= 256:
                parsed.clear()
            parsed[text] = scores
    error = _json_value(error)
    item = {
        "case_id": case_id,
        "repeat_index": repeat_index,
        "split": split,
        "status": status,
        "reason": _reason(status, reason) if reason else _derived_reason(error, scores),
        "passed": bool(passed) if passed in (0, 1) else passed,  # SQLite's 0/1, as the field reads it
        "scores": scores,
        "output": _json_value(output),
        "expected": _json_value(expected),
        "expected_hash": expected_hash,
        "error": error,
        "elapsed_ms": elapsed_ms,
        "run_id": run_id,
    }
    if metadata is None or not (
        "\\u" in metadata or '"turns"' in metadata or '"simulator"' in metadata or f'"{CACHE_KEY}"' in metadata
    ):
        return item  # none of the three keys (a key spelled with \u escapes is decoded to be sure)
    metadata = _json_value(metadata)
    if not isinstance(metadata, dict):
        return item
    turns = report_turns(metadata, scores)  # a conversation case: its per-turn results
    if turns is not None:
        item["turns"] = turns
    if isinstance(metadata.get("simulator"), dict):  # a simulated user: its calls and why it stopped
        item["simulator"] = metadata["simulator"]
    if is_hit(metadata):  # answered from the target cache: no call, its elapsed_ms is a lookup's
        item["target_cache"] = metadata[CACHE_KEY]
    return item


_SHARED_TEXT = 4096
"""The longest scores text :func:`case_rows` keeps decoded for the next rows (longer ones are
explanations that do not repeat)."""

# the C scanner, without decode()'s whitespace matching
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_value(text: Any) -> Any:
    """A JSON column's stored text decoded as ``JSONField.from_db_value`` decodes it: ``None``
    stays ``None``, text that is not JSON is returned as it is. Text with no surrounding
    whitespace (as stored) is read by the scanner directly; anything else by ``json.loads``."""
    if not isinstance(text, str):
        return text
    try:
        value, end = _scan(text, 0)
    except (StopIteration, ValueError):
        end = -1
    if end == len(text):
        return value
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@functools.lru_cache(maxsize=64)
def _reason(status: str, reason: str) -> str:
    """A stored result's reason as :attr:`EvalResult.outcome` reads it (both values checked).

    Raises:
        ValueError: A status or reason that is not one.
    """
    return CaseOutcome(CaseStatus(status), StatusReason(reason)).reason.value


def _derived_reason(error: Any, scores: Any) -> str:
    """The reason of a result stored without one (derived from its run's error and its scores)."""
    return case_outcome(target_errored=bool(error), scores=scores or []).reason.value


def write_report_files(
    eval_run: EvalRun,
    report: EvalReport,
    *,
    json_path: str | None = None,
    junit_path: str | None = None,
    extra: dict[str, Any] | None = None,
    flips: Mapping[tuple[str, int], str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> None:
    """Write the JSON report to ``json_path`` and the JUnit XML to ``junit_path`` (each if given).

    ``extra`` adds top-level blocks to the JSON report (the baseline comparison, the gates);
    ``flips`` and ``properties`` mark flipped cases and the baseline in the JUnit file
    (:func:`evalcore.report_files.write_junit`).

    Raises:
        OSError: A file cannot be written.
    """
    if not (json_path or junit_path):
        return
    # imported here: a run that asks for no report file never loads the writers (nor the XML
    # library), only this module's run_info (start-up time, issue 30)
    from evalcore.report_files import write_json_report, write_junit

    if json_path:
        write_json_report(json_path, report, info=run_info(eval_run), cases=case_rows(eval_run), extra=extra)
    if junit_path:
        write_junit(
            junit_path,
            report,
            suite_name=f"{eval_run.eval_set.name}.{eval_run.target_id}",
            cases=case_rows(eval_run),
            flips=flips,
            properties=properties,
        )
