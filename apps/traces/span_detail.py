"""The trace viewer's detail pane: one span of a :class:`~apps.traces.queries.SpanTree` as people read
it (a conversation, a tool call, model and parameters, tokens, latency, the error's text).

Messages are chat-completions messages (``role``, ``content``, ``tool_calls``, ``tool_call_id``)
from whichever place a trace keeps them, so our own traces, imported Inspect logs and OTLP-ingested
ones read the same:

* a span's own ``input_messages`` / ``output_messages`` (OTLP GenAI and OpenInference spans);
* else ``message`` events: for a ``chat`` span, the messages of its agent (its nearest
  ``invoke_agent`` ancestor) logged before it began (what the model was sent) and those logged
  inside it (its answer); for an ``invoke_agent`` span, every message in it (the transcript);
  for any other span, the messages logged inside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from apps.traces.queries import SpanNode, SpanTree

PARAMETER_KEYS = (
    "provider",
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "max_output_tokens",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "finish_reason",
    "max_steps",
    "tools",
    "step",
    "role",
)
"""Attributes shown as the span's parameters, in this order (plus any ``gen_ai.request.*`` one and
OpenInference's ``llm.invocation_parameters``)."""

_SHOWN_ELSEWHERE = frozenset(
    {
        "model",
        "input_messages",
        "output_messages",
        "arguments",
        "result",
        "result_preview",
        "response_preview",
        "tool_calls",
        "input_preview",
        "output_preview",
        "llm.invocation_parameters",
        "cost",
        "cost_usd",
        "llm.cost.total",
        "gen_ai.usage.cost",
    }
)


@dataclass(slots=True)
class ToolCallView:
    """One tool call an assistant message asked for.

    Attributes:
        name: The tool's name.
        call_id: The call's id (``""`` when the message gave none).
        arguments: The arguments as indented JSON (as sent when they are not JSON).
    """

    name: str
    call_id: str
    arguments: str


@dataclass(slots=True)
class MessageView:
    """One chat message as the conversation shows it.

    Attributes:
        role: ``system`` / ``user`` / ``assistant`` / ``tool`` (or whatever the trace says).
        text: The content as text (parts joined; a structured content as indented JSON).
        tool_calls: The tool calls of an assistant message.
        tool_call_id: For a tool result, the call it answers.
        tool_name: For a tool result, the tool's name when known.
    """

    role: str
    text: str
    tool_calls: list[ToolCallView] = field(default_factory=list)
    tool_call_id: str = ""
    tool_name: str = ""


SHOWN_MESSAGES = 40
"""Messages a conversation shows at most: the first and the last half of them, with the count of
those in between (a long agent run's transcript has thousands; the page must stay fast)."""


@dataclass(slots=True)
class Conversation:
    """Messages, the middle of a long list left out.

    Attributes:
        head: The first messages.
        hidden: How many are left out between ``head`` and ``tail`` (0: none).
        tail: The last messages (empty when nothing is left out).
    """

    head: list[MessageView]
    hidden: int = 0
    tail: list[MessageView] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.head)

    def __len__(self) -> int:
        return len(self.head) + self.hidden + len(self.tail)


def conversation(messages: list[tuple[Any, str]], shown: int = SHOWN_MESSAGES) -> Conversation:
    """Raw ``(message, role if it names none)`` pairs as a :class:`Conversation` showing at most
    ``shown`` of them; only those shown are read (a transcript of thousands stays cheap)."""
    if len(messages) <= shown:
        return Conversation([message_view(m, role=r) for m, r in messages])
    half = shown // 2
    return Conversation(
        [message_view(m, role=r) for m, r in messages[:half]],
        len(messages) - 2 * half,
        [message_view(m, role=r) for m, r in messages[-half:]],
    )


@dataclass(slots=True)
class SpanDetail:
    """What the detail pane shows of one span.

    Attributes:
        node: The span (or point event).
        path: Its ancestors, root first.
        sent: Messages the span was sent (a ``chat`` span's prompt), in order.
        said: Messages logged inside the span (a model's answer, a tool's result, an agent's
            transcript), in order.
        parameters: Model / call parameters found on the span, in :data:`PARAMETER_KEYS` order.
        arguments: A tool call's arguments as indented JSON, or ``None``.
        result: A tool call's result as text, or ``None``.
        error_text: The error's type, message and stack trace, or ``""``.
        events: Point events inside the span that are not chat messages (logs, errors).
        other: Remaining attributes, for a raw view.
    """

    node: SpanNode
    path: list[SpanNode]
    sent: Conversation
    said: Conversation
    parameters: dict[str, Any]
    arguments: str | None
    result: str | None
    error_text: str
    events: list[SpanNode]
    other: dict[str, Any]


def json_text(value: Any) -> str:
    """``value`` as indented JSON; a string that holds JSON is decoded first, any other string is
    returned as it is (a model's malformed arguments are shown as sent)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        if isinstance(decoded, str):
            return decoded
        value = decoded
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def content_text(content: Any) -> str:
    """A message's content as text: a string as it is, the text parts of a parts list joined by
    newlines (other parts as JSON), anything else as indented JSON, ``None`` as ``""``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
            else:
                texts.append(json_text(part))
        return "\n".join(texts)
    return json_text(content)


def _tool_call(call: Any) -> ToolCallView:
    if not isinstance(call, dict):
        return ToolCallView("?", "", json_text(call))
    given = call.get("function")
    function: dict[str, Any] = given if isinstance(given, dict) else {}
    name = function.get("name") or call.get("name") or "?"
    arguments = function.get("arguments", call.get("arguments", {}))
    return ToolCallView(str(name), str(call.get("id") or ""), json_text(arguments))


def message_view(message: Any, *, role: str = "") -> MessageView:
    """A chat-completions message (a dict; anything else is shown as a message's text)."""
    if not isinstance(message, dict):
        return MessageView(role or "message", content_text(message))
    calls = message.get("tool_calls")
    return MessageView(
        role=str(message.get("role") or role or "message"),
        text=content_text(message.get("content")),
        tool_calls=[_tool_call(c) for c in calls] if isinstance(calls, list) else [],
        tool_call_id=str(message.get("tool_call_id") or ""),
        tool_name=str(message.get("tool_name") or message.get("name") or ""),
    )


def _is_message(node: SpanNode) -> bool:
    return node.kind == "message" and ("role" in node.attributes or "content" in node.attributes)


def _subtree(node: SpanNode) -> list[SpanNode]:
    """``node``'s descendants, depth-first (for message events: in event order)."""
    out: list[SpanNode] = []
    stack = list(reversed(node.children))
    while stack:
        item = stack.pop()
        out.append(item)
        stack.extend(reversed(item.children))
    return out


def _path(tree: SpanTree, node: SpanNode) -> list[SpanNode]:
    path: list[SpanNode] = []
    parent_id = node.parent_id
    while parent_id is not None and parent_id in tree.by_id:
        parent = tree.by_id[parent_id]
        path.append(parent)
        parent_id = parent.parent_id
    return path[::-1]


def _messages(value: Any) -> list[tuple[Any, str]] | None:
    return [(m, "") for m in value] if isinstance(value, list) else None


def _error_text(error: Any) -> str:
    if not error:
        return ""
    if isinstance(error, dict):
        head = ": ".join(str(error[k]) for k in ("type", "message") if error.get(k))
        trace = error.get("stacktrace") or error.get("traceback")
        return f"{head}\n\n{trace}" if trace else head or json_text(error)
    return str(error)


def _parameters(attributes: dict[str, Any]) -> dict[str, Any]:
    found = {key: attributes[key] for key in PARAMETER_KEYS if key in attributes}
    found.update({k: v for k, v in attributes.items() if k.startswith("gen_ai.request.")})
    invocation = attributes.get("llm.invocation_parameters")
    if isinstance(invocation, str):
        try:
            invocation = json.loads(invocation)
        except ValueError:
            pass
    if isinstance(invocation, dict):
        found.update(invocation)
    elif invocation is not None:
        found["llm.invocation_parameters"] = invocation
    return found


def _role(message: tuple[Any, str]) -> str:
    value, role = message
    return str((value.get("role") if isinstance(value, dict) else None) or role)


def span_detail(tree: SpanTree, node: SpanNode) -> SpanDetail:
    """The detail pane of ``node`` (one of ``tree``'s nodes). Reads only the tree: no query."""
    a = node.attributes
    path = _path(tree, node)
    inside = _subtree(node)
    if node.kind == "invoke_agent":
        # the agent's transcript: every message in it, not only those logged at its own level
        own = [n for n in inside if _is_message(n)]
    else:
        own = [n for n in node.children if _is_message(n)]
    if node.kind == "message" and _is_message(node):
        own = [node]
    said = _messages(a.get("output_messages"))
    if said is None:
        said = [(n.attributes, n.name) for n in own]
    sent = _messages(a.get("input_messages"))
    if sent is None:
        sent = []
        if node.kind == "chat":
            agent = next((p for p in reversed(path) if p.kind == "invoke_agent"), None)
            scope = _subtree(agent) if agent is not None else tree.nodes
            sent = [(n.attributes, n.name) for n in scope if _is_message(n) and n.seq < node.seq]
    result = a.get("result", a.get("result_preview"))
    if node.kind == "execute_tool":
        # the tool's answer is shown once, as its result (from the tool message when the span's end
        # carries none: a failed call)
        answers = [m for m in said if _role(m) == "tool"]
        if result is None and answers:
            result = message_view(answers[-1][0], role="tool").text
        said = [m for m in said if _role(m) != "tool"]
    arguments = json_text(a["arguments"]) if "arguments" in a else None
    return SpanDetail(
        node=node,
        path=path,
        sent=conversation(sent),
        said=conversation(said),
        parameters=_parameters(a),
        arguments=arguments,
        result=None if result is None else content_text(result),
        error_text=_error_text(node.error),
        events=[n for n in node.children if not n.is_span and not _is_message(n)],
        other={
            k: v
            for k, v in a.items()
            if k not in _SHOWN_ELSEWHERE
            and k not in PARAMETER_KEYS
            and not k.startswith("gen_ai.request.")
            and not (node.kind == "message" and k in ("role", "content", "tool_call_id", "tool_name"))
        },
    )
