"""The OTLP/HTTP wire for traces: export requests decoded, responses encoded.

Requests come as ``application/x-protobuf`` (an ``ExportTraceServiceRequest``) or
``application/json`` (OTLP's JSON encoding: lowerCamelCase keys, trace and span ids as hex
strings, enums as numbers, 64-bit integers as strings or numbers), optionally
``Content-Encoding: gzip`` or ``deflate``. Both are parsed with ``opentelemetry-proto``'s message
classes; unknown fields are ignored, as OTLP asks of receivers. Answers use the request's
encoding: ``ExportTraceServiceResponse`` (with ``partial_success`` when spans were refused) or
a ``google.rpc.Status`` for an error.
"""

from __future__ import annotations

import base64
import json
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from evalcore.errors import InvalidInputError
from evalcore.jsonvalue import finite_or_text
from evalcore.otel import semconv as sc
from evalcore.otel.model import SPAN_KINDS, STATUS_CODES, OtelEvent, OtelSpan, is_hex_id

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

_TOKEN_COUNTS = (sc.INPUT_TOKENS, sc.OUTPUT_TOKENS, sc.LEGACY_INPUT_TOKENS, sc.LEGACY_OUTPUT_TOKENS)
_TOO_DEEP = "the request is nested too deeply (values nest at most about 30 levels: protobuf's limit of 100 messages)"
GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}
"""The ``google.rpc.Code`` sent in the ``Status`` body of each HTTP error status."""


class OtlpError(InvalidInputError):
    """A request the endpoint refuses; ``status`` is the HTTP status to answer (400 by default)."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def media_type(content_type: str) -> str | None:
    """:data:`PROTOBUF` or :data:`JSON` for a ``Content-Type`` header, ``None`` for any other."""
    base = content_type.split(";", 1)[0].strip().lower()
    if base in ("application/x-protobuf", "application/protobuf"):
        return PROTOBUF
    if base == "application/json":
        return JSON
    return None


def decode_body(body: bytes, encoding: str, *, limit: int) -> bytes:
    """The body with its ``Content-Encoding`` undone, at most ``limit`` bytes once inflated.

    Raises:
        OtlpError: An encoding other than gzip / deflate / identity (415), data that does not
            inflate (400), more than ``limit`` bytes inflated (413).
    """
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return body
    if name not in ("gzip", "deflate"):
        raise OtlpError(f"Content-Encoding {encoding!r} is not supported (send gzip, deflate or none)", status=415)
    inflater = zlib.decompressobj(wbits=31 if name == "gzip" else 15)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise OtlpError(f"the body is not valid {name} data ({exc})") from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise OtlpError(f"the request inflates to more than {limit} bytes (the limit)", status=413)
    return data


@dataclass(slots=True)
class DecodedRequest:
    """An export request read.

    Attributes:
        spans: The spans accepted, in request order.
        rejected: Spans refused (an invalid trace or span id).
        problems: Why, one line per refused span (the first few).
    """

    spans: list[OtelSpan] = field(default_factory=list)
    rejected: int = 0
    problems: list[str] = field(default_factory=list)


def _hex_ids_to_base64(data: Any) -> None:
    """OTLP JSON writes ids as hex; the protobuf JSON parser reads bytes as base64."""
    if not isinstance(data, dict):
        raise OtlpError("an OTLP JSON request is an object with a resourceSpans list")
    for r, resource in enumerate(_items(data, "resourceSpans", "")):
        for s, scope in enumerate(_items(resource, "scopeSpans", f"resourceSpans[{r}]")):
            for i, span in enumerate(_items(scope, "spans", f"resourceSpans[{r}].scopeSpans[{s}]")):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                _convert_ids(span, where)
                for n, link in enumerate(_items(span, "links", where)):
                    _convert_ids(link, f"{where}.links[{n}]")


def _items(parent: Any, key: str, where: str) -> Iterator[dict[str, Any]]:
    if not isinstance(parent, dict):
        raise OtlpError(f"{where or 'the request'}: expected an object")
    value = parent.get(key, [])
    if not isinstance(value, list):
        raise OtlpError(f"{where + '.' if where else ''}{key}: expected a list")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise OtlpError(f"{where + '.' if where else ''}{key}[{index}]: expected an object")
        yield item


def _convert_ids(obj: dict[str, Any], where: str) -> None:
    for key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"):
        if key not in obj:
            continue
        value = obj[key]
        if not isinstance(value, str) or len(value) % 2:
            raise OtlpError(f"{where}.{key}: {value!r} is not a hex id")
        try:
            obj[key] = base64.b64encode(bytes.fromhex(value)).decode()
        except ValueError:
            raise OtlpError(f"{where}.{key}: {value!r} is not a hex id") from None


def parse_request(body: bytes, media: str) -> ExportTraceServiceRequest:
    """The ``ExportTraceServiceRequest`` in a request body of type ``media``.

    Raises:
        OtlpError: The body is not one (400), with what was wrong and where.
    """
    request = ExportTraceServiceRequest()
    if media == PROTOBUF:
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            if "MaxDepth" in str(exc):
                raise OtlpError(_TOO_DEEP) from None
            raise OtlpError(f"the body is not a protobuf ExportTraceServiceRequest ({exc})") from None
        return request
    try:
        # a bare NaN / Infinity literal (not JSON, but Python and pydantic write it) is read as
        # the quoted form OTLP JSON uses for a double ("NaN"), which the parser below accepts
        data = json.loads(body, parse_constant=str)
    except UnicodeDecodeError:
        raise OtlpError("the body is not UTF-8 JSON") from None
    except RecursionError:
        raise OtlpError(_TOO_DEEP) from None
    except ValueError as exc:
        raise OtlpError(f"the body is not JSON ({exc})") from None
    try:
        _hex_ids_to_base64(data)
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except RecursionError:
        raise OtlpError(_TOO_DEEP) from None
    except json_format.ParseError as exc:
        if "too deep" in str(exc).lower():
            raise OtlpError(_TOO_DEEP) from None
        raise OtlpError(f"the body is not an OTLP JSON ExportTraceServiceRequest ({exc})") from None
    return request


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as a plain value (arrays as lists, key-value lists as dicts, bytes
    as hex text; an empty value as ``None``; a NaN / infinite double as the text ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"``, since stored values are JSON, which has no such numbers)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    if kind == "double_value":
        return finite_or_text(value.double_value)
    return None if kind is None else getattr(value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    """Repeated ``KeyValue`` as a dict (a repeated key: the last wins)."""
    out: dict[str, Any] = {}
    pair: KeyValue
    for pair in pairs:
        out[pair.key] = any_value(pair.value)
    return out


def decode_request(body: bytes, media: str, *, max_problems: int = 5) -> DecodedRequest:
    """The spans of an export request body (see :func:`parse_request` for the errors).

    A span whose trace id is not 16 bytes, whose span id is not 8, or whose parent id is
    neither empty nor 8 bytes (all-zero ids are invalid too) is refused and counted, not stored.
    A negative token count (``gen_ai.usage.*_tokens``) is dropped with a line in ``problems``
    (the span is kept). A start or end time of 0 (not set) is the span's other time; an event's
    time of 0 is its span's start (a span with neither time: :func:`fill_missing_times`).
    """
    request = parse_request(body, media)
    out = DecodedRequest()

    def problem(text: str) -> None:
        if len(out.problems) < max_problems:
            out.problems.append(text)

    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                parent = span.parent_span_id.hex() or None
                if not (
                    is_hex_id(trace_id, 32) and is_hex_id(span_id, 16) and (parent is None or is_hex_id(parent, 16))
                ):
                    out.rejected += 1
                    problem(
                        f"span {span.name!r}: trace id {trace_id!r} / span id {span_id!r} / parent {parent!r}"
                        " is not a valid id (16 / 8 / 8 bytes, not all zeros)"
                    )
                    continue
                values = attributes(span.attributes)
                for key in _TOKEN_COUNTS:
                    count = values.get(key)
                    if isinstance(count, int | float) and not isinstance(count, bool) and count < 0:
                        del values[key]
                        problem(f"span {span.name!r}: {key} {count} is negative: ignored")
                # a time of 0 is a time not set (OTLP): the span's other time stands in for it, and a
                # span without either gets its trace's times when stored (see fill_missing_times)
                start = span.start_time_unix_nano or span.end_time_unix_nano
                end = max(span.end_time_unix_nano or start, start)
                out.spans.append(
                    OtelSpan(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=parent,
                        name=span.name,
                        start_ns=start,
                        end_ns=end,
                        attributes=values,
                        events=[
                            OtelEvent(e.name, e.time_unix_nano or start, attributes(e.attributes)) for e in span.events
                        ],
                        status=STATUS_CODES[span.status.code] if span.status.code < len(STATUS_CODES) else "unset",
                        status_message=span.status.message,
                        kind=SPAN_KINDS[span.kind] if span.kind < len(SPAN_KINDS) else "unspecified",
                        resource=resource,
                        scope=scope,
                    )
                )
    return out


def fill_missing_times(spans: list[OtelSpan], *, known_ns: int | None) -> None:
    """Give each span with no time at all (start and end 0: OTLP's "not set") a time, in place.

    The time is ``known_ns`` (the earliest time of the trace's spans already stored), else the
    earliest start among ``spans``, else now; the span's events of time 0 get it too. So a span
    without times never moves its trace's start to 1970. ``spans`` are one trace's.
    """
    times = [s.start_ns for s in spans if s.start_ns]
    fallback = known_ns or (min(times) if times else time.time_ns())
    for span in spans:
        if not span.start_ns:
            span.start_ns = span.end_ns = fallback
            for event in span.events:
                event.time_ns = event.time_ns or fallback


def _encode(message: Any, media: str) -> bytes:
    if media == PROTOBUF:
        return bytes(message.SerializeToString())
    text: str = json_format.MessageToJson(message, indent=None)
    return text.encode()


def export_response(media: str, *, rejected: int = 0, message: str = "") -> bytes:
    """An ``ExportTraceServiceResponse`` body (``partial_success`` set when spans were refused)."""
    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return _encode(response, media)


def status_body(media: str, status: int, message: str) -> bytes:
    """A ``google.rpc.Status`` body for an HTTP error ``status`` (JSON for any other media type)."""
    body = status_pb2.Status(code=GRPC_CODES.get(status, 2), message=message)
    return _encode(body, media if media == PROTOBUF else JSON)
