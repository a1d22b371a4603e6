"""An Evalsite trace (its event log) as OTLP spans with the GenAI semantic conventions.

Each ``span_begin`` / ``span_end`` pair becomes one span with its start and end times, its
parent link and ids derived from Evalsite's (see :mod:`evalcore.otel.model`). By kind:

* ``chat``: ``gen_ai.operation.name=chat``, span name ``chat <model>``, span kind client,
  request / response model, usage, finish reasons, provider (``gen_ai.provider.name`` and the
  older ``gen_ai.system``) when the span names one, ``gen_ai.input.messages`` (the conversation
  the call was sent) and ``gen_ai.output.messages`` (what it answered), rebuilt from the
  trace's ``message`` events.
* ``execute_tool``: ``execute_tool <tool>``, ``gen_ai.tool.name`` / ``.type`` / ``.call.id`` /
  ``.call.arguments`` / ``.call.result``.
* ``invoke_agent``: ``invoke_agent <agent>``, ``gen_ai.agent.name``, the model, usage, the
  opening messages and the answer.
* ``node`` (a pipeline step): its name, no ``gen_ai`` operation.

Every span also carries its exact Evalsite record (``evalsite.span.*``), so the trace posted
back to Evalsite's own OTLP endpoint is stored as it was. Point events become span events
(``exception`` for errors, ``evalsite.message`` ...); those recorded outside any span ride on
the case's root span, which also gets the eval run's attributes and scores (:class:`CaseRoot`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.otel import semconv as sc
from evalcore.otel.messages import Message, genai_messages
from evalcore.otel.model import OtelEvent, OtelSpan, json_text, otel_span_id, otel_trace_id, to_ns
from evalcore.spans import FoldedSpan, fold_spans
from evalcore.tracing import ERROR, MESSAGE, SPAN_BEGIN, SPAN_END, TraceEvent

_ID_KEYS = ("span_id", "parent_span_id", "kind")
_ROLES = frozenset({"system", "user", "assistant", "tool"})
_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "participant_name")


@dataclass(slots=True)
class CaseRoot:
    """What the case's root span carries beyond its own events.

    Attributes:
        attributes: Set on the root span (``evalsite.eval_run.id``, ``evalsite.case.id``,
            ``evalsite.score.<name>`` ...).
        events: Added to the root span (one ``gen_ai.evaluation.result`` per score).
        output: The run's final answer, the root's ``gen_ai.output.messages``
            (:data:`~evalcore.jsonvalue.MISSING`: not known).
        started_at, ended_at: Unix seconds; the times of a root made up for a trace that has
            events but no span (``None``: from the events).
        name: That made-up root's name.
    """

    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[OtelEvent] = field(default_factory=list)
    output: Any = MISSING
    started_at: float | None = None
    ended_at: float | None = None
    name: str = "evalsite.case"


@dataclass(slots=True)
class _Span:
    span_id: str
    parent: str | None
    kind: str
    name: str
    start: float
    begin: dict[str, Any] | None
    begin_seq: int | None
    end: dict[str, Any] | None = None
    end_seq: int | None = None
    stop: float | None = None
    inputs: list[Message] | None = None
    outputs: list[Message] = field(default_factory=list)
    points: list[tuple[TraceEvent, bool]] = field(default_factory=list)


def _parent(payload: dict[str, Any]) -> str | None:
    value = payload.get("parent_span_id")
    return None if value is None else str(value)


def _extras(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in _ID_KEYS}


def _message(payload: dict[str, Any]) -> Message:
    return {k: payload[k] for k in _MESSAGE_KEYS if k in payload}


class _Log:
    """The trace's spans (the engine's fold, :func:`evalcore.spans.fold_spans`) and the
    conversations its ``message`` events tell, per agent."""

    def __init__(self, events: Sequence[TraceEvent]) -> None:
        self.spans: dict[str, _Span] = {}
        self.order: list[str] = []
        self.conversations: dict[str | None, list[Message]] = {}
        self.orphans: list[TraceEvent] = []
        fold = fold_spans(events)
        for item in fold.roots:
            if not isinstance(item, FoldedSpan):
                self.orphans.append(item)
        for span_id, folded in fold.spans.items():
            self.spans[span_id] = self._span(folded)
            self.order.append(span_id)
        self._converse(events)

    @staticmethod
    def _span(folded: FoldedSpan[TraceEvent]) -> _Span:
        begin, end = folded.begin, folded.end
        if begin is not None:
            kind = str(begin.payload.get("kind") or "node")
            span = _Span(
                folded.span_id, folded.parent_id, kind, folded.name, begin.ts, _extras(begin.payload), begin.seq
            )
        else:  # its begin was cut off: started elapsed_ms before its end
            assert end is not None  # a folded span has a begin or an end
            elapsed = float(end.payload.get("elapsed_ms") or 0.0) / 1000.0
            kind = str(end.payload.get("kind") or "node")
            span = _Span(folded.span_id, folded.parent_id, kind, folded.name, end.ts - elapsed, None, None)
        if end is not None:
            span.end, span.end_seq, span.stop = _extras(end.payload), end.seq, end.ts
        span.points = [(child, False) for child in folded.children if not isinstance(child, FoldedSpan)]
        return span

    def agent_of(self, span_id: str | None, known: set[str] | None = None) -> str | None:
        """The nearest ``invoke_agent`` span at or above ``span_id`` (``None``: the trace's own),
        among the ``known`` spans (default: all)."""
        seen: set[str] = set()
        while span_id is not None and span_id in self.spans and span_id not in seen:
            if known is not None and span_id not in known:
                break
            seen.add(span_id)
            if self.spans[span_id].kind == "invoke_agent":
                return span_id
            span_id = self.spans[span_id].parent
        return None

    def _converse(self, events: Sequence[TraceEvent]) -> None:
        """Each chat span's input (its agent's conversation when it began) and output, and each
        agent's conversation, read in event order (only the spans seen so far count)."""
        known: set[str] = set()
        for event in events:
            payload = event.payload
            if event.type == SPAN_BEGIN:
                given = payload.get("span_id")
                span_id = str(given) if given is not None else f"event-{event.seq}"  # as the fold names it
                span = self.spans.get(span_id)
                if span is not None and span.kind == "chat":
                    span.inputs = list(self.conversations.get(self.agent_of(span.parent, known), []))
                known.add(span_id)
            elif event.type == SPAN_END:
                known.add(str(payload.get("span_id")))
            elif event.type == MESSAGE and payload.get("role") in _ROLES:
                owner = _parent(payload)
                message = _message(payload)
                if owner is not None and owner in known and self.spans[owner].kind == "chat":
                    self.spans[owner].outputs.append(message)
                self.conversations.setdefault(self.agent_of(owner, known), []).append(message)


def _point_event(event: TraceEvent, *, orphan: bool) -> OtelEvent:
    payload = {k: v for k, v in event.payload.items() if k != "parent_span_id"}
    attributes: dict[str, Any] = {
        sc.EVENT_NAME: event.name,
        sc.EVENT_PAYLOAD: json_text(payload),
        sc.EVENT_SEQ: event.seq,
    }
    if orphan:
        attributes[sc.EVENT_ORPHAN] = True
    if event.type == ERROR:
        attributes[sc.EXCEPTION_TYPE] = str(payload.get("type") or event.name)
        attributes[sc.EXCEPTION_MESSAGE] = str(payload.get("message") or "")
        return OtelEvent(sc.EXCEPTION_EVENT, to_ns(event.ts), attributes)
    return OtelEvent(sc.EVENT_PREFIX + event.type, to_ns(event.ts), attributes)


def _put(attributes: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != "":
        attributes[key] = value


def _usage(attributes: dict[str, Any], end: dict[str, Any]) -> None:
    for key, name in ((sc.INPUT_TOKENS, "tokens_in"), (sc.OUTPUT_TOKENS, "tokens_out")):
        if isinstance(end.get(name), int | float) and not isinstance(end.get(name), bool):
            attributes[key] = int(end[name])


def _genai(span: _Span, log: _Log, output: Any) -> tuple[str, dict[str, Any]]:
    """The span's OTLP name and its ``gen_ai`` attributes."""
    begin, end = span.begin or {}, span.end or {}
    attributes: dict[str, Any] = {}
    if span.kind == "chat":
        model = begin.get("model") or end.get("model")
        attributes[sc.OPERATION] = "chat"
        _put(attributes, sc.REQUEST_MODEL, model)
        _put(attributes, sc.RESPONSE_MODEL, end.get("model"))
        _put(attributes, sc.PROVIDER, begin.get("provider") or end.get("provider"))
        _put(attributes, sc.SYSTEM, attributes.get(sc.PROVIDER))
        _usage(attributes, end)
        finish = end.get("finish_reason")
        if finish:
            attributes[sc.FINISH_REASONS] = [str(finish)]
        if span.inputs:
            attributes[sc.INPUT_MESSAGES] = json_text(genai_messages(span.inputs))
        if span.outputs:
            outputs = genai_messages(span.outputs, finish_reason=str(finish) if finish else None)
            attributes[sc.OUTPUT_MESSAGES] = json_text(outputs)
        if begin.get("role") == "judge":
            attributes[sc.ROLE] = "judge"
        return f"chat {model}" if model else "chat", attributes
    if span.kind == "execute_tool":
        attributes[sc.OPERATION] = "execute_tool"
        attributes[sc.TOOL_NAME] = span.name
        attributes[sc.TOOL_TYPE] = "function"
        _put(attributes, sc.TOOL_CALL_ID, begin.get("tool_call_id"))
        arguments = begin.get("arguments")
        if arguments is not None:
            attributes[sc.TOOL_ARGUMENTS] = arguments if isinstance(arguments, str) else json_text(arguments)
        if "result" in end and end["result"] is not None:
            result = end["result"]
            attributes[sc.TOOL_RESULT] = result if isinstance(result, str) else json_text(result)
        return f"execute_tool {span.name}", attributes
    if span.kind == "invoke_agent":
        attributes[sc.OPERATION] = "invoke_agent"
        attributes[sc.AGENT_NAME] = span.name
        _put(attributes, sc.REQUEST_MODEL, begin.get("model"))
        _put(attributes, sc.RESPONSE_MODEL, end.get("model") if end.get("model") != begin.get("model") else None)
        _usage(attributes, end)
        conversation = log.conversations.get(span.span_id, [])
        opening: list[Message] = []
        for message in conversation:
            if message.get("role") == "assistant":
                break
            opening.append(message)
        if opening:
            attributes[sc.INPUT_MESSAGES] = json_text(genai_messages(opening))
        answer = [m for m in conversation if m.get("role") == "assistant"][-1:]
        if output is not MISSING and output is not None:
            answer = [{"role": "assistant", "content": output if isinstance(output, str) else json_text(output)}]
        if answer:
            finish = end.get("finish_reason")
            attributes[sc.OUTPUT_MESSAGES] = json_text(genai_messages(answer, finish_reason=finish or None))
        return f"invoke_agent {span.name}", attributes
    return span.name, attributes


def _status(span: _Span) -> tuple[str, str, str | None]:
    """``(status, message, error type)`` of a span (an open span: unset)."""
    end = span.end or {}
    if end.get("status") != "error":
        return "unset", "", None
    error = end.get("error")
    if isinstance(error, dict):
        return "error", str(error.get("message") or ""), str(error.get("type") or "Error")
    return "error", str(error or ""), "Error"


def trace_spans(
    events: Sequence[TraceEvent],
    *,
    trace_id: str,
    resource: dict[str, Any] | None = None,
    root: CaseRoot | None = None,
    scope: str = "evalsite",
) -> list[OtelSpan]:
    """The OTLP spans of one trace.

    Args:
        events: The trace's events in ``seq`` order.
        trace_id: The Evalsite trace id (mapped with :func:`~evalcore.otel.model.otel_trace_id`).
        resource: Resource attributes of every span (``service.name`` ...).
        root: The case's root span's extras; the root is the first span without a parent
            that is not the judge's. A trace with events but no span gets a made-up root.
        scope: The instrumentation scope's name.

    Returns:
        Spans in the order they began. A span that never ended ends at the last event, with
        status unset and ``evalsite.span.end`` absent.
    """
    log = _Log(events)
    resource = dict(resource or {})
    otel_trace = otel_trace_id(trace_id)
    last_ts = events[-1].ts if events else 0.0
    case_root = next(
        (
            s
            for s in (log.spans[i] for i in log.order)
            if (s.parent is None or s.parent not in log.spans) and (s.begin or {}).get("role") != "judge"
        ),
        None,
    )
    spans: list[OtelSpan] = []
    for span_id in log.order:
        span = log.spans[span_id]
        is_root = span is case_root
        name, attributes = _genai(span, log, root.output if is_root and root is not None else MISSING)
        attributes[sc.SPAN_KIND] = span.kind
        attributes[sc.SPAN_NAME] = span.name
        if span.begin is not None:
            attributes[sc.SPAN_BEGIN] = json_text(span.begin)
        if span.end is not None:
            attributes[sc.SPAN_END] = json_text(span.end)
        attributes[sc.SPAN_SEQ] = [s for s in (span.begin_seq, span.end_seq) if s is not None] or [-1]
        status, message, error_type = _status(span)
        if error_type:
            attributes[sc.ERROR_TYPE] = error_type
        otel_events = [_point_event(e, orphan=orphan) for e, orphan in span.points]
        if is_root:
            otel_events += [_point_event(e, orphan=True) for e in log.orphans]
            if root is not None:
                attributes.update(root.attributes)
                otel_events += root.events
        parent = span.parent if span.parent in log.spans else None
        spans.append(
            OtelSpan(
                trace_id=otel_trace,
                span_id=otel_span_id(trace_id, span_id),
                parent_span_id=otel_span_id(trace_id, parent) if parent is not None else None,
                name=name,
                start_ns=to_ns(span.start),
                end_ns=to_ns(span.stop if span.stop is not None else max(last_ts, span.start)),
                attributes=attributes,
                events=sorted(otel_events, key=lambda e: e.time_ns),
                status=status,
                status_message=message,
                kind="client" if span.kind == "chat" else "internal",
                resource=resource,
                scope=scope,
            )
        )
    if case_root is None and (log.orphans or (root is not None and events)):
        spans.insert(0, _made_up_root(events, otel_trace, trace_id, resource, root or CaseRoot(), log.orphans, scope))
    return spans


def _made_up_root(
    events: Sequence[TraceEvent],
    otel_trace: str,
    trace_id: str,
    resource: dict[str, Any],
    root: CaseRoot,
    orphans: list[TraceEvent],
    scope: str,
) -> OtelSpan:
    """A root for a trace whose events sit in no span (a target that traced nothing itself)."""
    start = root.started_at if root.started_at is not None else (events[0].ts if events else 0.0)
    end = root.ended_at if root.ended_at is not None else (events[-1].ts if events else start)
    return OtelSpan(
        trace_id=otel_trace,
        span_id=otel_span_id(trace_id, "evalsite-root"),
        parent_span_id=None,
        name=root.name,
        start_ns=to_ns(min(start, end)),
        end_ns=to_ns(max(start, end)),
        attributes=dict(root.attributes),
        events=sorted([_point_event(e, orphan=True) for e in orphans] + root.events, key=lambda e: e.time_ns),
        resource=resource,
        scope=scope,
    )
