"""OTLP spans as an Evalsite trace: its event log, and what the trace did in brief.

A span becomes a ``span_begin`` / ``span_end`` pair at its start and end times, its span
events become point events under it. The kind comes from ``gen_ai.operation.name`` (``chat``,
``generate_content`` and ``text_completion`` -> ``chat``; ``execute_tool``; ``invoke_agent``,
``create_agent``, ``invoke_workflow`` -> ``invoke_agent``; an older span naming a model but no
operation -> ``chat``; anything else -> ``node``). GenAI attributes map back to the payload keys
Evalsite's own spans use (``model``, ``tokens_in``, ``tokens_out``, ``finish_reason``,
``arguments``, ``result``, ``tool_call_id``) plus ``input_messages`` / ``output_messages`` (chat
messages, from ``gen_ai.input.messages`` / ``gen_ai.output.messages`` or the older
``gen_ai.prompt`` / ``gen_ai.completion`` attributes and events); every other attribute is kept
under its own name. OpenInference spans (``openinference.span.kind``, ``llm.*``) are read by
:mod:`evalcore.otel.openinference` into the same keys. A span Evalsite exported itself
(``evalsite.span.*``) comes back exactly (its ``gen_ai`` attributes and evaluation events, derived
from the same record, are not read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalcore.otel import openinference as oi
from evalcore.otel import semconv as sc
from evalcore.otel.messages import Message, chat_messages, indexed_messages, last_answer, tool_calls_of
from evalcore.otel.model import OtelEvent, OtelSpan, parse_json
from evalcore.spans import fold_spans
from evalcore.tracing import ERROR, MESSAGE, SPAN_BEGIN, SPAN_END, TraceEvent

_ROLES = frozenset({"system", "user", "assistant", "tool"})
_CONSUMED = frozenset(
    {
        sc.OPERATION,
        sc.PROVIDER,
        sc.SYSTEM,
        sc.REQUEST_MODEL,
        sc.RESPONSE_MODEL,
        sc.INPUT_TOKENS,
        sc.OUTPUT_TOKENS,
        sc.LEGACY_INPUT_TOKENS,
        sc.LEGACY_OUTPUT_TOKENS,
        sc.FINISH_REASONS,
        sc.INPUT_MESSAGES,
        sc.OUTPUT_MESSAGES,
        sc.SYSTEM_INSTRUCTIONS,
        sc.LEGACY_PROMPT,
        sc.LEGACY_COMPLETION,
        sc.AGENT_NAME,
        sc.TOOL_NAME,
        sc.TOOL_TYPE,
        sc.TOOL_CALL_ID,
        sc.TOOL_ARGUMENTS,
        sc.TOOL_RESULT,
        sc.ERROR_TYPE,
    }
)


@dataclass(slots=True)
class Pending:
    """An event read from a span, not yet numbered.

    Attributes:
        event: The event (``seq`` is -1 until :func:`order_events` numbers it).
        hint: Its place in the original log, for a span Evalsite exported itself.
    """

    event: TraceEvent
    hint: int | None = None


def _kind(attributes: Mapping[str, Any]) -> str:
    if sc.OPERATION not in attributes and oi.is_openinference(attributes):
        return oi.span_kind(attributes) or "node"
    operation = str(attributes.get(sc.OPERATION) or "")
    if operation in sc.CHAT_OPERATIONS:
        return "chat"
    if operation == "execute_tool":
        return "execute_tool"
    if operation in sc.AGENT_OPERATIONS:
        return "invoke_agent"
    if not operation and (
        attributes.get(sc.REQUEST_MODEL) or attributes.get(sc.LEGACY_PROMPT) or "gen_ai.prompt.0.content" in attributes
    ):
        return "chat"
    return "node"


def _messages(span: OtelSpan, attribute: str, legacy: str, event_name: str) -> list[Message]:
    a = span.attributes
    if a.get(attribute):
        return chat_messages(a[attribute])
    if a.get(legacy):
        return chat_messages(a[legacy])
    indexed = indexed_messages(a, legacy)
    if indexed:
        return indexed
    for event in span.events:
        if event.name == event_name and event.attributes.get(legacy):
            return chat_messages(event.attributes[legacy])
    return []


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list | tuple) and value else value


def _int(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _foreign_payloads(span: OtelSpan, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The begin and end payloads (without ids) of a span some other tool sent."""
    a = span.attributes
    begin: dict[str, Any] = {}
    end: dict[str, Any] = {
        "elapsed_ms": round(max(span.end_ns - span.start_ns, 0) / 1e6, 3),
        "status": "error" if span.status == "error" else "ok",
    }
    openinference = sc.OPERATION not in a and oi.is_openinference(a)
    if openinference:
        begin, mapped_end = oi.payloads(a, kind)
        end.update(mapped_end)
    elif kind in ("chat", "invoke_agent"):
        inputs = _messages(span, sc.INPUT_MESSAGES, sc.LEGACY_PROMPT, sc.LEGACY_PROMPT_EVENT)
        if a.get(sc.SYSTEM_INSTRUCTIONS):
            inputs = [
                {"role": "system", "content": m.get("content")} for m in chat_messages(a[sc.SYSTEM_INSTRUCTIONS])
            ] + inputs
        outputs = _messages(span, sc.OUTPUT_MESSAGES, sc.LEGACY_COMPLETION, sc.LEGACY_COMPLETION_EVENT)
        for key, value in (("model", a.get(sc.REQUEST_MODEL)), ("provider", a.get(sc.PROVIDER) or a.get(sc.SYSTEM))):
            if value:
                begin[key] = value
        if inputs:
            begin["input_messages"] = inputs
        if a.get(sc.RESPONSE_MODEL):
            end["model"] = a[sc.RESPONSE_MODEL]
        tokens_in = _int(a.get(sc.INPUT_TOKENS, a.get(sc.LEGACY_INPUT_TOKENS)))
        tokens_out = _int(a.get(sc.OUTPUT_TOKENS, a.get(sc.LEGACY_OUTPUT_TOKENS)))
        if tokens_in is not None:
            end["tokens_in"] = tokens_in
        if tokens_out is not None:
            end["tokens_out"] = tokens_out
        finish = _first(a.get(sc.FINISH_REASONS)) or next((m.get("finish_reason") for m in outputs[-1:]), None)
        if finish:
            end["finish_reason"] = str(finish)
        if outputs:
            end["output_messages"] = outputs
    elif kind == "execute_tool":
        if a.get(sc.TOOL_CALL_ID):
            begin["tool_call_id"] = a[sc.TOOL_CALL_ID]
        if sc.TOOL_ARGUMENTS in a:
            begin["arguments"] = parse_json(a[sc.TOOL_ARGUMENTS])
        if sc.TOOL_RESULT in a:
            end["result"] = parse_json(a[sc.TOOL_RESULT])  # shown as the arguments are
    if span.status == "error":
        end["error"] = {"type": str(a.get(sc.ERROR_TYPE) or "Error"), "message": span.status_message}
    consumed = oi.CONSUMED if openinference else _CONSUMED
    skipped = oi.CONSUMED_PREFIXES if openinference else ("gen_ai.prompt.", "gen_ai.completion.")
    for key, value in a.items():
        if key not in consumed and not key.startswith(skipped):
            begin[key] = value
    return begin, end


def _name(span: OtelSpan, kind: str) -> str:
    a = span.attributes
    if sc.OPERATION not in a and oi.is_openinference(a):
        return oi.span_name(a, kind, span.name)
    if kind == "execute_tool" and a.get(sc.TOOL_NAME):
        return str(a[sc.TOOL_NAME])
    if kind == "invoke_agent" and a.get(sc.AGENT_NAME):
        return str(a[sc.AGENT_NAME])
    if kind == "chat" and (a.get(sc.RESPONSE_MODEL) or a.get(sc.REQUEST_MODEL)):
        return str(a.get(sc.RESPONSE_MODEL) or a.get(sc.REQUEST_MODEL))
    return span.name


def _point(event: OtelEvent, span: OtelSpan, run_id: str) -> Pending:
    a = event.attributes
    ts = event.time_ns / 1e9
    if sc.EVENT_PAYLOAD in a:  # one of Evalsite's own
        payload = parse_json(a[sc.EVENT_PAYLOAD])
        payload = payload if isinstance(payload, dict) else {"value": payload}
        if event.name == sc.EXCEPTION_EVENT:
            type_ = ERROR
        elif event.name.startswith(sc.EVENT_PREFIX):
            type_ = event.name[len(sc.EVENT_PREFIX) :]
        else:
            type_ = MESSAGE
        parent = None if a.get(sc.EVENT_ORPHAN) else span.span_id
        hint = _int(a.get(sc.EVENT_SEQ))
        name = str(a.get(sc.EVENT_NAME) or event.name)
        return Pending(
            TraceEvent(span.trace_id, run_id, -1, ts, type_, name, {"parent_span_id": parent, **payload}), hint
        )
    if event.name == sc.EXCEPTION_EVENT:
        payload = {
            "parent_span_id": span.span_id,
            "type": str(a.get(sc.EXCEPTION_TYPE) or "Exception"),
            "message": str(a.get(sc.EXCEPTION_MESSAGE) or ""),
        }
        if a.get(sc.EXCEPTION_STACKTRACE):
            payload["stacktrace"] = a[sc.EXCEPTION_STACKTRACE]
        return Pending(TraceEvent(span.trace_id, run_id, -1, ts, ERROR, payload["type"], payload))
    payload = {"parent_span_id": span.span_id, **a}
    return Pending(TraceEvent(span.trace_id, run_id, -1, ts, MESSAGE, event.name, payload))


def unmapped_reason(span: OtelSpan) -> str | None:
    """Why a span some other tool sent could not be mapped to a model call, tool call, agent or
    step (``None``: it was). Such a span is stored as a plain ``node`` with its attributes, and
    the ingest names it so nothing is silently opaque: it has no GenAI (``gen_ai.*``),
    OpenInference or Evalsite attributes, or an OpenInference kind the spec does not define."""
    a = span.attributes
    if sc.SPAN_KIND in a or sc.OPERATION in a or any(k.startswith("gen_ai.") for k in a):
        return None
    if oi.is_openinference(a):
        if oi.span_kind(a) is None:
            return f"openinference.span.kind {str(a.get(oi.SPAN_KIND))[:40]!r} is not one OpenInference defines"
        return None
    return "no GenAI or OpenInference attributes"


def span_events(span: OtelSpan, *, run_id: str) -> list[Pending]:
    """One span's events, unnumbered: begin, end (unless an exported span never ended) and its
    span events as point events."""
    a = span.attributes
    exact = sc.SPAN_KIND in a
    kind = str(a[sc.SPAN_KIND]) if exact else _kind(a)
    name = str(a.get(sc.SPAN_NAME) or span.name) if exact else _name(span, kind)
    ids = {"span_id": span.span_id, "parent_span_id": span.parent_span_id, "kind": kind}
    begin: dict[str, Any] | None
    end: dict[str, Any] | None
    hints: list[int | None] = [None, None]
    if exact:
        begin = parse_json(a[sc.SPAN_BEGIN]) if sc.SPAN_BEGIN in a else None
        end = parse_json(a[sc.SPAN_END]) if sc.SPAN_END in a else None
        seqs = [_int(s) for s in a.get(sc.SPAN_SEQ) or []]
        hints = [seqs[0] if begin is not None and seqs else None, seqs[-1] if end is not None and seqs else None]
    else:
        begin, end = _foreign_payloads(span, kind)
    out: list[Pending] = []
    if isinstance(begin, dict):
        event = TraceEvent(span.trace_id, run_id, -1, span.start_ns / 1e9, SPAN_BEGIN, name, {**ids, **begin})
        out.append(Pending(event, hints[0]))
    if isinstance(end, dict):
        event = TraceEvent(span.trace_id, run_id, -1, span.end_ns / 1e9, SPAN_END, name, {**ids, **end})
        out.append(Pending(event, hints[1]))
    skipped = {sc.LEGACY_PROMPT_EVENT, sc.LEGACY_COMPLETION_EVENT}
    if exact:  # an exported case's evaluation events repeat its scores (kept as root attributes)
        skipped.add(sc.EVALUATION_EVENT)
    out.extend(_point(e, span, run_id) for e in span.events if e.name not in skipped)
    return out


def order_events(pending: Sequence[Pending], *, run_id: str) -> list[TraceEvent]:
    """Number a trace's events ``0..n-1`` in an order where a span's begin precedes what
    happened in it and its end follows it.

    Evalsite's own exported events keep their original order (every event has a hint). Any
    other mix is ordered by time; on a tie a begin goes before a point event before an end,
    outer begins first and inner ends first (a child that starts or ends with its parent).
    """
    if pending and all(p.hint is not None for p in pending):
        ordered = sorted(pending, key=lambda p: (p.hint, p.event.ts))
    else:
        parents = {
            str(p.event.payload.get("span_id")): p.event.payload.get("parent_span_id")
            for p in pending
            if p.event.type in (SPAN_BEGIN, SPAN_END)
        }

        def depth(span_id: Any) -> int:
            seen: set[Any] = set()
            level = 0
            while span_id is not None and str(span_id) in parents and span_id not in seen:
                seen.add(span_id)
                span_id = parents[str(span_id)]
                level += 1
            return level

        def key(item: tuple[int, Pending]) -> tuple[int, int, int, int]:
            index, p = item
            ts_us = round(p.event.ts * 1_000_000)
            if p.event.type == SPAN_BEGIN:
                return ts_us, 0, depth(p.event.payload.get("span_id")), index
            if p.event.type == SPAN_END:
                return ts_us, 2, -depth(p.event.payload.get("span_id")), index
            return ts_us, 1, 0, index

        ordered = [p for _, p in sorted(enumerate(pending), key=key)]
    return [
        TraceEvent(p.event.trace_id, run_id, seq, p.event.ts, p.event.type, p.event.name, p.event.payload)
        for seq, p in enumerate(ordered)
    ]


@dataclass(slots=True)
class TraceSummary:
    """What a trace did, read from its events (Evalsite's own or ingested ones).

    Attributes:
        started_at: Unix seconds of the first event.
        elapsed_ms: The root span's duration (else first to last event).
        root_name: The root span's name (``""``: no span).
        input_messages: The messages the trace started with (chat messages).
        output: The final answer's text (``None``: none found).
        model: The model of the last model call (else the root's).
        tokens_in, tokens_out: The root's usage when no model call reports any (model calls'
            own usage is summed by the store).
        tool_calls: ``[{name, arguments}]`` in call order.
        finish_reason: The last model call's (the final turn's: ``stop`` after a ``tool_calls``
            turn), else the root's.
        error: ``(type, message)`` when the root span failed.
        conversation_id: ``gen_ai.conversation.id`` (or ``session.id``) of any span.
    """

    started_at: float
    elapsed_ms: float
    root_name: str = ""
    input_messages: list[Message] = field(default_factory=list)
    output: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = ""
    error: tuple[str, str] | None = None
    conversation_id: str | None = None


def trace_summary(events: Sequence[TraceEvent]) -> TraceSummary:
    """The :class:`TraceSummary` of a trace's events (in ``seq`` order); never raises."""
    if not events:
        return TraceSummary(0.0, 0.0)
    spans = fold_spans(events).spans
    begins = {span_id: span.begin for span_id, span in spans.items() if span.begin is not None}
    ends = {span_id: span.end for span_id, span in spans.items() if span.end is not None}
    order = list(spans)

    def payload(span_id: str) -> dict[str, Any]:
        return {**spans[span_id].begin_payload, **spans[span_id].end_payload}

    def judged(span_id: str) -> bool:
        return payload(span_id).get("role") == "judge"

    known = set(order)
    roots = [s for s in order if str(payload(s).get("parent_span_id")) not in known and not judged(s)]
    root = roots[0] if roots else None
    root_begin = begins[root].payload if root in begins else {}
    root_end = ends[root].payload if root in ends else {}
    chats = [s for s in order if payload(s).get("kind") == "chat" and not judged(s)]
    messages = [e for e in events if e.type == MESSAGE and e.payload.get("role") in _ROLES]
    summary = TraceSummary(events[0].ts, (events[-1].ts - events[0].ts) * 1000.0)
    if root is not None:
        summary.root_name = spans[root].name
        if isinstance(root_end.get("elapsed_ms"), int | float):
            summary.elapsed_ms = float(root_end["elapsed_ms"])
    chat_inputs = [begins[s].payload.get("input_messages") for s in chats if s in begins]
    if root_begin.get("input_messages"):
        summary.input_messages = list(root_begin["input_messages"])
    elif chat_inputs and chat_inputs[0]:
        summary.input_messages = list(chat_inputs[0])
    else:
        for event in messages:
            if event.payload.get("role") == "assistant":
                break
            summary.input_messages.append({k: v for k, v in event.payload.items() if k != "parent_span_id"})
    chat_outputs = [ends[s].payload.get("output_messages") or [] for s in chats if s in ends]
    native = [{k: v for k, v in e.payload.items() if k != "parent_span_id"} for e in messages]
    summary.output = (
        last_answer(root_end.get("output_messages") or [])
        or next((last_answer(o) for o in reversed(chat_outputs) if last_answer(o)), None)
        or last_answer(native)
    )
    if summary.output is None:
        fallback = root_end.get("result", root_end.get("output_preview"))
        summary.output = None if fallback is None else str(fallback)
    models = [payload(s).get("model") for s in chats]
    summary.model = next((str(m) for m in reversed(models) if m), None) or (
        str(root_end.get("model") or root_begin.get("model") or "") or None
    )
    if not any(ends[s].payload.get("tokens_in") or ends[s].payload.get("tokens_out") for s in chats if s in ends):
        summary.tokens_in, summary.tokens_out = _int(root_end.get("tokens_in")), _int(root_end.get("tokens_out"))
    tools = [s for s in order if payload(s).get("kind") == "execute_tool" and not judged(s)]
    summary.tool_calls = [
        {"name": spans[s].name, "arguments": payload(s).get("arguments") or {}} for s in tools
    ] or tool_calls_of([m for o in chat_outputs for m in o] or native)
    finishes = [ends[s].payload.get("finish_reason") for s in chats if s in ends]
    summary.finish_reason = str(next((f for f in reversed(finishes) if f), "") or root_end.get("finish_reason") or "")
    if root_end.get("status") == "error":
        error = root_end.get("error")
        error = error if isinstance(error, dict) else {"message": error}
        summary.error = (str(error.get("type") or "Error"), str(error.get("message") or ""))
    for event in begins.values():
        found = event.payload.get(sc.CONVERSATION_ID) or event.payload.get(sc.SESSION_ID)
        if found:
            summary.conversation_id = str(found)
            break
    return summary
