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
"""Events read for one trace's span table on a case page; a longer trace is shown truncated (and
says so)."""

VIEWER_MAX_EVENTS = 10_000
"""Events the trace viewer reads (a 2,000-span agent trace with its messages is ~6,000); a longer
trace is shown truncated (and says so)."""

_ID_KEYS = {"span_id", "parent_span_id", "kind", "elapsed_ms", "tokens_in", "tokens_out", "status"}
_COST_KEYS = ("cost", "cost_usd", "llm.cost.total", "gen_ai.usage.cost")


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
    parent_id: str | None = None
    row_children: int = 0
    bar_x: str = "0"
    bar_width: str = "0"

    @property
    def is_span(self) -> bool:
        return self.kind not in ("message", "error")

    @property
    def is_chat_message(self) -> bool:
        """A chat message (a ``message`` event with a ``role``): shown in its span's conversation,
        not as a row of the span tree."""
        return self.kind == "message" and "role" in self.attributes

    @property
    def level(self) -> int:
        """The ARIA ``aria-level`` of its tree row (1 for a root)."""
        return self.depth + 1

    @property
    def indent(self) -> int:
        """Its row's indent step (CSS class ``lv<n>``): the depth, capped at 24 (deeper rows say
        their level in ``aria-level`` and the span path)."""
        return min(self.depth, 24)

    @property
    def state(self) -> str:
        """``ok`` / ``error`` / ``open`` (no end yet) / ``event`` (a point event that is not an
        error): what its row's colour *and* icon say. Any span status other than ``ok`` (``error``,
        ``timeout``, ...) is an error: never shown as ok."""
        if self.kind == "error" or (self.status not in ("ok", "open", "") or self.error):
            return "error"
        if not self.is_span:
            return "event"
        return self.status

    @property
    def model(self) -> str:
        """The model a ``chat`` span names (the response's, else the request's), or ``""``."""
        value = self.attributes.get("model") or self.attributes.get("response_model") or ""
        return str(value)

    @property
    def cost(self) -> float | None:
        """Cost in USD when the span carries one (``cost``, ``cost_usd``, OpenInference's
        ``llm.cost.total``), else ``None``: never estimated here."""
        for key in _COST_KEYS:
            value = self.attributes.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        return None


@dataclass(slots=True)
class SpanTree:
    """A run's spans, flattened depth-first.

    Attributes:
        nodes: Depth-first order, each with ``depth``, ``parent_id`` and its timeline bar
            (``bar_x`` / ``bar_width``: start and duration in % of ``total_ms``, as SVG numbers).
        rows: ``nodes`` without chat messages (the span tree's rows; each node's
            ``row_children`` counts its children among them).
        total_ms: Duration covered (for timeline bars), >= 1.
        truncated: More than :data:`MAX_EVENTS` events; the tail is not shown.
        n_events: Events read.
        by_id: Every node by its ``span_id``.
    """

    nodes: list[SpanNode]
    total_ms: float
    truncated: bool
    n_events: int
    by_id: dict[str, SpanNode] = field(default_factory=dict)
    rows: list[SpanNode] = field(default_factory=list)


def _number(value: Any) -> float | None:
    """A duration as stored, or ``None`` when it is not a number (a foreign trace's odd value must
    not break the page)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    """A token count as stored, or ``None`` when it is not an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
            node.elapsed_ms = _number(end.get("elapsed_ms"))
            node.tokens_in = _count(end.get("tokens_in"))
            node.tokens_out = _count(end.get("tokens_out"))
            node.status = str(end.get("status") or "ok")
            node.error = end.get("error")
            node.attributes.update({k: v for k, v in end.items() if k not in _ID_KEYS and k != "error"})
        node.children = [node_of(child) for child in item.children]
        return node

    flat: list[SpanNode] = []
    # depth-first with an explicit stack, parents before their children
    stack: list[tuple[SpanNode, int, str | None]] = [
        (node, 0, None) for node in reversed([node_of(item) for item in fold_spans(events).roots])
    ]
    while stack:
        node, depth, parent_id = stack.pop()
        node.depth, node.parent_id = depth, parent_id
        flat.append(node)
        if node.elapsed_ms is not None:
            total_ms = max(total_ms, node.offset_ms + float(node.elapsed_ms))
        stack.extend((child, depth + 1, node.span_id) for child in reversed(node.children))
    rows = []
    for node in flat:
        if node.is_chat_message:
            continue
        rows.append(node)
        node.row_children = sum(1 for child in node.children if not child.is_chat_message)
        node.bar_x = f"{min(100.0, 100.0 * node.offset_ms / total_ms):.2f}"
        width = 100.0 * float(node.elapsed_ms or 0.0) / total_ms
        # a zero-length span or a point event still shows as a thin tick
        node.bar_width = f"{max(0.25, min(width, 100.0 - float(node.bar_x))):.2f}"
    return SpanTree(flat, total_ms, False, len(events), {node.span_id: node for node in flat}, rows)


def span_tree(run: Run, *, limit: int = MAX_EVENTS) -> SpanTree:
    """The span tree of one stored run (reads at most ``limit`` events, payloads included)."""
    # named tuples, not model instances: a 2,000-span trace is ~6,000 rows (a third faster)
    rows = list(
        Event.objects.filter(run=run)
        .order_by("seq")
        .values_list("seq", "ts", "type", "name", "payload", named=True)[: limit + 1]
    )
    tree = build_span_tree(rows[:limit])
    tree.truncated = len(rows) > limit
    return tree
