"""An ingested trace (OTLP, :mod:`apps.traces.otel_ingest`) added as an eval case: the
playground's capture (:mod:`apps.evals.sets.capture`) for a team's real traffic.

The input is what the trace started with (the user's text when it is one user message, else
the turns without the system prompt: see :func:`evalcore.otel.messages.case_input`); the
expected value is the trace's answer and tool calls, in the shape of the chosen set's cases.
"""

from __future__ import annotations

from typing import Any

from apps.evals.models import EvalSet
from apps.evals.sets.capture import expected_shape, shaped_expected
from apps.traces.models import Run
from apps.traces.otel_ingest import SOURCE
from evalcore.otel.messages import case_input


def is_ingested(run: Run) -> bool:
    """Whether ``run`` came in over OTLP (only those are offered as new cases)."""
    return (run.metadata or {}).get("source") == SOURCE


def trace_defaults(run: Run, eval_set: EvalSet | None) -> dict[str, Any]:
    """Suggested input / expected for adding ``run`` as a case (expected in ``eval_set``'s shape
    when given, see :func:`apps.evals.sets.capture.shaped_expected`).

    Returns:
        ``{"input": ..., "expected": ..., "run_ids": [run.run_id]}``.
    """
    metadata = run.metadata or {}
    tool_calls = list(metadata.get("tool_calls") or [])
    if eval_set is not None:
        expected = shaped_expected(run.final_answer, tool_calls, expected_shape(eval_set))
    else:
        # no answer and no tool calls (an errored trace): no expected value, an empty field
        expected = (
            None
            if run.final_answer is None and not tool_calls
            else {"answer": run.final_answer, "tool_calls": tool_calls}
        )
    return {"input": case_input(metadata.get("input_messages") or []), "expected": expected, "run_ids": [run.run_id]}


def trace_case_metadata(run: Run, user: Any) -> dict[str, Any]:
    """The metadata of a case captured from ``run``: its source (``"trace"``), the trace and run
    ids, the service's target id, who captured it and the conversation id when the trace had one.
    Saved with :func:`apps.evals.sets.capture.add_captured_case`."""
    metadata: dict[str, Any] = {
        "source": "trace",
        "run_id": run.run_id,
        "trace_id": run.trace_id,
        "target_id": run.target_id,
        "run_ids": [run.run_id],
        "captured_by": getattr(user, "username", ""),
    }
    conversation = (run.metadata or {}).get("conversation_id")
    if conversation:
        metadata["conversation_id"] = conversation
    return metadata
