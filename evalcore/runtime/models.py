"""The chat-model contract every model client implements (OpenAI-compatible, local, scripted).

Messages use the OpenAI chat-completions shape (``{"role", "content", "tool_calls"?,
"tool_call_id"?}``) because every endpoint we target speaks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


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
    """

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ChatModel(Protocol):
    """Any chat model: ``await model.complete(messages, ...) -> ChatResponse``.

    Implementations raise ``ModelError`` (see ``evalcore.runtime.errors``) with a clear
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
