"""The one fold of a flat trace log into spans (evalcore.spans), read by the trace page, the
``trace`` command and the OTLP export."""

from __future__ import annotations

import asyncio
from typing import Any

from evalcore.otel.export import trace_spans
from evalcore.spans import FoldedSpan, fold_spans
from evalcore.tracing import TraceEvent, Tracer


def event(seq: int, type_: str, name: str, **payload: Any) -> TraceEvent:
    return TraceEvent("t", "r", seq, 1000.0 + seq, type_, name, payload)


def shape(node: Any) -> Any:
    """A folded node as (name, [children]) for spans and the event name for point events."""
    if isinstance(node, FoldedSpan):
        return (node.name, [shape(child) for child in node.children])
    return node.name


def test_a_tracers_log_folds_back_into_the_spans_it_opened() -> None:
    tracer = Tracer("t", "r")

    async def run() -> None:
        with tracer.span("invoke_agent", "agent"):
            with tracer.span("chat", "gpt"):
                tracer.message("assistant", role="assistant", content="hi")
            with tracer.span("execute_tool", "add", arguments={"a": 1}) as span:
                span.set(result=2)
            tracer.error("oops", message="late")

    asyncio.run(run())
    fold = fold_spans(tracer.events)
    assert [shape(root) for root in fold.roots] == [("agent", [("gpt", ["assistant"]), ("add", []), "oops"])]
    add = next(span for span in fold.spans.values() if span.name == "add")
    assert add.kind == "execute_tool" and add.begin_payload["arguments"] == {"a": 1}
    assert add.end_payload["result"] == 2
    assert [(node.name, depth) for node, depth in fold.walk()] == [
        ("agent", 0),
        ("gpt", 1),
        ("assistant", 2),
        ("add", 1),
        ("oops", 1),
    ]


def test_a_cut_off_begin_an_unknown_parent_and_a_missing_id_lose_nothing() -> None:
    events = [
        event(0, "span_end", "lost", span_id="s0", parent_span_id=None, kind="chat", elapsed_ms=5),
        event(1, "span_begin", "orphan", span_id="s1", parent_span_id="gone", kind="node"),
        event(2, "message", "note", parent_span_id="s1", role="user", content="x"),
        event(3, "error", "stray", parent_span_id="nowhere", message="m"),
        event(4, "span_begin", "anonymous", kind="node"),
        event(5, "span_end", "orphan", span_id="s1", parent_span_id="gone", kind="node", elapsed_ms=1),
    ]
    fold = fold_spans(events)
    assert [shape(root) for root in fold.roots] == [("lost", []), ("orphan", ["note"]), "stray", ("anonymous", [])]
    lost = fold.spans["s0"]
    assert lost.begin is None and lost.kind == "chat" and lost.end is events[0]
    assert fold.spans["s1"].parent_id == "gone" and fold.spans["s1"].end is events[5]
    assert fold.spans["event-4"].end is None  # still open


def test_the_otlp_export_keeps_the_folds_spans_and_orphans() -> None:
    events = [
        event(0, "span_begin", "agent", span_id="a", parent_span_id=None, kind="invoke_agent"),
        event(1, "span_begin", "tool", span_id="b", parent_span_id="a", kind="execute_tool"),
        event(2, "span_end", "tool", span_id="b", parent_span_id="a", kind="execute_tool", elapsed_ms=1),
        event(3, "error", "stray", parent_span_id="nowhere", message="m"),
        event(4, "span_end", "agent", span_id="a", parent_span_id=None, kind="invoke_agent", elapsed_ms=4),
    ]
    spans = trace_spans(events, trace_id="t")
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"invoke_agent agent", "execute_tool tool"}
    assert by_name["execute_tool tool"].parent_span_id == by_name["invoke_agent agent"].span_id
    root_events = [e.attributes.get("evalsite.event.name") for e in by_name["invoke_agent agent"].events]
    assert "stray" in root_events  # an event outside any known span rides on the case's root
