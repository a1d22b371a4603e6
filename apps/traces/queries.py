"""Reads of traces: the span tree of one run, built from its flat event log.

Events are ``span_begin`` / ``span_end`` pairs sharing a ``span_id`` (nesting by
``parent_span_id``) and point events (``message``, ``error``) whose ``parent_span_id`` names
the span they happened in. The tree is flattened depth-first with a depth per node so a
template renders it without recursion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apps.traces.models import Event, Run
from evalcore.spans import FoldedSpan, fold_spans

MAX_EVENTS = 5000
"""Events read for one trace page; a longer trace is shown truncated (and says so)."""

_ID_KEYS = {"span_id", "parent_span_id", "kind", "elapsed_ms", "tokens_in", "tokens_out", "status"}


@dataclass(slots=True)
class SpanNode:
    """One span (or a point event shown as a leaf).

    Attributes:
        span_id: The span id (``event-<seq>`` for point events).
        kind: ``invoke_agent``, ``chat``, ``execute_tool``, ``node``, or the point event type
            (``message`` / ``error``).
        name: Span or event name.
        seq: Sequence number of the begin (or point) event.
        offset_ms: Start relative to the run's first event, in ms.
        elapsed_ms: Duration in ms (``None`` while open or for point events).
        tokens_in, tokens_out: Tokens reported on the span end.
        status: ``ok`` / ``error`` / ``open`` (no end event yet) / ``""`` for point events.
        error: The error object of a failed span or an error event.
        attributes: Remaining begin and end payload keys (tool ``arguments``, ``result``, ...).
        children: Nested spans and events in order.
        depth: 0 for roots (set when flattened).
    """

    span_id: str
    kind: str
    name: str
    seq: int
    offset_ms: float
    elapsed_ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    status: str = "open"
    error: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    children: list[SpanNode] = field(default_factory=list)
    depth: int = 0

    @property
    def is_span(self) -> bool:
        return self.kind not in ("message", "error")


@dataclass(slots=True)
class SpanTree:
    """A run's spans, flattened depth-first.

    Attributes:
        nodes: Depth-first order, each with ``depth``.
        total_ms: Duration covered (for timeline bars), >= 1.
        truncated: More than :data:`MAX_EVENTS` events; the tail is not shown.
        n_events: Events read.
    """

    nodes: list[SpanNode]
    total_ms: float
    truncated: bool
    n_events: int


def build_span_tree(events: list[Any]) -> SpanTree:
    """Fold ordered events (objects with ``seq``, ``ts``, ``type``, ``name``, ``payload``) into a tree.

    The fold is the engine's (:func:`evalcore.spans.fold_spans`): unknown parents (a span whose
    begin was cut off) attach at the root, so nothing is lost.
    """
    t0 = events[0].ts if events else None

    def offset(event: Any) -> float:
        return (event.ts - t0).total_seconds() * 1000.0 if t0 else 0.0

    total_ms = max([1.0, *(offset(event) for event in events)])

    def node_of(item: Any) -> SpanNode:
        if not isinstance(item, FoldedSpan):
            payload = item.payload or {}
            return SpanNode(
                span_id=f"event-{item.seq}",
                kind=item.type,
                name=item.name,
                seq=item.seq,
                offset_ms=offset(item),
                status="",
                error=payload.get("error") or (payload.get("message") if item.type == "error" else None),
                attributes={k: v for k, v in payload.items() if k not in _ID_KEYS},
            )
        if item.begin is not None:
            begin = item.begin_payload
            node = SpanNode(
                span_id=item.span_id,
                kind=str(begin.get("kind") or "span"),
                name=item.name,
                seq=item.begin.seq,
                offset_ms=offset(item.begin),
                attributes={k: v for k, v in begin.items() if k not in _ID_KEYS},
            )
        else:
            assert item.end is not None  # a folded span has a begin or an end
            kind = str(item.end_payload.get("kind") or "span")
            node = SpanNode(item.span_id, kind, item.name, item.end.seq, offset(item.end))
        if item.end is not None:
            end = item.end_payload
            node.elapsed_ms = end.get("elapsed_ms")
            node.tokens_in = end.get("tokens_in")
            node.tokens_out = end.get("tokens_out")
            node.status = str(end.get("status") or "ok")
            node.error = end.get("error")
            node.attributes.update({k: v for k, v in end.items() if k not in _ID_KEYS and k != "error"})
        node.children = [node_of(child) for child in item.children]
        return node

    flat: list[SpanNode] = []

    def walk(nodes: list[SpanNode], depth: int) -> None:
        nonlocal total_ms
        for node in nodes:
            node.depth = depth
            flat.append(node)
            if node.elapsed_ms is not None:
                total_ms = max(total_ms, node.offset_ms + float(node.elapsed_ms))
            walk(node.children, depth + 1)

    walk([node_of(item) for item in fold_spans(events).roots], 0)
    return SpanTree(flat, total_ms, False, len(events))


def span_tree(run: Run, *, limit: int = MAX_EVENTS) -> SpanTree:
    """The span tree of one stored run (reads at most ``limit`` events, payloads included)."""
    rows = list(Event.objects.filter(run=run).order_by("seq")[: limit + 1])
    tree = build_span_tree(rows[:limit])
    tree.truncated = len(rows) > limit
    return tree
