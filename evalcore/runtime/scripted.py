"""Models that answer from a script, addressable like a real one: for tests and offline demos.

:class:`ScriptedModel` replays a list of responses in order; :class:`FunctionModel` answers
every call with a function of the messages (safe to share between concurrent runs).
"""

from __future__ import annotations

import copy
import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalcore.runtime.models import ChatResponse, ModelError, ToolCall
from evalcore.tool_arguments import read_tool_arguments

ScriptItem = ChatResponse | str | dict[str, Any] | Callable[[list[dict[str, Any]]], Any]
"""One scripted answer: a ChatResponse, a text, a dict (see :func:`to_chat_response`), or a
function of the messages returning any of those (sync or async)."""


@dataclass(slots=True)
class ModelCall:
    """One call a scripted model received (deep copies, so later mutation does not leak in).

    Attributes:
        messages: The chat messages sent.
        tools: The tool declarations sent, or ``None``.
        response_format: The response format requested, or ``None``.
        temperature: Sampling temperature, or ``None``.
        seed: Sampling seed, or ``None``.
        max_tokens: Completion token cap, or ``None``.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    response_format: dict[str, Any] | None = None
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None


_call_ids = itertools.count(1)


def to_chat_response(item: ChatResponse | str | dict[str, Any], *, model: str) -> ChatResponse:
    """Normalise a scripted answer into a :class:`ChatResponse`.

    A ``str`` is a final text answer. A ``dict`` may hold ``content``, ``tool_calls`` (each
    ``{"name", "arguments"?, "id"?}``, arguments as an object or JSON text), ``tokens_in``,
    ``tokens_out``, ``finish_reason`` and ``model``.

    Raises:
        TypeError: On any other type.
    """
    if isinstance(item, ChatResponse):
        return item
    if isinstance(item, str):
        return ChatResponse(content=item, model=model, finish_reason="stop")
    if not isinstance(item, dict):
        raise TypeError(f"a scripted response is a ChatResponse, str or dict, got {type(item).__name__}")
    calls: list[ToolCall] = []
    for spec in item.get("tool_calls") or []:
        if isinstance(spec, ToolCall):
            calls.append(spec)
            continue
        arguments = read_tool_arguments(spec.get("arguments", {}))
        calls.append(
            ToolCall(
                id=str(spec.get("id") or f"call_{next(_call_ids)}"),
                name=spec["name"],
                arguments=arguments.value,
                raw_arguments=arguments.text,
            )
        )
    return ChatResponse(
        content=item.get("content"),
        tool_calls=calls,
        model=item.get("model", model),
        tokens_in=item.get("tokens_in"),
        tokens_out=item.get("tokens_out"),
        finish_reason=item.get("finish_reason", "tool_calls" if calls else "stop"),
        raw=dict(item.get("raw") or {}),
    )


class _RecordingModel:
    """Shared call recording for the scripted models."""

    name: str

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[ModelCall] = []

    def _record(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        response_format: dict[str, Any] | None,
        temperature: float | None,
        seed: int | None,
        max_tokens: int | None,
    ) -> ModelCall:
        call = ModelCall(
            messages=copy.deepcopy(messages),
            tools=copy.deepcopy(tools),
            response_format=copy.deepcopy(response_format),
            temperature=temperature,
            seed=seed,
            max_tokens=max_tokens,
        )
        self.calls.append(call)
        return call

    async def _resolve(self, item: ScriptItem, messages: list[dict[str, Any]]) -> ChatResponse:
        if callable(item) and not isinstance(item, ChatResponse):
            produced = item(copy.deepcopy(messages))
            if inspect.isawaitable(produced):
                produced = await produced
            return to_chat_response(produced, model=self.name)
        return to_chat_response(item, model=self.name)


class ScriptedModel(_RecordingModel):
    """A :class:`~evalcore.runtime.models.ChatModel` replaying scripted responses in order.

    Args:
        responses: One item per expected call (see :data:`ScriptItem`).
        name: The model name reported on responses and spans.

    Attributes:
        calls: Every call received, in order (:class:`ModelCall`).
    """

    def __init__(self, responses: Sequence[ScriptItem], name: str = "scripted") -> None:
        super().__init__(name)
        self.responses: list[ScriptItem] = list(responses)
        self._next = 0

    @property
    def remaining(self) -> int:
        """Scripted responses not used yet."""
        return len(self.responses) - self._next

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """Record the call and return the next scripted response.

        Raises:
            ModelError: When every scripted response has been used.
        """
        self._record(messages, tools, response_format, temperature, seed, max_tokens)
        if self._next >= len(self.responses):
            raise ModelError(
                f"scripted model {self.name!r} ran out of responses: call {len(self.calls)} "
                f"but only {len(self.responses)} scripted"
            )
        item = self.responses[self._next]
        self._next += 1
        return await self._resolve(item, messages)


class FunctionModel(_RecordingModel):
    """A :class:`~evalcore.runtime.models.ChatModel` answering every call with ``fn(messages)``.

    Stateless apart from :attr:`calls`, so one instance can serve concurrent runs.

    Args:
        fn: ``fn(messages) -> ChatResponse | str | dict`` (sync or async).
        name: The model name reported on responses and spans.
    """

    def __init__(
        self,
        fn: Callable[[list[dict[str, Any]]], ChatResponse | str | dict[str, Any] | Awaitable[Any]],
        name: str = "function",
    ) -> None:
        super().__init__(name)
        self.fn = fn

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """Record the call and answer with ``fn(messages)``."""
        self._record(messages, tools, response_format, temperature, seed, max_tokens)
        return await self._resolve(self.fn, messages)


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The content of the last ``user`` message ("" when there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def scripted_from_spec(spec: str) -> FunctionModel:
    """The model for ``EVALSITE_MODEL=scripted:<spec>``: ``echo`` repeats the last user message,
    any other text is answered verbatim to every call.
    """
    if spec == "echo":
        return FunctionModel(last_user_text, name="scripted:echo")
    return FunctionModel(lambda _messages: spec, name=f"scripted:{spec}")
