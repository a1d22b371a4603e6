"""Plain OTLP span values shared by the export and the ingest mappings, and the id rules.

OTLP ids are 16 bytes (trace) and 8 bytes (span), written here as 32 / 16 lowercase hex
digits. Evalsite's own ids (``<eval run id>:<case id>``, ``s3``) are not of that form: they
map to hex ids through sha256, so the same trace exported twice gets the same ids (a backend
replaces it rather than showing it twice) and parent links stay intact. Ids that already are
hex ids of the right length (an ingested trace sent out again) are kept as they are.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

_HEX = re.compile(r"[0-9a-f]+")

AttributeValue = str | bool | int | float | list[str] | list[bool] | list[int] | list[float]


@dataclass(slots=True)
class OtelEvent:
    """A span event.

    Attributes:
        name: Event name (``exception``, ``evalsite.message``, ``gen_ai.evaluation.result``).
        time_ns: Unix time in nanoseconds.
        attributes: Attribute values (already decoded: strings, numbers, bools, lists).
    """

    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class OtelSpan:
    """One OTLP span, as plain values.

    Attributes:
        trace_id: 32 lowercase hex digits.
        span_id: 16 lowercase hex digits.
        parent_span_id: 16 hex digits, or ``None`` for a root span.
        name: The span name (``chat gpt-4o``, ``execute_tool search``).
        start_ns, end_ns: Unix times in nanoseconds.
        attributes: Span attributes (decoded values; a JSON text stays a string).
        events: Span events in time order.
        status: ``unset``, ``ok`` or ``error``.
        status_message: The status description (an error's message).
        kind: ``internal``, ``server``, ``client``, ``producer`` or ``consumer``.
        resource: The resource's attributes (``service.name`` ...).
        scope: The instrumentation scope's name.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[OtelEvent] = field(default_factory=list)
    status: str = "unset"
    status_message: str = ""
    kind: str = "internal"
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


SPAN_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
"""OTLP's ``Span.SpanKind`` numbers, in order (0 = unspecified)."""
STATUS_CODES = ("unset", "ok", "error")
"""OTLP's ``Status.StatusCode`` numbers, in order."""


def is_hex_id(value: str, digits: int) -> bool:
    """Whether ``value`` is ``digits`` lowercase hex digits and not all zeros (an invalid id in OTLP)."""
    return len(value) == digits and bool(_HEX.fullmatch(value)) and value.strip("0") != ""


def _derived(text: str, digits: int) -> str:
    value = hashlib.sha256(text.encode()).hexdigest()[:digits]
    return value if value.strip("0") else "1".rjust(digits, "0")


def otel_trace_id(trace_id: str) -> str:
    """The OTLP trace id (32 hex digits) of an Evalsite trace id: kept when it already is one,
    else the first 128 bits of its sha256."""
    return trace_id if is_hex_id(trace_id, 32) else _derived(trace_id, 32)


def otel_span_id(trace_id: str, span_id: str) -> str:
    """The OTLP span id (16 hex digits) of an Evalsite span id within a trace: kept when it
    already is one, else 64 bits of the sha256 of both (span ids are unique per trace only)."""
    return span_id if is_hex_id(span_id, 16) else _derived(f"{trace_id}/{span_id}", 16)


def to_ns(ts: float) -> int:
    """Unix seconds (a float) as integer nanoseconds, rounded to the microsecond (the stores'
    resolution: a float of this size carries no more than that)."""
    return round(ts * 1_000_000) * 1000


def attribute_value(value: Any) -> AttributeValue | None:
    """A value as an OTLP attribute value: primitives as they are, a list of one primitive type
    as an array, anything else (objects, mixed lists) as its JSON text; ``None`` for ``None``."""
    if value is None:
        return None
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple) and value:
        kinds = {type(v) for v in value}
        if len(kinds) == 1 and kinds <= {str, bool, int, float}:
            return list(value)
    return json_text(value)


def json_text(value: Any) -> str:
    """Compact JSON text (non-ASCII kept), the encoding of every JSON-valued attribute."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def parse_json(value: Any) -> Any:
    """A JSON-valued attribute read back: its text parsed, or the value itself when it is not
    JSON text (a plain string argument, a number already) or nests too deeply to parse. A
    ``NaN`` / ``Infinity`` literal in the text is read as the text ``"NaN"`` / ``"Infinity"``
    (stored values are JSON, which has no such numbers)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value, parse_constant=str)
    except (ValueError, RecursionError):
        return value
