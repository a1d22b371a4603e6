"""A local OTLP/HTTP trace receiver (a collector's stand-in) for the export tests.

A ``http.server`` thread on 127.0.0.1 that answers ``POST /v1/traces`` and decodes each body
with ``opentelemetry-proto``'s ``ExportTraceServiceRequest`` (gzip bodies inflated), as a real
backend would; ``status`` makes it refuse every request instead.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Received:
    """One request: path, headers (lower-case names) and the decoded export request."""

    path: str
    headers: dict[str, str]
    request: ExportTraceServiceRequest


@dataclass
class ReceivedSpan:
    """A span as the receiver saw it, with its resource's and its own attributes as dicts."""

    span: Any
    resource: dict[str, Any]
    attributes: dict[str, Any]
    scope: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


def _attrs(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


class OtlpReceiver:
    """Start with ``with OtlpReceiver() as receiver:``; ``receiver.url`` is the base URL."""

    def __init__(self, *, status: int = 200) -> None:
        self.status = status
        self.received: list[Received] = []
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if receiver.status != 200:
                    self.send_response(receiver.status)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest.FromString(body)
                with receiver._changed:
                    receiver.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, request)
                    )
                    receiver._changed.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        out: list[ReceivedSpan] = []
        for received in self.received:
            for resource_spans in received.request.resource_spans:
                resource = _attrs(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        events = [(e.name, _attrs(e.attributes)) for e in span.events]
                        out.append(
                            ReceivedSpan(span, resource, _attrs(span.attributes), scope_spans.scope.name, events)
                        )
        return out

    def wait_for_spans(self, count: int, timeout_s: float = 30.0) -> list[ReceivedSpan]:
        """Wait until ``count`` spans arrived (a test of a background export waits on this)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.spans()) >= count, timeout_s)
        return self.spans()
