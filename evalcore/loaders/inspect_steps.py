"""An Inspect sample's conversation and events as plain messages and steps (model turns, tool calls).

Inspect keeps a sample's conversation as chat messages (``content`` is text or a list of parts:
text, reasoning, images...) and its work as events (``model``, ``tool``, ``span_begin``...). Both
are read here into what Evalsite's traces need:

* :func:`plain_message`: a message as ``{"role", "content"}`` (text parts joined; other parts
  written as ``[image]``-style markers), plus ``tool_calls`` (``{"id", "name", "arguments"}``),
  ``tool_call_id``, ``function``, ``reasoning`` and ``error`` when present.
* :func:`steps_from_events`: one :class:`InspectStep` per ``model`` event (kind ``chat``, with
  its usage, stop reason, times and the assistant message) and per ``tool`` event (kind
  ``execute_tool``, with arguments, result, error, times). A model call made inside a
  ``scorers`` span (a model-graded scorer) has ``role="judge"``, so it is kept out of the
  target's metrics as Evalsite's own judge spans are.
* :func:`steps_from_messages`: the same from the messages alone (no times, no per-turn usage),
  for logs written without events.

``attachment://`` references (Inspect moves long texts out of messages and events into the
sample's ``attachments``) are resolved first, by :func:`resolve_attachments`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["InspectStep", "plain_message", "resolve_attachments", "steps_from_events", "steps_from_messages", "unix"]

_ATTACHMENT = "attachment://"


@dataclass(slots=True)
class InspectStep:
    """One model turn (``kind="chat"``) or tool call (``kind="execute_tool"``) of a sample.

    Attributes:
        kind: ``chat`` or ``execute_tool``.
        name: The model name (chat) or the tool's function name.
        started, completed: Unix times in seconds, ``None`` when the log has no events.
        tokens_in, tokens_out: The turn's usage (chat only, when recorded).
        finish_reason: The model's stop reason (chat).
        message: The assistant message the turn produced (chat), as :func:`plain_message`.
        tool_call_id, arguments, result: The tool call (execute_tool).
        error: The turn's or the tool's error message, ``None`` when it succeeded.
        role: ``judge`` for a model call made by a scorer, else ``""``.
    """

    kind: str
    name: str
    started: float | None = None
    completed: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish_reason: str | None = None
    message: dict[str, Any] | None = None
    tool_call_id: str | None = None
    arguments: Any = None
    result: Any = None
    error: str | None = None
    role: str = ""


def unix(value: Any) -> float | None:
    """An ISO 8601 time (as Inspect writes it) as Unix seconds; ``None`` when absent or unreadable."""
    if isinstance(value, datetime):
        return value.timestamp()
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def resolve_attachments(value: Any, attachments: dict[str, str]) -> Any:
    """``value`` with every ``attachment://ID`` text replaced by the attachment (unknown ids kept)."""
    if not attachments:
        return value
    if isinstance(value, str):
        if value.startswith(_ATTACHMENT):
            return attachments.get(value[len(_ATTACHMENT) :], value)
        return value
    if isinstance(value, list):
        return [resolve_attachments(item, attachments) for item in value]
    if isinstance(value, dict):
        return {key: resolve_attachments(item, attachments) for key, item in value.items()}
    return value


def content_text(content: Any) -> str:
    """A message's content as text: parts joined by newlines, non-text parts as ``[type]``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            kind = str(part.get("type") or "")
            if kind == "text":
                parts.append(str(part.get("text") or ""))
            elif kind != "reasoning":
                parts.append(f"[{kind or 'content'}]")
    return "\n".join(parts)


def _reasoning(content: Any) -> str | None:
    if not isinstance(content, list):
        return None
    texts = [str(p.get("reasoning") or "") for p in content if isinstance(p, dict) and p.get("type") == "reasoning"]
    return "\n".join(texts) if texts else None


def plain_message(message: dict[str, Any]) -> dict[str, Any]:
    """One Inspect chat message as a plain ``{"role", "content", ...}`` dict (see the module doc)."""
    out: dict[str, Any] = {"role": str(message.get("role") or ""), "content": content_text(message.get("content"))}
    reasoning = _reasoning(message.get("content"))
    if reasoning:
        out["reasoning"] = reasoning
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("function"), "arguments": c.get("arguments")}
            for c in calls
            if isinstance(c, dict)
        ]
    for key in ("tool_call_id", "function"):
        if message.get(key) is not None:
            out[key] = message[key]
    error = message.get("error")
    if isinstance(error, dict) and error.get("message"):
        out["error"] = str(error["message"])
    return out


def _judge_spans(events: list[dict[str, Any]]) -> set[str]:
    """Ids of Inspect spans that are (inside) the scorers: their model calls are a judge's."""
    parents: dict[str, str | None] = {}
    kinds: dict[str, str] = {}
    for event in events:
        if event.get("event") == "span_begin" and event.get("id"):
            parents[str(event["id"])] = event.get("parent_id")
            kinds[str(event["id"])] = str(event.get("type") or "")
    judged: set[str] = set()
    for span in parents:
        seen: set[str] = set()
        current: str | None = span
        while current is not None and current not in seen:
            seen.add(current)
            if kinds.get(current) in ("scorers", "scorer"):
                judged.add(span)
                break
            current = parents.get(current)
    return judged


def _usage(output: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = output.get("usage")
    if not isinstance(usage, dict):
        return None, None
    tokens_in = int(usage.get("input_tokens") or 0)
    tokens_in += int(usage.get("input_tokens_cache_read") or 0) + int(usage.get("input_tokens_cache_write") or 0)
    return tokens_in, int(usage.get("output_tokens") or 0)


def _error_text(error: Any) -> str | None:
    if error is None or error == "":
        return None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)
    return str(error)


def _chat_step(event: dict[str, Any], judged: set[str]) -> InspectStep:
    output = event.get("output") if isinstance(event.get("output"), dict) else {}
    assert isinstance(output, dict)
    choices = output.get("choices") if isinstance(output.get("choices"), list) else []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = first.get("message")
    tokens_in, tokens_out = _usage(output)
    return InspectStep(
        kind="chat",
        name=str(event.get("model") or output.get("model") or "model"),
        started=unix(event.get("timestamp")),
        completed=unix(event.get("completed")),
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        finish_reason=str(first["stop_reason"]) if first.get("stop_reason") else None,
        message=plain_message(message) if isinstance(message, dict) else None,
        error=_error_text(event.get("error")),
        role="judge" if str(event.get("span_id") or "") in judged else "",
    )


def _tool_step(event: dict[str, Any]) -> InspectStep:
    result = event.get("result")
    return InspectStep(
        kind="execute_tool",
        name=str(event.get("function") or "tool"),
        started=unix(event.get("timestamp")),
        completed=unix(event.get("completed")),
        tool_call_id=str(event["id"]) if event.get("id") is not None else None,
        arguments=event.get("arguments"),
        result=result if isinstance(result, str) else content_text(result),
        error=_error_text(event.get("error")),
    )


def steps_from_events(events: list[dict[str, Any]]) -> list[InspectStep]:
    """The model turns and tool calls of a sample's events, in log order (see the module doc)."""
    judged = _judge_spans(events)
    steps: list[InspectStep] = []
    for event in events:
        kind = event.get("event")
        if kind == "model":
            steps.append(_chat_step(event, judged))
        elif kind == "tool":
            steps.append(_tool_step(event))
    return steps


def steps_from_messages(messages: list[dict[str, Any]], model: str) -> list[InspectStep]:
    """Model turns and tool calls read from plain messages (no times, no per-turn usage)."""
    steps: list[InspectStep] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            steps.append(InspectStep(kind="chat", name=str(message.get("model") or model), message=message))
        elif role == "tool":
            steps.append(
                InspectStep(
                    kind="execute_tool",
                    name=str(message.get("function") or "tool"),
                    tool_call_id=message.get("tool_call_id"),
                    arguments=_call_arguments(messages, message.get("tool_call_id")),
                    result=message.get("content"),
                    error=message.get("error"),
                )
            )
    return steps


def _call_arguments(messages: list[dict[str, Any]], call_id: Any) -> Any:
    for message in messages:
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return call.get("arguments")
    return None
