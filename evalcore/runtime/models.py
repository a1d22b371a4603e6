"""The chat-model contract every model client implements (OpenAI-compatible, local, scripted).

Messages use the OpenAI chat-completions shape (``{"role", "content", "tool_calls"?,
"tool_call_id"?}``) because every endpoint we target speaks it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evalcore.tool_arguments import read_tool_arguments


@dataclass(slots=True)
class ToolCall:
    """One tool call requested by a model.

    Attributes:
        id: The call id given by the model (never used for scoring).
        name: Tool name.
        arguments: Parsed JSON arguments (``{}`` when the model sent none).
        raw_arguments: The arguments text exactly as the model sent it.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str = ""


@dataclass(slots=True)
class ChatResponse:
    """A model's answer to one chat call.

    Attributes:
        content: Text content, or ``None`` when the model only called tools.
        tool_calls: Tool calls requested, in order.
        model: Model name reported by the endpoint (or configured).
        tokens_in: Prompt tokens, when reported.
        tokens_out: Completion tokens, when reported.
        finish_reason: ``stop``, ``tool_calls``, ``length``, ...
        raw: The response body as JSON, for debugging.
        tokens_cached_in: Of ``tokens_in``, those read from the prompt cache
            (``usage.prompt_tokens_details.cached_tokens``), when reported.
        tokens_reasoning: Of ``tokens_out``, the reasoning tokens
            (``usage.completion_tokens_details.reasoning_tokens``), when reported.
        ttft_ms: Time to the first token, ms, when the answer was streamed.
    """

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    tokens_cached_in: int | None = None
    tokens_reasoning: int | None = None
    ttft_ms: float | None = None


@runtime_checkable
class ChatModel(Protocol):
    """Any chat model: ``await model.complete(messages, ...) -> ChatResponse``.

    Implementations raise :class:`ModelError` with a clear
    message on a non-retryable failure, after retrying 429 / 5xx / timeouts with backoff.
    """

    name: str

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse: ...


class ModelError(Exception):
    """A model call failed for good (bad request, auth, malformed response, retries exhausted)."""


def tool_call_arguments_error(call: ToolCall) -> str | None:
    """Why ``call``'s arguments are unusable, or ``None`` when they are fine.

    A client that receives malformed arguments keeps the text in ``raw_arguments`` and sets
    ``arguments={}``; this re-checks the text so the mark needs no extra field on ToolCall.
    """
    if call.arguments:
        return None
    return read_tool_arguments(call.raw_arguments).error


def tool_call_to_message(call: ToolCall) -> dict[str, Any]:
    """A ToolCall in the chat-completions ``assistant.tool_calls[]`` shape."""
    raw = call.raw_arguments or json.dumps(call.arguments, ensure_ascii=False)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": raw}}


def chat_response_from_openai(body: Any, *, default_model: str = "") -> ChatResponse:
    """Read a chat-completions response body (OpenAI, vLLM, Ollama, llama.cpp) into a ChatResponse.

    Only the first choice is read. Tool calls whose ``arguments`` text is not a JSON object
    keep the text in ``raw_arguments`` with ``arguments={}`` (see :func:`tool_call_arguments_error`).

    Args:
        body: The decoded JSON body.
        default_model: Used when the body does not name the model.

    Raises:
        ModelError: When the body is not an object or has no usable ``choices[0].message``.
    """
    if not isinstance(body, dict):
        raise ModelError(f"malformed response: expected a JSON object, got {type(body).__name__}")
    choices = body.get("choices")
    if isinstance(choices, list) and not choices:
        raise ModelError("malformed response: 'choices' is an empty list (no answer)")
    if not isinstance(choices, list):
        keys = ", ".join(sorted(body)) or "none"
        raise ModelError(f"malformed response: no 'choices' in the body (keys: {keys})")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise ModelError("malformed response: 'choices[0].message' is missing or not an object")
    calls: list[ToolCall] = []
    for index, item in enumerate(message.get("tool_calls") or []):
        function = (item or {}).get("function") or {}
        arguments = read_tool_arguments(function.get("arguments"))  # text, or an object from some servers
        calls.append(
            ToolCall(
                id=str(item.get("id") or f"call_{index}"),
                name=str(function.get("name") or ""),
                arguments=arguments.value,
                raw_arguments=arguments.text,
            )
        )
    raw_usage = body.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    content = message.get("content")
    return ChatResponse(
        content=content if isinstance(content, str) or content is None else json.dumps(content),
        tool_calls=calls,
        model=str(body.get("model") or default_model),
        tokens_in=_int_or_none(usage.get("prompt_tokens")),
        tokens_out=_int_or_none(usage.get("completion_tokens")),
        finish_reason=choice.get("finish_reason"),
        raw=body,
        tokens_cached_in=_detail(usage, "prompt_tokens_details", "cached_tokens"),
        tokens_reasoning=_detail(usage, "completion_tokens_details", "reasoning_tokens"),
    )


def _detail(usage: dict[str, Any], group: str, key: str) -> int | None:
    details = usage.get(group)
    return _int_or_none(details.get(key)) if isinstance(details, dict) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
