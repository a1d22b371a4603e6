"""A stand-in OTLP producer: many one-span GenAI traces as OTLP/JSON export bodies.

Each trace is one ``chat`` span (``gen_ai.input.messages`` holding the question,
``gen_ai.output.messages`` the answer) of a service, started at a chosen time, so tests and
``bench/bench_online.py`` can lay traces out over past windows and choose each answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class FakeTrace:
    """One trace to send: its service, question, answer and start time."""

    key: str
    service: str
    question: str
    answer: str
    started: datetime
    model: str = "shop-model"
    tags: tuple[str, ...] = ()
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def trace_id(self) -> str:
        return hashlib.sha256(f"trace:{self.key}".encode()).hexdigest()[:32]


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [{"stringValue": str(v)} for v in value]}}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _span(trace: FakeTrace) -> dict[str, Any]:
    start_ns = int(trace.started.timestamp() * 1e9)
    user = [{"role": "user", "parts": [{"type": "text", "content": trace.question}]}]
    said = [{"role": "assistant", "parts": [{"type": "text", "content": trace.answer}], "finish_reason": "stop"}]
    attributes = [
        _attr("gen_ai.operation.name", "chat"),
        _attr("gen_ai.request.model", trace.model),
        _attr("gen_ai.input.messages", json.dumps(user)),
        _attr("gen_ai.output.messages", json.dumps(said)),
        *(_attr(k, v) for k, v in trace.attributes.items()),
    ]
    if trace.tags:
        attributes.append(_attr("tag.tags", list(trace.tags)))
    return {
        "traceId": trace.trace_id,
        "spanId": trace.trace_id[:16],
        "name": f"chat {trace.model}",
        "kind": 3,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 250_000_000),
        "attributes": attributes,
        "status": {},
    }


def export_body(traces: Iterable[FakeTrace]) -> bytes:
    """One OTLP/JSON ``ExportTraceServiceRequest`` holding ``traces`` (grouped by service)."""
    by_service: dict[str, list[dict[str, Any]]] = {}
    for trace in traces:
        by_service.setdefault(trace.service, []).append(_span(trace))
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [_attr("service.name", service)]},
                    "scopeSpans": [{"scope": {"name": "shop.agent"}, "spans": spans}],
                }
                for service, spans in by_service.items()
            ]
        }
    ).encode()


def batches(traces: list[FakeTrace], size: int = 200) -> Iterator[bytes]:
    """Export bodies of at most ``size`` traces each, in order (as a batch span processor sends)."""
    for start in range(0, len(traces), size):
        yield export_body(traces[start : start + size])
