"""``Run`` and ``Event`` rows as plain tuples of database values, for bulk writers
(:mod:`apps.core.bulk`): built once per row, redacted as the model's fields would redact them.
"""

from __future__ import annotations

from typing import Any

from apps.core.bulk import Encoders, clean_text, columns, dumps, json_text
from apps.core.storable import holds_unstorable, storable_text
from apps.traces.models import Event, Run, RunStatus
from apps.traces.services import PREVIEW_CHARS, RunAggregate
from evalcore.redact import redact_event_payload
from evalcore.tracing import TraceEvent
from evalcore.types import RunRecord

RUN_FIELDS = (
    "id",
    "run_id",
    "trace_id",
    "target_id",
    "started",
    "elapsed_ms",
    "status",
    "finish_reason",
    "final_answer",
    "model",
    "tokens_in",
    "tokens_out",
    "step_metrics",
    "metadata",
    "error",
    "private",
    "owner",
)
RUN_COLUMNS = columns(Run, RUN_FIELDS)
RUN_UPDATE_COLUMNS = RUN_COLUMNS[2:15]
"""The columns a finished run's result writes over its ``running`` row (trace id to error)."""
EVENT_FIELDS = ("run", "trace_id", "seq", "ts", "type", "name", "payload", "preview", "payload_bytes")
EVENT_COLUMNS = columns(Event, EVENT_FIELDS)
EVENT_UNIQUE = columns(Event, ("run", "seq"))


def run_update_values(fields: dict[str, Any], enc: Encoders) -> tuple[Any, ...]:
    """The ``RUN_UPDATE_COLUMNS`` values of a finished run (from ``apps.traces.services.run_fields``)."""
    secrets = enc.secrets
    return (
        fields["trace_id"],
        fields["target_id"],
        enc.datetime(fields["started"]),
        fields["elapsed_ms"],
        str(fields["status"]),
        storable_text(fields["finish_reason"]),
        json_text(fields["final_answer"], secrets, redacted=False),  # the target's output, as produced
        storable_text(fields["model"]),
        fields["tokens_in"],
        fields["tokens_out"],
        json_text(fields["step_metrics"], secrets),
        json_text(fields["metadata"], secrets),
        json_text(fields["error"], secrets),
    )


def finished_run_values(
    record: RunRecord, aggregate: RunAggregate | None, target_id: str, enc: Encoders
) -> tuple[Any, ...]:
    """The ``RUN_UPDATE_COLUMNS`` values of a finished run record: ``run_update_values(run_fields(
    record, aggregate, target_id=target_id), enc)``, built without the intermediate dict (the
    result writer's per-case path)."""
    secrets = enc.secrets
    error = record.error
    metadata = record.metadata
    if error is None:
        status = _OK
        error_value = None
    else:
        status = _TIMEOUT if error.type == "Timeout" else _ERROR
        error_value = json_text({"type": error.type, "message": error.message}, secrets)
    finish_reason = storable_text(
        str(metadata.get("finish_reason") or (aggregate.finish_reason if aggregate else "") or "")
    )
    if not finish_reason:
        finish_reason = "error" if error else "stop"
    tokens_in, tokens_out = record.tokens_in, record.tokens_out
    if tokens_in is None:
        tokens_in = (aggregate.tokens_in if aggregate else 0) or None
    if tokens_out is None:
        tokens_out = (aggregate.tokens_out if aggregate else 0) or None
    steps = aggregate.step_metrics() if aggregate else _NO_STEPS
    return (
        record.trace_id,
        target_id,
        enc.timestamp(record.started_at),
        round(record.elapsed_ms, 3),
        status,
        finish_reason[:64],
        json_text(record.output, secrets, redacted=False),  # the target's output, as produced
        storable_text((record.model or "")[:200]),
        tokens_in,
        tokens_out,
        json_text(steps, secrets),
        json_text(metadata, secrets),
        error_value,
    )


_OK, _TIMEOUT, _ERROR = str(RunStatus.OK), str(RunStatus.TIMEOUT), str(RunStatus.ERROR)
_NO_STEPS: dict[str, Any] = {"llm_calls": 0, "tool_calls": 0, "steps": []}


def running_run_values(pk: int, first: TraceEvent, target_id: str, enc: Encoders) -> tuple[Any, ...]:
    """The row of a run whose events arrive before its result (status ``running``)."""
    return (
        pk,
        first.run_id,
        first.trace_id,
        target_id,
        enc.timestamp(first.ts),
        None,
        str(RunStatus.RUNNING),
        "",
        None,
        "",
        None,
        None,
        "{}",
        "{}",
        None,
        False,
        None,
    )


def event_values(run_pk: int, event: TraceEvent, enc: Encoders) -> tuple[Any, ...]:
    """One trace event's row (``EVENT_COLUMNS`` order), as ``event_row`` + the fields write it:
    only the payload's ``error`` redacted (the rest is what the target produced), the preview cut
    from that. The payload is serialized once when it holds nothing to change."""
    secrets = enc.secrets
    value = redact_event_payload(event.type, event.payload, secrets)
    text = dumps(value)
    if holds_unstorable(text):
        # a NUL or a surrogate replaced (no database stores one: apps.core.storable)
        payload = json_text(value, secrets, redacted=False)
        text = storable_text(text)
    else:
        payload = text
    name = event.name
    return (
        run_pk,
        event.trace_id,
        event.seq,
        enc.timestamp(event.ts),
        event.type,
        clean_text(name if len(name) <= 300 else name[:300], secrets),
        payload,
        text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…",
        len(text) if text.isascii() else len(text.encode()),
    )
