"""The JSON report's and the JUnit file's cases read from the database (apps.evals.exports.report_files.case_rows):
plain rows below the ORM, each value what the result and its run hold."""

from __future__ import annotations

from typing import Any

import pytest

from apps.evals.exports.report_files import case_rows
from apps.evals.models import EvalResult
from evalcore.conversations import report_turns
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


def from_models(eval_run: Any) -> list[dict[str, Any]]:
    """The same cases read through model instances (the reading case_rows replaced)."""
    out = []
    for row in EvalResult.objects.filter(eval_run=eval_run).select_related("run").order_by("id"):
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
        metadata = row.run.metadata
        if isinstance(metadata, dict):
            if isinstance(metadata.get("turns"), list):
                item["turns"] = report_turns(metadata, row.scores)
            if isinstance(metadata.get("simulator"), dict):
                item["simulator"] = metadata["simulator"]
            if (metadata.get("target_cache") or {}).get("hit") is True:
                item["target_cache"] = metadata["target_cache"]
        out.append(item)
    return out


def test_case_rows_are_what_the_results_and_their_runs_hold():
    run = make_eval_run(make_eval_set(n_cases=6), [True, False, "errored", "unscored", True, True])
    results = list(run.results.select_related("run").order_by("id"))
    results[0].reason = "verdicts_pass"  # stored; the others derive theirs from scores and error
    results[1].expected = {"a": [1, 2.5, None]}
    results[4].run.metadata = {"simulator": {"kind": "scripted", "calls": 0}, "target_cache": {"hit": True, "key": "k"}}
    results[5].run.metadata = ["not", "an", "object"]
    results[5].run.final_answer = {"text": "é \u2028", "n": 10**20}
    results[3].run.metadata = {"turns": [{"turn": 1, "user": "hi", "error": None}], "t\u0061rget_cache": {"hit": 1}}
    for result in results:
        result.save()
        result.run.save()
    rows = list(case_rows(run))
    assert rows == from_models(run)
    assert [r["reason"] for r in rows][:3] == ["verdicts_pass", "verdict_failed", "target_error"]
    assert rows[4]["target_cache"] == {"hit": True, "key": "k"} and "simulator" in rows[4]
    assert rows[3]["turns"][0]["user"] == "hi" and rows[0]["passed"] is True
