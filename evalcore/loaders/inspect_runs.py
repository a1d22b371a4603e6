"""An Inspect sample as an Evalsite case result and its trace: what an imported run stores per case.

:func:`sample_result` turns one :class:`~evalcore.loaders.inspect_log.InspectSample` (one sample
of one epoch) into the engine's :class:`~evalcore.types.CaseResult` and its
:class:`~evalcore.tracing.TraceEvent` list, the same values an Evalsite run produces, so the
store, the pages, compare and trends treat both alike:

* repeat index = epoch - 1; run id ``<eval run id>:<case id>`` (``#<repeat>`` with epochs > 1);
* output = the final completion; error = the sample's error (``RuntimeError('x')`` read as type
  ``RuntimeError``, message ``x``), which makes the case *errored*;
* scores = every scorer's score mapped by :mod:`evalcore.loaders.inspect_scores` (a score whose
  numbers leave 0..1 anywhere in the log is kept as text: the caller names those);
* latency = Inspect's ``total_time`` (the sample's wall time; ``working_time`` is kept in the
  run's metadata), tokens = the sample's ``model_usage`` summed over models;
* expected = the sample's target (what Inspect scored against, recorded with the result).

Trace (the shape of Evalsite's own agent traces)::

    invoke_agent <task>                 (the sample: start, total time, output, usage)
      message user / system ...         (the conversation before the first model turn)
      chat <model>                      (one per model turn: usage, stop reason, time)
        message assistant
      execute_tool <function>           (one per tool call: arguments, result, error)
        message tool
      error sample_error                (when the sample errored)

A model call made by a scorer (a model-graded scorer) is a ``chat`` span with ``role: judge``,
kept out of the target's step metrics.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from evalcore.inference import make_run_id
from evalcore.loaders.inspect_log import InspectSample
from evalcore.loaders.inspect_scores import evalsite_scores
from evalcore.loaders.inspect_steps import InspectStep
from evalcore.targets import preview
from evalcore.tracing import ERROR, MESSAGE, SPAN_BEGIN, SPAN_END, TraceEvent
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord

__all__ = ["sample_result"]

_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$", re.DOTALL)


def error_info(message: str) -> ErrorInfo:
    """An Inspect error message as an :class:`ErrorInfo` (``Type('text')`` -> ``Type``, ``text``)."""
    found = _EXCEPTION.match(message.strip())
    if not found:
        return ErrorInfo("InspectSampleError", message)
    text = found.group(2)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return ErrorInfo(found.group(1), text or message)


@dataclass(slots=True)
class _Trace:
    """Events of one run, numbered as they are added."""

    run_id: str
    events: list[TraceEvent] = field(default_factory=list)
    spans: int = 0

    def add(self, ts: float, kind: str, name: str, payload: dict[str, Any]) -> None:
        self.events.append(TraceEvent(self.run_id, self.run_id, len(self.events), ts, kind, name, payload))

    def span_id(self) -> str:
        self.spans += 1
        return f"s{self.spans - 1}"


def sample_result(
    sample: InspectSample,
    case: Case,
    *,
    eval_run_id: str,
    epochs: int,
    task: str,
    metadata: dict[str, Any] | None = None,
    off_scale: Collection[str] = (),
) -> tuple[CaseResult, list[TraceEvent]]:
    """The case result and trace events of one sample (see the module doc).

    Args:
        sample: The sample (one epoch).
        case: The set's case it answers (its id and split are used; its expected value is
            replaced by the sample's target, which is what Inspect scored against).
        eval_run_id: The Evalsite run it is stored in.
        epochs: The log's epochs (run ids get ``#<repeat>`` when more than 1).
        task: The Inspect task's name (the root span's name).
        metadata: Extra run metadata (e.g. the variant), merged under the sample's.
        off_scale: Score names whose numbers leave 0..1 somewhere in the log
            (:func:`~evalcore.loaders.inspect_scores.off_scale_names`): kept as text.
    """
    repeat_index = sample.epoch - 1
    run_id = make_run_id(eval_run_id, case.id, repeat_index, max(epochs, sample.epoch))
    started = sample.started if sample.started is not None else (sample.steps[0].started if sample.steps else None)
    started = started if started is not None else 0.0
    if sample.total_time_s is not None:
        elapsed_ms = sample.total_time_s * 1000.0
    elif sample.completed is not None:
        elapsed_ms = max(0.0, (sample.completed - started) * 1000.0)
    else:
        elapsed_ms = 0.0
    target_turns = [s for s in sample.steps if s.kind == "chat" and s.role != "judge"]
    finish = next((s.finish_reason for s in reversed(target_turns) if s.finish_reason), None)
    error = error_info(sample.error) if sample.error else None
    tool_calls = [_call(call) for turn in target_turns for call in (turn.message or {}).get("tool_calls") or []]
    record = RunRecord(
        case_id=case.id,
        run_id=run_id,
        trace_id=run_id,
        repeat_index=repeat_index,
        output=None if error else sample.output,
        error=error,
        started_at=started,
        elapsed_ms=elapsed_ms,
        model=sample.model,
        tokens_in=sample.tokens_in,
        tokens_out=sample.tokens_out,
        metadata={
            **(metadata or {}),
            "eval_run_id": eval_run_id,
            "split": case.split,
            "source": "inspect",
            "finish_reason": "error" if error else (finish or "stop"),
            "tool_calls": tool_calls,
            "steps": len(target_turns),
            "inspect": {
                "sample_id": sample.id,
                "epoch": sample.epoch,
                "total_time_ms": None if sample.total_time_s is None else round(sample.total_time_s * 1000.0, 3),
                "working_time_ms": None if sample.working_time_s is None else round(sample.working_time_s * 1000.0, 3),
                "metadata": sample.metadata,
            },
        },
    )
    scored = replace(case, expected=sample.target)
    scores = [score for inspect_score in sample.scores for score in evalsite_scores(inspect_score, off_scale=off_scale)]
    return CaseResult(case=scored, run=record, scores=scores), _events(sample, record, task)


def _events(sample: InspectSample, record: RunRecord, task: str) -> list[TraceEvent]:
    trace = _Trace(record.run_id)
    root = trace.span_id()
    start = record.started_at
    trace.add(
        start,
        SPAN_BEGIN,
        task,
        {
            "span_id": root,
            "parent_span_id": None,
            "kind": "invoke_agent",
            "input_preview": preview(sample.input),
            "source": "inspect",
            "sample_id": sample.id,
            "epoch": sample.epoch,
        },
    )
    first_turn = next((i for i, m in enumerate(sample.messages) if m.get("role") == "assistant"), len(sample.messages))
    for message in sample.messages[:first_turn]:
        trace.add(start, MESSAGE, str(message.get("role") or "message"), {"parent_span_id": root, **message})
    for step in sample.steps:
        _step(trace, step, root, start)
    end = start + record.elapsed_ms / 1000.0
    if record.error is not None:
        trace.add(end, ERROR, "sample_error", {"parent_span_id": root, "message": sample.error})
    trace.add(
        end,
        SPAN_END,
        task,
        {
            "span_id": root,
            "parent_span_id": None,
            "kind": "invoke_agent",
            "elapsed_ms": round(record.elapsed_ms, 3),
            "status": "error" if record.error else "ok",
            "output_preview": preview(record.output),
            "tokens_in": record.tokens_in,
            "tokens_out": record.tokens_out,
            "model": record.model,
            "finish_reason": record.metadata.get("finish_reason"),
            **({"error": {"type": record.error.type, "message": record.error.message}} if record.error else {}),
        },
    )
    return trace.events


def _step(trace: _Trace, step: InspectStep, root: str, start: float) -> None:
    span = trace.span_id()
    begin = step.started if step.started is not None else start
    end = step.completed if step.completed is not None else begin
    ids = {"span_id": span, "parent_span_id": root, "kind": step.kind}
    status: dict[str, Any] = {"elapsed_ms": round(max(0.0, end - begin) * 1000.0, 3), "status": "ok"}
    if step.error:
        status.update(status="error", error={"type": "InspectError", "message": step.error})
    if step.kind == "chat":
        judge = {"role": step.role} if step.role else {}
        trace.add(begin, SPAN_BEGIN, step.name, {**ids, "model": step.name, **judge})
        message = step.message or {}
        if message:
            trace.add(end, MESSAGE, "assistant", {"parent_span_id": span, **message})
        attributes = {
            "model": step.name,
            "tokens_in": step.tokens_in,
            "tokens_out": step.tokens_out,
            "finish_reason": step.finish_reason,
            "response_preview": preview(message.get("content") or ""),
            "tool_calls": [_call(c) for c in message.get("tool_calls") or []],
        }
        trace.add(end, SPAN_END, step.name, {**ids, **status, **attributes})
        return
    trace.add(begin, SPAN_BEGIN, step.name, {**ids, "tool_call_id": step.tool_call_id, "arguments": step.arguments})
    trace.add(
        end,
        MESSAGE,
        "tool",
        {"parent_span_id": span, "role": "tool", "tool_call_id": step.tool_call_id, "tool_name": step.name}
        | {"content": step.result},
    )
    result = {"result_preview": preview(step.result), "result": step.result, "tool_error": step.error}
    trace.add(end, SPAN_END, step.name, {**ids, **status, **result})


def _call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call as Evalsite's runs record it: ``{"name", "arguments"}``."""
    return {"name": call.get("name"), "arguments": call.get("arguments")}
