"""The one fold of a trace's flat event log into its spans.

A trace (:mod:`evalcore.tracing`) is a flat, ordered list: ``span_begin`` / ``span_end`` pairs
sharing a ``span_id`` (nested by ``parent_span_id``) and point events (``message``, ``error``)
whose ``parent_span_id`` names the span they happened in. :func:`fold_spans` turns it into a tree
that the trace page (``apps.traces.queries``), ``evalsite trace`` and the OTLP export
(:mod:`evalcore.otel.export`) all read, so a trace shows the same shape everywhere.

The rules, in event order:

* A ``span_begin`` opens a span (id: its ``span_id``, else ``event-<seq>``) under its parent when
  that span is already known, else at the top.
* A ``span_end`` closes its span; an end whose begin is missing (cut off, a truncated page)
  still makes a span, placed as its begin would have been, so nothing is lost.
* A point event goes under its parent span when that span is known, else at the top.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalcore.tracing import SPAN_BEGIN, SPAN_END


class EventLike(Protocol):
    """What the fold reads of an event: an engine :class:`~evalcore.tracing.TraceEvent` or a stored row."""

    @property
    def seq(self) -> int: ...

    @property
    def type(self) -> str: ...

    @property
    def name(self) -> Any: ...

    @property
    def payload(self) -> Any: ...


@dataclass(slots=True, eq=False)
class FoldedSpan[E: EventLike]:
    """One span of a folded trace.

    Attributes:
        span_id: Its ``span_id`` (``event-<seq>`` when the begin carried none).
        parent_id: The ``parent_span_id`` it names (as text), known span or not.
        name: The span's name (from its begin, else its end).
        begin: The ``span_begin`` event, or ``None`` when it was cut off.
        end: The ``span_end`` event, or ``None`` while the span is open.
        children: Nested spans and point events, in event order.
    """

    span_id: str
    parent_id: str | None
    name: str
    begin: E | None = None
    end: E | None = None
    children: list[FoldedSpan[E] | E] = field(default_factory=list)

    @property
    def begin_payload(self) -> dict[str, Any]:
        """The begin event's payload (``{}`` when cut off)."""
        return _payload(self.begin)

    @property
    def end_payload(self) -> dict[str, Any]:
        """The end event's payload (``{}`` while open)."""
        return _payload(self.end)

    @property
    def kind(self) -> str | None:
        """The span kind its begin (else its end) names, or ``None``."""
        kind = self.begin_payload.get("kind") or self.end_payload.get("kind")
        return str(kind) if kind else None


@dataclass(slots=True)
class SpanFold[E: EventLike]:
    """A folded trace.

    Attributes:
        roots: Top-level spans and point events (no parent, or a parent not known when they
            came), in event order.
        spans: Every span by id, in the order first seen.
    """

    roots: list[FoldedSpan[E] | E] = field(default_factory=list)
    spans: dict[str, FoldedSpan[E]] = field(default_factory=dict)

    def walk(self) -> Iterable[tuple[FoldedSpan[E] | E, int]]:
        """Every node depth-first with its depth (0 for a root), in the order a tree prints them."""
        stack: list[tuple[FoldedSpan[E] | E, int]] = [(node, 0) for node in reversed(self.roots)]
        while stack:
            node, depth = stack.pop()
            yield node, depth
            if isinstance(node, FoldedSpan):
                stack.extend((child, depth + 1) for child in reversed(node.children))


def _payload(event: EventLike | None) -> dict[str, Any]:
    payload = event.payload if event is not None else None
    return payload if isinstance(payload, dict) else {}


def _parent_id(payload: dict[str, Any]) -> str | None:
    value = payload.get("parent_span_id")
    return None if value is None else str(value)


def fold_spans[E: EventLike](events: Iterable[E]) -> SpanFold[E]:
    """Fold events in ``seq`` order into spans (see the module doc for the rules).

    Args:
        events: A trace's events, in order.

    Returns:
        The :class:`SpanFold`. Never raises for a malformed log (a missing id, a cut-off begin).
    """
    fold: SpanFold[E] = SpanFold()

    def attach(node: FoldedSpan[E] | E, parent_id: str | None) -> None:
        parent = fold.spans.get(parent_id) if parent_id is not None else None
        (parent.children if parent is not None else fold.roots).append(node)

    for event in events:
        payload = _payload(event)
        if event.type == SPAN_BEGIN:
            given = payload.get("span_id")
            span: FoldedSpan[E] = FoldedSpan(
                str(given) if given is not None else f"event-{event.seq}", _parent_id(payload), event.name, begin=event
            )
            attach(span, span.parent_id)
            fold.spans[span.span_id] = span
        elif event.type == SPAN_END:
            span_id = str(payload.get("span_id"))
            found = fold.spans.get(span_id)
            if found is None:
                found = FoldedSpan(span_id, _parent_id(payload), event.name)
                attach(found, found.parent_id)
                fold.spans[span_id] = found
            found.end = event
        else:
            attach(event, _parent_id(payload))
    return fold
