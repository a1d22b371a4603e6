"""Trace capture: a flat, ordered list of events per run, with span begin/end pairs.

The shape follows inspect_ai's event log and OpenTelemetry GenAI span names: a span is a
``span_begin`` / ``span_end`` pair sharing a ``span_id`` (with ``parent_span_id`` for nesting),
and point events (``message``, ``error``) carry the current span as their parent. Kinds:
``invoke_agent``, ``chat``, ``execute_tool`` and ``node``.

A :class:`Tracer` never blocks the target: it hands each event to a synchronous callback,
which is expected to append to a buffer (see the stores).
"""

from __future__ import annotations

import contextvars
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from evalcore.jsonvalue import NotJSONError, to_json

SPAN_BEGIN = "span_begin"
SPAN_END = "span_end"
MESSAGE = "message"
ERROR = "error"

SPAN_KINDS = ("invoke_agent", "chat", "execute_tool", "node")


@dataclass(slots=True)
class TraceEvent:
    """One append-only trace event.

    Attributes:
        trace_id: The trace it belongs to.
        run_id: The run it belongs to.
        seq: 0-based position within the run; strictly increasing.
        ts: Unix time in seconds.
        type: ``span_begin``, ``span_end``, ``message`` or ``error``.
        name: Span or event name (a tool name, a model name, a node name).
        payload: JSON object. Spans carry ``span_id``, ``parent_span_id`` and ``kind``; a
            ``span_end`` carries ``elapsed_ms`` and, when known, ``tokens_in`` / ``tokens_out``.
    """

    trace_id: str
    run_id: str
    seq: int
    ts: float
    type: str
    name: str
    payload: dict[str, Any] = field(default_factory=dict)


EventCallback = Callable[[TraceEvent], None]


class Span:
    """An open span; set attributes on it before it ends (tokens, result, finish reason)."""

    __slots__ = ("attributes", "kind", "name", "parent_span_id", "span_id", "started")

    def __init__(self, kind: str, name: str, parent_span_id: str | None, span_id: str) -> None:
        self.kind = kind
        self.name = name
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.started = time.perf_counter()
        self.attributes: dict[str, Any] = {}

    def set(self, **attributes: Any) -> None:
        """Record attributes to be written on the ``span_end`` event."""
        self.attributes.update(attributes)


class NullSpan:
    """A span that records nothing: stands in for :class:`Span` where no tracer is open."""

    __slots__ = ()

    def set(self, **attributes: Any) -> None:
        """Discard the attributes."""


class Tracer:
    """Records the events of one run.

    Args:
        trace_id: Trace id stamped on every event.
        run_id: Run id stamped on every event.
        callback: Receives each event as it happens; must not block. ``None`` keeps events
            only in :attr:`events`.
        keep: When True (the default without a callback) events are also kept in
            :attr:`events` for inspection.
        first_seq: Sequence number of the first event (to append to a stored trace, e.g. the
            judge's spans when a stored run is re-scored).
    """

    def __init__(
        self,
        trace_id: str,
        run_id: str,
        callback: EventCallback | None = None,
        *,
        keep: bool | None = None,
        first_seq: int = 0,
    ) -> None:
        self.trace_id = trace_id
        self.run_id = run_id
        self._callback = callback
        self._seq = itertools.count(first_seq)
        self._span_ids = itertools.count(first_seq)
        self._keep = callback is None if keep is None else keep
        self.events: list[TraceEvent] = []
        self._span_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(f"span-{run_id}", default=None)

    @property
    def current_span_id(self) -> str | None:
        """The innermost open span in the current task, or ``None``."""
        return self._span_var.get()

    def emit(self, type: str, name: str, payload: dict[str, Any] | None = None) -> TraceEvent:
        """Append one event (the sequence number is assigned here, in call order).

        Raises:
            evalcore.jsonvalue.NotJSONError: A payload value has no JSON form (see
                :mod:`evalcore.jsonvalue`); nothing is recorded.
        """
        try:
            data = to_json(payload) if payload else {}
        except NotJSONError as exc:
            # refused by name (never a silent str()): the code that recorded it sees the error
            raise NotJSONError(exc.type_name, f"trace event {name!r} payload{exc.where}", exc.reason) from None
        event = TraceEvent(self.trace_id, self.run_id, next(self._seq), time.time(), type, name, data)
        if self._keep:
            self.events.append(event)
        if self._callback is not None:
            self._callback(event)
        return event

    def span(self, kind: str, name: str, **attributes: Any) -> SpanScope:
        """Open a span around a block (``with tracer.span(...) as span:``); nested spans get this
        one as parent.

        The ``span_end`` event records ``elapsed_ms``, any attributes set on the span, and
        ``status: "error"`` with the error when the block raises (the exception propagates).
        """
        return SpanScope(self, kind, name, attributes)

    def message(self, name: str, **payload: Any) -> TraceEvent:
        """Record a point event (a chat message, a log line) under the current span."""
        return self.emit(MESSAGE, name, {"parent_span_id": self._span_var.get(), **payload})

    def error(self, name: str, **payload: Any) -> TraceEvent:
        """Record an error point event under the current span."""
        return self.emit(ERROR, name, {"parent_span_id": self._span_var.get(), **payload})


class SpanScope:
    """The context manager :meth:`Tracer.span` returns (a class, not a generator: a span costs
    a third less, and every case opens one). Entering emits ``span_begin`` and yields the
    :class:`Span`; leaving emits ``span_end``."""

    __slots__ = ("_attributes", "_kind", "_name", "_span", "_token", "_tracer")

    def __init__(self, tracer: Tracer, kind: str, name: str, attributes: dict[str, Any]) -> None:
        self._tracer = tracer
        self._kind = kind
        self._name = name
        self._attributes = attributes
        self._span: Span | None = None
        self._token: contextvars.Token[str | None] | None = None

    def __enter__(self) -> Span:
        tracer = self._tracer
        kind = self._kind
        # span ids need only be unique within the trace; a counter is far cheaper than uuid4
        span = Span(kind, self._name, tracer._span_var.get(), f"s{next(tracer._span_ids)}")
        tracer.emit(
            SPAN_BEGIN,
            self._name,
            {"span_id": span.span_id, "parent_span_id": span.parent_span_id, "kind": kind, **self._attributes},
        )
        self._span = span
        self._token = tracer._span_var.set(span.span_id)
        return span

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> Literal[False]:
        span = self._span
        assert span is not None and self._token is not None
        tracer = self._tracer
        tracer._span_var.reset(self._token)
        payload = {
            "span_id": span.span_id,
            "parent_span_id": span.parent_span_id,
            "kind": span.kind,
            "elapsed_ms": round((time.perf_counter() - span.started) * 1000.0, 3),
            "status": "ok" if exc is None else "error",
            **span.attributes,
        }
        if exc is not None:
            payload["error"] = {"type": type(exc).__name__, "message": str(exc)}
        tracer.emit(SPAN_END, span.name, payload)
        return False
