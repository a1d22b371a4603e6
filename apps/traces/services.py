"""Writes of runs and trace events. The ``Run`` summary is derived from its events."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from apps.traces.models import Event, Run, RunStatus
from evalcore.redact import redact_event_payload
from evalcore.tracing import SPAN_BEGIN, SPAN_END, TraceEvent
from evalcore.types import RunRecord

PREVIEW_CHARS = 300
MAX_STEP_ROWS = 200


def ts_to_datetime(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def payload_preview(payload: dict[str, Any]) -> tuple[str, int]:
    """A short text preview of an event payload and the payload's size in bytes (UTF-8 JSON).

    Give it the payload as stored (:func:`evalcore.redact.redact_event_payload`: redacted before
    the cut, so a key straddling the cut cannot leave a prefix behind).
    """
    text = json.dumps(payload, ensure_ascii=False, default=str)
    preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    return preview, len(text.encode("utf-8", "surrogatepass"))  # a lone surrogate: 3 bytes, as its stored U+FFFD


@dataclass(slots=True)
class RunAggregate:
    """Step metrics folded from a run's events as they arrive.

    Attributes:
        llm_calls: ``chat`` spans ended.
        tool_calls: ``execute_tool`` spans ended.
        tokens_in, tokens_out: Summed over ``chat`` spans.
        steps: Per-step latency rows ``{kind, name, elapsed_ms}`` (first 200).
        finish_reason: From the root span's end, when it set one.
        first_ts: Time of the first event (the run's start).
    """

    llm_calls: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = ""
    first_ts: float | None = None
    judge_spans: set[str] = field(default_factory=set)

    def add(self, event: TraceEvent) -> None:
        if self.first_ts is None:
            self.first_ts = event.ts
        payload = event.payload
        if event.type == SPAN_BEGIN and payload.get("role") == "judge":
            # the judge's calls are scoring, not the target's work: kept out of its metrics
            self.judge_spans.add(str(payload.get("span_id")))
        if event.type != SPAN_END or str(payload.get("span_id")) in self.judge_spans:
            return
        kind = payload.get("kind")
        if kind == "chat":
            self.llm_calls += 1
            self.tokens_in += _span_tokens(payload.get("tokens_in"))
            self.tokens_out += _span_tokens(payload.get("tokens_out"))
        elif kind == "execute_tool":
            self.tool_calls += 1
        if kind in ("chat", "execute_tool", "node") and len(self.steps) < MAX_STEP_ROWS:
            self.steps.append({"kind": kind, "name": event.name, "elapsed_ms": payload.get("elapsed_ms")})
        if payload.get("parent_span_id") is None and payload.get("finish_reason"):
            self.finish_reason = str(payload["finish_reason"])

    def copy(self) -> RunAggregate:
        """An independent copy (a writer that may redo a batch keeps the state before it)."""
        return dataclasses.replace(self, steps=list(self.steps), judge_spans=set(self.judge_spans))

    def step_metrics(self) -> dict[str, Any]:
        return {"llm_calls": self.llm_calls, "tool_calls": self.tool_calls, "steps": self.steps}


def event_row(run_pk: int, event: TraceEvent) -> Event:
    payload = redact_event_payload(event.type, event.payload)
    preview, size = payload_preview(payload)
    return Event(
        run_id=run_pk,
        trace_id=event.trace_id,
        seq=event.seq,
        ts=ts_to_datetime(event.ts),
        type=event.type,
        name=event.name[:300],
        payload=payload,
        preview=preview,
        payload_bytes=size,
    )


def run_fields(record: RunRecord, aggregate: RunAggregate | None, *, target_id: str) -> dict[str, Any]:
    """The ``Run`` columns for a finished run record (tokens fall back to the events' sums)."""
    aggregate = aggregate or RunAggregate()
    if record.error is None:
        status = RunStatus.OK
    elif record.error.type == "Timeout":
        status = RunStatus.TIMEOUT
    else:
        status = RunStatus.ERROR
    finish_reason = str(record.metadata.get("finish_reason") or aggregate.finish_reason or "")
    if not finish_reason:
        finish_reason = "error" if record.error else "stop"
    return {
        "trace_id": record.trace_id,
        "target_id": target_id,
        "started": ts_to_datetime(record.started_at),
        "elapsed_ms": round(record.elapsed_ms, 3),
        "status": status,
        "finish_reason": finish_reason[:64],
        "final_answer": record.output,
        "model": (record.model or "")[:200],
        "tokens_in": record.tokens_in if record.tokens_in is not None else (aggregate.tokens_in or None),
        "tokens_out": record.tokens_out if record.tokens_out is not None else (aggregate.tokens_out or None),
        "step_metrics": aggregate.step_metrics(),
        "metadata": record.metadata,
        "error": {"type": record.error.type, "message": record.error.message} if record.error else None,
    }


def save_run(
    record: RunRecord, events: list[TraceEvent], *, target_id: str, private: bool = False, owner: Any = None
) -> Run:
    """Store one finished run and its events in one transaction (used outside eval runs).

    A ``private`` run is readable by its ``owner`` (a user) and staff only.
    """
    aggregate = RunAggregate()
    for event in events:
        aggregate.add(event)
    with transaction.atomic():
        fields = run_fields(record, aggregate, target_id=target_id)
        fields.update(private=private, owner=owner)
        run = Run.objects.create(run_id=record.run_id, **fields)
        Event.objects.bulk_create([event_row(run.pk, e) for e in events])
    return run


def _span_tokens(value: Any) -> int:
    """A chat span's token count for the run's sums: a whole number from 0 to a trillion, else 0
    (a span's own payload keeps what was recorded; an unusable count must not stop the writer)."""
    if type(value) is int and 0 <= value <= 10**12:
        return value
    if type(value) is float and value.is_integer() and 0 <= value <= 10**12:
        return int(value)
    return 0
