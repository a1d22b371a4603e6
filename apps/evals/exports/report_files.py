"""The report files of one finished eval run: the JSON report and the JUnit XML that
``evalsite eval --json/--junit`` and the pytest plugin write (``apps.evals.cli.gating``).

Kept apart from :mod:`apps.evals.exports.downloads` (downloads of runs, comparisons, queues and sets), so
the end of every CLI run does not import the export formats.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from apps.evals.models import EvalResult, EvalRun
from evalcore.conversations import report_turns
from evalcore.report import EvalReport
from evalcore.report_files import write_json_report, write_junit
from evalcore.target_cache import METADATA_KEY as CACHE_KEY
from evalcore.target_cache import is_hit


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
    """One dict per stored result, in storage order, streamed (memory does not grow with cases)."""
    rows = EvalResult.objects.filter(eval_run=eval_run).select_related("run").order_by("id")
    for row in rows.iterator(chunk_size=1000):
        item = {
            "case_id": row.case_id,
            "repeat_index": row.repeat_index,
            "split": row.split,
            "status": row.status,
            "reason": row.outcome.reason.value,
            "passed": row.passed,
            "scores": row.scores,
            "output": row.run.final_answer,
            "expected": row.expected,
            "expected_hash": row.expected_hash,
            "error": row.run.error,
            "elapsed_ms": row.run.elapsed_ms,
            "run_id": row.run.run_id,
        }
        turns = report_turns(row.run.metadata, row.scores)  # a conversation case: its per-turn results
        if turns is not None:
            item["turns"] = turns
        metadata = row.run.metadata if isinstance(row.run.metadata, dict) else {}
        if isinstance(metadata.get("simulator"), dict):  # a simulated user: its calls and why it stopped
            item["simulator"] = metadata["simulator"]
        if is_hit(metadata):  # answered from the target cache: no call, its elapsed_ms is a lookup's
            item["target_cache"] = metadata[CACHE_KEY]
        yield item


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
