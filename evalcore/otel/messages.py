"""Chat messages <-> the GenAI semantic conventions' message JSON.

Evalsite records chat messages as the chat-completions API writes them: ``{"role", "content",
"tool_calls": [{"id", "type": "function", "function": {"name", "arguments": <JSON text>}}]}``
and tool answers as ``{"role": "tool", "tool_call_id", "content"}``. The conventions'
``gen_ai.input.messages`` / ``gen_ai.output.messages`` are JSON lists of ``{"role", "parts":
[...]}`` with ``text``, ``tool_call`` (``id``, ``name``, ``arguments``) and
``tool_call_response`` (``id``, ``response``) parts; output messages add ``finish_reason``.

Reading also takes the older forms instrumentations still send: a JSON list of ``{role,
content}`` (``gen_ai.prompt`` / ``gen_ai.completion``), and the indexed attributes
``gen_ai.prompt.<i>.role`` / ``gen_ai.prompt.<i>.content`` (OpenLLMetry).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evalcore.otel.model import json_text, parse_json

Message = dict[str, Any]


def _arguments_value(raw: Any) -> Any:
    """Tool-call arguments as a JSON value (the chat API sends them as JSON text)."""
    return parse_json(raw) if isinstance(raw, str) else raw


def genai_messages(messages: list[Message], *, finish_reason: str | None = None) -> list[dict[str, Any]]:
    """Chat messages in the conventions' ``parts`` shape.

    Args:
        messages: Chat-completions messages (``role``, ``content`` text or content parts,
            ``tool_calls``, ``tool_call_id``; ``participant_name`` / ``name``).
        finish_reason: Set on each message (output messages carry it).

    Returns:
        ``[{"role", "parts": [...], ["name"], ["finish_reason"]}]``; a message with no content
        and no tool calls has an empty ``parts`` list.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        role = str(message.get("role") or "user")
        parts: list[dict[str, Any]] = []
        content = message.get("content")
        if role == "tool":
            parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content})
        elif isinstance(content, str):
            if content:
                parts.append({"type": "text", "content": content})
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") == "text":
                    parts.append({"type": "text", "content": str(part.get("text", ""))})
                elif isinstance(part, Mapping):
                    parts.append(dict(part))
        elif content is not None:
            parts.append({"type": "text", "content": json_text(content)})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name", call.get("name")),
                    "arguments": _arguments_value(function.get("arguments", call.get("arguments"))),
                }
            )
        item: dict[str, Any] = {"role": role, "parts": parts}
        name = message.get("participant_name") or message.get("name")
        if name:
            item["name"] = name
        if finish_reason:
            item["finish_reason"] = finish_reason
        out.append(item)
    return out


def _text_of(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(p.get("text", p.get("content", "")))
            for p in content
            if isinstance(p, Mapping) and p.get("type") in ("text", None)
        ]
        return "".join(texts)
    return json_text(content)


def _from_parts(item: Mapping[str, Any]) -> list[Message]:
    role = str(item.get("role") or "user")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    answers: list[Message] = []
    for part in item.get("parts") or []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "tool_call":
            arguments = part.get("arguments")
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {
                        "name": part.get("name"),
                        "arguments": arguments if isinstance(arguments, str) else json_text(arguments or {}),
                    },
                }
            )
        elif kind == "tool_call_response":
            response = part.get("response")
            answers.append({"role": "tool", "tool_call_id": part.get("id"), "content": response})
    if answers and not texts and not calls:
        return answers
    message: Message = {"role": role, "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return [message, *answers]


def chat_messages(value: Any) -> list[Message]:
    """Messages read from an attribute (or event) value, as chat-completions messages.

    Takes the conventions' ``parts`` messages, the older ``{role, content}`` lists, a
    ``{"messages": [...]}`` object, or plain text (one user message); JSON text or already
    decoded. Anything else gives ``[]`` (never raises: a span's odd attribute must not stop
    the trace from being stored).
    """
    value = parse_json(value)
    if isinstance(value, str):
        return [{"role": "user", "content": value}] if value else []
    if isinstance(value, Mapping):
        value = value.get("messages", [value])
    if not isinstance(value, list):
        return []
    out: list[Message] = []
    for item in value:
        if isinstance(item, str):
            out.append({"role": "user", "content": item})
        elif isinstance(item, Mapping) and "parts" in item:
            out.extend(_from_parts(item))
        elif isinstance(item, Mapping) and ("content" in item or "role" in item):
            message: Message = {"role": str(item.get("role") or "user"), "content": _text_of(item.get("content"))}
            for key in ("tool_calls", "tool_call_id", "name"):
                if item.get(key):
                    message[key] = item[key]
            out.append(message)
    return out


_INDEXED = re.compile(r"^(?P<prefix>gen_ai\.(?:prompt|completion))\.(?P<index>[0-9]{1,9})\.(?P<key>role|content)$")


def indexed_messages(attributes: Mapping[str, Any], prefix: str) -> list[Message]:
    """Messages from ``<prefix>.<i>.role`` / ``<prefix>.<i>.content`` attributes, in index order
    (``prefix``: ``gen_ai.prompt`` or ``gen_ai.completion``); ``[]`` when there are none."""
    found: dict[int, Message] = {}
    for key, value in attributes.items():
        match = _INDEXED.match(key)
        if match is None or match.group("prefix") != prefix:
            continue
        message = found.setdefault(int(match.group("index")), {"role": "user", "content": None})
        message[match.group("key")] = str(value) if match.group("key") == "role" else value
    return [found[i] for i in sorted(found)]


def message_text(message: Message) -> str:
    """The text of a message's content (content parts joined; ``""`` when it has none)."""
    return _text_of(message.get("content")) or ""


def last_answer(messages: list[Message]) -> str | None:
    """The text of the last assistant message that has text (``None``: none has)."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and message_text(message):
            return message_text(message)
    return None


def tool_calls_of(messages: list[Message]) -> list[dict[str, Any]]:
    """The tool calls the assistant messages asked for, in order, as ``{name, arguments}``."""
    calls: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            calls.append(
                {
                    "name": function.get("name", call.get("name")),
                    "arguments": _arguments_value(function.get("arguments", call.get("arguments"))) or {},
                }
            )
    return calls


def case_input(messages: list[Message]) -> Any:
    """A case's input from the messages a trace started with: the user's text when the
    conversation is one user message, else the messages without the system prompt (the target
    under test brings its own) as ``{role, content}`` turns; ``None`` when there are none."""
    turns = [m for m in messages if m.get("role") != "system"]
    if not turns:
        return None
    if len(turns) == 1 and turns[0].get("role") == "user":
        return message_text(turns[0])
    out: list[Message] = []
    for message in turns:
        turn: Message = {"role": message.get("role"), "content": message_text(message)}
        for key in ("tool_calls", "tool_call_id"):
            if message.get(key):
                turn[key] = message[key]
        out.append(turn)
    return out
