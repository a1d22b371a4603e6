"""A stored agent trace of a chosen number of spans, for the trace viewer's tests and its bench
(``bench/bench_trace_page.py``).

Shape: one ``invoke_agent`` root holding the opening ``system`` / ``user`` messages, then steps of a
``chat`` span (its assistant message asking for a tool) and an ``execute_tool`` span (its tool
message); every 10th tool call runs a nested ``invoke_agent`` sub-agent with one ``chat`` of its own,
and every 50th tool call fails. Times advance 1 ms per event.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apps.traces.models import Event, Run

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_trace_run(run_id: str = "big", *, status: str = "ok") -> Run:
    """An empty ``Run`` row (the events come from :func:`add_big_trace`)."""
    return Run.objects.create(
        run_id=run_id, trace_id=f"t-{run_id}", target_id="bench-agent", started=T0, status=status, model="gpt-x"
    )


def big_trace_events(n_spans: int) -> list[tuple[str, str, dict[str, Any]]]:
    """``(type, name, payload)`` of a trace with exactly ``n_spans`` spans (>= 1), in order."""
    events: list[tuple[str, str, dict[str, Any]]] = []
    spans = 0

    def begin(span_id: str, parent: str | None, kind: str, name: str, **extra: Any) -> None:
        nonlocal spans
        spans += 1
        events.append(("span_begin", name, {"span_id": span_id, "parent_span_id": parent, "kind": kind, **extra}))

    def end(span_id: str, parent: str | None, kind: str, name: str, **extra: Any) -> None:
        payload = {"span_id": span_id, "parent_span_id": parent, "kind": kind, "status": "ok", **extra}
        events.append(("span_end", name, payload))

    def message(parent: str, role: str, **payload: Any) -> None:
        events.append(("message", role, {"parent_span_id": parent, "role": role, **payload}))

    begin("root", None, "invoke_agent", "bench-agent", model="gpt-x", max_steps=5000)
    message("root", "system", content="You answer questions about orders.")
    message("root", "user", content="Where is order 42?")
    step = 0
    while spans < n_spans:
        chat = f"chat-{step}"
        begin(chat, "root", "chat", "gpt-x", model="gpt-x", step=step)
        call = {"id": f"call-{step}", "type": "function", "function": {"name": "get_order", "arguments": '{"id": 42}'}}
        message(chat, "assistant", content=None, tool_calls=[call])
        end(chat, "root", "chat", "gpt-x", elapsed_ms=3.0, tokens_in=100 + step, tokens_out=12, model="gpt-x")
        if spans >= n_spans:
            break
        tool = f"tool-{step}"
        begin(tool, "root", "execute_tool", "get_order", tool_call_id=f"call-{step}", arguments={"id": 42})
        if step % 10 == 9 and spans + 2 <= n_spans:
            sub = f"sub-{step}"
            begin(sub, tool, "invoke_agent", "lookup-agent")
            begin(f"sub-chat-{step}", sub, "chat", "gpt-mini", model="gpt-mini")
            end(f"sub-chat-{step}", sub, "chat", "gpt-mini", elapsed_ms=1.0, tokens_in=20, tokens_out=5)
            end(sub, tool, "invoke_agent", "lookup-agent", elapsed_ms=2.0)
        message(tool, "tool", tool_call_id=f"call-{step}", tool_name="get_order", content="shipped")
        if step % 50 == 49:
            error = {"type": "TimeoutError", "message": "orders service timed out"}
            end(tool, "root", "execute_tool", "get_order", elapsed_ms=4.0, status="error", error=error)
        else:
            end(tool, "root", "execute_tool", "get_order", elapsed_ms=4.0, result="shipped")
        step += 1
    end("root", None, "invoke_agent", "bench-agent", elapsed_ms=float(len(events)))
    return events


def add_big_trace(run: Run, n_spans: int) -> int:
    """Store a trace of ``n_spans`` spans on ``run`` (one bulk insert); returns the events written."""
    rows = big_trace_events(n_spans)
    Event.objects.bulk_create(
        (
            Event(
                run=run,
                trace_id=run.trace_id,
                seq=i,
                ts=run.started + timedelta(milliseconds=i),
                type=type_,
                name=name,
                payload=payload,
                preview=str(payload)[:300],
            )
            for i, (type_, name, payload) in enumerate(rows)
        ),
        batch_size=1000,
    )
    return len(rows)
