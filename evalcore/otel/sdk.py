"""Spans sent to an OTLP/HTTP endpoint with the official SDK and exporter.

The spans are replayed through ``opentelemetry-sdk``'s own tracer (with the recorded start and
end times, and an id generator handing out the recorded ids, so ids, times and parent links
are kept) and the ended spans go to ``opentelemetry-exporter-otlp-proto-http``'s
``OTLPSpanExporter``: the wire format, retries and timeouts are the SDK's.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies, proxy_bypass

from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from evalcore.otel.model import OtelSpan, attribute_value

_KINDS = {
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
# a replayed span keeps everything it had: no attribute, event or length cut
_LIMITS = SpanLimits(
    max_span_attributes=10_000,
    max_events=100_000,
    max_event_attributes=10_000,
    max_attributes=10_000,
    max_attribute_length=SpanLimits.UNSET,
    max_span_attribute_length=SpanLimits.UNSET,
)
_EXPORTER_LOGGER = "opentelemetry.exporter"
_capture_lock = threading.Lock()


class _GivenIds(IdGenerator):
    """Hands out the ids of the span being replayed (set just before it starts)."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


class _Collector(SpanProcessor):
    """Keeps the ended spans (they are exported in batches afterwards)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _attributes(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        converted = attribute_value(value)
        if converted is not None:
            out[key] = converted
    return out


def readable_spans(spans: Sequence[OtelSpan]) -> list[ReadableSpan]:
    """The SDK's ``ReadableSpan`` of each span (same ids, parents, times, attributes, events,
    status, kind, resource and scope), ready for any SDK span exporter."""
    groups: dict[tuple[tuple[str, str], ...], list[OtelSpan]] = {}
    for span in spans:
        key = tuple(sorted((k, repr(v)) for k, v in span.resource.items()))
        groups.setdefault(key, []).append(span)
    out: list[ReadableSpan] = []
    for group in groups.values():
        ids = _GivenIds()
        collector = _Collector()
        provider = TracerProvider(
            resource=Resource.create(_attributes(group[0].resource)),
            id_generator=ids,
            sampler=ALWAYS_ON,
            span_limits=_LIMITS,
            shutdown_on_exit=False,
        )
        provider.add_span_processor(collector)
        for span in group:
            tracer = provider.get_tracer(span.scope or "evalsite")
            trace_id = int(span.trace_id, 16)
            ids.trace_id, ids.span_id = trace_id, int(span.span_id, 16)
            context = None
            if span.parent_span_id:
                parent = SpanContext(
                    trace_id, int(span.parent_span_id, 16), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
                )
                context = trace_api.set_span_in_context(NonRecordingSpan(parent))
            live = tracer.start_span(
                span.name,
                context=context,
                kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
                attributes=_attributes(span.attributes),
                start_time=span.start_ns,
            )
            for event in span.events:
                live.add_event(event.name, _attributes(event.attributes), timestamp=event.time_ns)
            if span.status == "error":
                live.set_status(Status(StatusCode.ERROR, span.status_message or None))
            elif span.status == "ok":
                live.set_status(Status(StatusCode.OK))
            live.end(end_time=span.end_ns)
        provider.shutdown()
        out.extend(collector.spans)
    return out


def traces_endpoint(url: str) -> str:
    """The traces URL of an OTLP/HTTP endpoint: ``url`` as given when it ends in
    ``/v1/traces``, else ``url`` + ``/v1/traces`` (a base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT``
    takes it: ``http://localhost:4318`` -> ``http://localhost:4318/v1/traces``)."""
    url = url.strip()
    return url if url.rstrip("/").endswith("/v1/traces") else url.rstrip("/") + "/v1/traces"


def check_endpoint(url: str) -> str:
    """``url`` as given when it is an http(s) URL with a host (what the exporter can post to).

    Raises:
        ValueError: Anything else (``notaurl``, ``localhost:4318`` without a scheme, ``ftp://``).
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL with a host (e.g. http://localhost:4318)")
    try:
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError:
        raise ValueError(f"{url!r}: the port is not a number") from None
    return url


def _unreachable(url: str, timeout_s: float) -> str:
    """Why nothing can be reached at ``url``'s host and port (``""``: a connection was made, or
    the attempt timed out and the exporter's own retries get their chance)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if getproxies().get(parts.scheme) and not proxy_bypass(parts.hostname or ""):
        return ""  # reached through a proxy: only the exporter can tell
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=min(timeout_s, 3.0)):
            return ""
    except socket.gaierror as exc:
        return f"cannot resolve host {parts.hostname!r} ({exc.strerror})"
    except ConnectionRefusedError:
        return f"nothing is listening at {parts.hostname}:{port} (connection refused)"
    except OSError:
        return ""


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^\"')]+)")


def _one_reason(lines: list[str]) -> str:
    """The exporter's log lines of one failed batch as one line: the cause of its retries (said
    once, with how many attempts) or its final message."""
    transient = [line for line in lines if line.startswith("Transient error")]
    if not transient:
        return "; ".join(lines) or "the exporter reported a failure"
    cause = transient[-1].removeprefix("Transient error ").split(" encountered while", 1)[0]
    found = _ERRNO.search(cause)
    cause = found.group(1).strip() if found else cause
    return f"{cause} ({len(transient) + 1} attempts within the timeout)"


def parse_headers(text: str) -> dict[str, str]:
    """Headers written as ``OTEL_EXPORTER_OTLP_HEADERS`` writes them: ``k=v,k2=v2``, values
    URL-encoded (``Authorization=Bearer%20esk_...``).

    Raises:
        ValueError: An item without ``=`` or with an empty name.
    """
    headers: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"header {item.strip()!r}: write it as NAME=VALUE")
        headers[unquote(name.strip())] = unquote(value.strip())
    return headers


@dataclass(slots=True)
class ExportOutcome:
    """What an export did.

    Attributes:
        ok: Every batch was accepted.
        spans: Spans accepted.
        error: Why the first failed batch failed (the exporter's own words), ``""`` when ok.
    """

    ok: bool
    spans: int
    error: str = ""


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def _exporter_messages() -> Iterator[_Messages]:
    """The exporter's log lines while it exports, kept out of the logs (the caller reports
    the outcome once, in its own words)."""
    handler = _Messages()
    logger = logging.getLogger(_EXPORTER_LOGGER)
    with _capture_lock:
        propagate = logger.propagate
        logger.addHandler(handler)
        logger.propagate = False
        try:
            yield handler
        finally:
            logger.removeHandler(handler)
            logger.propagate = propagate


def export_spans(
    spans: Sequence[OtelSpan],
    *,
    endpoint: str,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    batch_spans: int = 512,
) -> ExportOutcome:
    """Send spans to an OTLP/HTTP endpoint; never raises for the endpoint's sake.

    Args:
        spans: The spans (of any number of traces).
        endpoint: A base URL or the traces URL (see :func:`traces_endpoint`).
        headers: Extra request headers (an ``Authorization`` token ...).
        timeout_s: The exporter's time budget per batch, retries included (a collector that is
            down costs at most this long: the first failed batch ends the export).
        batch_spans: Spans per request (a trace is never split across two).

    Returns:
        The outcome; ``error`` carries the reason in one line: an endpoint that is not an
        http(s) URL, a host that does not resolve or refuses the connection (found before the
        exporter starts, so that costs no retries), else the exporter's reason (HTTP status,
        a connection error retried until ``timeout_s``, said once).
    """
    try:
        check_endpoint(endpoint)
    except ValueError as exc:
        return ExportOutcome(False, 0, str(exc))
    down = _unreachable(endpoint, timeout_s) if spans else ""
    if down:  # fail at once: the exporter would retry a refused connection until its timeout
        return ExportOutcome(False, 0, down)
    exporter = OTLPSpanExporter(endpoint=traces_endpoint(endpoint), headers=headers or {}, timeout=timeout_s)
    sent = 0
    try:
        for batch in _batches(readable_spans(spans), batch_spans):
            with _exporter_messages() as messages:
                result = exporter.export(batch)
            if result is not SpanExportResult.SUCCESS:
                return ExportOutcome(False, sent, _one_reason(messages.lines))
            sent += len(batch)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]  # untyped in the exporter
    return ExportOutcome(True, sent)


def _batches(spans: list[ReadableSpan], size: int) -> Iterator[list[ReadableSpan]]:
    """Batches of about ``size`` spans, each trace whole in one batch."""
    batch: list[ReadableSpan] = []
    current: int | None = None
    for span in spans:
        trace_id = span.context.trace_id if span.context is not None else None
        if batch and len(batch) >= size and trace_id != current:
            yield batch
            batch = []
        batch.append(span)
        current = trace_id
    if batch:
        yield batch
