"""The agent loop: a chat model plus tools, traced span by span.

One run: system instructions + the user's input -> model call -> if the model asked for tools,
run each (in order), append the results as ``role: tool`` messages and call the model again
-> until it answers without tool calls or ``max_steps`` model calls have been made.

Trace shape (OpenTelemetry GenAI span names)::

    invoke_agent <agent name>
      message system / user ...          (the opening conversation)
      chat <model name>                  (one per model call)
        message assistant
      execute_tool <tool name>           (one per tool call, in the order requested)
        message tool
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from typing import Any

from evalcore.runtime.models import (
    ChatModel,
    ChatResponse,
    ModelError,
    ToolCall,
    tool_call_arguments_error,
    tool_call_to_message,
)
from evalcore.runtime.tools import Tool, ToolResult, as_tool
from evalcore.targets import RunContext, preview
from evalcore.tracing import Tracer
from evalcore.types import Case, TargetOutput


class MaxStepsError(Exception):
    """The agent used every step on tool calls and never produced any text to answer with."""


def as_chat_model(model: ChatModel | str) -> ChatModel:
    """``model`` itself when it is a chat model; a model name built as ``EVALSITE_MODEL`` would be.

    Raises:
        ValueError: An empty name, or one that cannot be built (the message says why).
        TypeError: Neither a chat model nor a name.
    """
    if isinstance(model, str):
        name = model.strip()
        if not name:
            raise ValueError("Agent(model=''): give a model name (e.g. 'gpt-4o-mini') or a ChatModel")
        # imported here: it loads the openai SDK (~0.5 s), needed only when a name is given
        from evalcore.runtime.openai_client import model_from_settings

        try:
            return model_from_settings({**os.environ, "EVALSITE_MODEL": name})
        except ModelError as exc:
            raise ValueError(f"Agent({model!r}): {exc}") from None
    if not isinstance(model, ChatModel):
        raise TypeError(
            f"Agent(model=...) takes a chat model (an object with .name and async .complete(messages)) "
            f"or a model name, got {type(model).__name__}"
        )
    return model


class Agent:
    """An LLM agent: a chat model, tools, instructions and a step budget.

    A target of kind ``agent`` for :func:`evalcore.runner.run_eval`.

    Args:
        model: Any :class:`~evalcore.runtime.models.ChatModel`, or a model name: built at
            construction as ``EVALSITE_MODEL`` would be (:func:`~evalcore.runtime.openai_client.model_from_settings`:
            an OpenAI-compatible model at ``EVALSITE_MODEL_BASE_URL``, key from the variable
            ``EVALSITE_MODEL_API_KEY_ENV`` names, read at each call; ``scripted:...`` and
            ``local:smollm2`` too).
        tools: :class:`~evalcore.runtime.tools.Tool` objects or plain typed functions.
        instructions: The system prompt ("" for none).
        max_steps: Most model calls in one run (>= 1).
        name: The agent's name (trace span and target name).
        temperature: Sent on every model call when set.
        seed: Sent on every model call when set.
        max_tokens: Completion token cap per model call when set.

    Raises:
        ValueError: On ``max_steps < 1``, two tools with the same name, or a model name that
            cannot be built (empty, an unknown ``local:`` model, a base URL that is not http(s)).
        TypeError: When ``model`` is neither a chat model nor a name.
    """

    kind = "agent"
    self_traced = True  # opens its own invoke_agent span
    conversational = True  # plays a conversation case turn by turn, keeping ctx.session's history

    def __init__(
        self,
        model: ChatModel | str,
        tools: Sequence[Tool | Any] = (),
        instructions: str = "",
        max_steps: int = 8,
        name: str = "agent",
        *,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.model = as_chat_model(model)
        self.tools: dict[str, Tool] = {}
        for item in tools:
            declared = as_tool(item)
            if declared.name in self.tools:
                raise ValueError(f"two tools are named {declared.name!r}")
            self.tools[declared.name] = declared
        self.instructions = instructions
        self.max_steps = max_steps
        self.name = name
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens

    async def run(self, input: Any, ctx: RunContext | None = None) -> TargetOutput:
        """Run the loop on one input.

        Args:
            input: A user message (``str``), a list of chat messages (a multi-turn
                conversation), or a dict with a ``"messages"`` list. Any other JSON value
                is sent as the user message, serialised as JSON.
            ctx: The run context (its tracer records the trace). ``None`` makes a throwaway
                one, for notebooks. While a conversation case is played, ``ctx.session`` holds
                the session: its ``history`` (the earlier turns' messages, tool messages
                included) is sent before this turn's message, and this turn's messages are
                appended to it; tools may read and change ``ctx.session.state``.

        Returns:
            ``TargetOutput`` with the final text as ``output``, summed tokens (``None`` when
            the model reported none), and metadata ``tool_calls`` (``[{name, arguments}]`` in
            call order), ``steps`` (model calls made) and ``finish_reason`` (the model's, e.g.
            ``stop`` or ``length``, or ``max_steps`` when the budget ran out; then the output
            is the last text the model wrote alongside its tool calls).

        Raises:
            MaxStepsError: When the budget ran out and the model never wrote any text (the
                metadata above is still put on ``ctx.metadata``, so the run keeps it).
            ModelError: When a model call fails for good (propagated, so the runner records
                an errored case rather than a fake answer).
        """
        ctx = ctx or _adhoc_context(input)
        tracer = ctx.tracer
        state = _RunState()
        with tracer.span(
            "invoke_agent",
            self.name,
            model=self.model.name,
            tools=list(self.tools),
            max_steps=self.max_steps,
        ) as agent_span:
            try:
                messages = self._opening_messages(input)
                for message in messages:
                    _message_event(tracer, message)
                session = ctx.session
                if session is not None:  # a conversation's later turn: the earlier turns come first
                    head = 1 if messages[0].get("role") == "system" else 0
                    messages[head:head] = [dict(m) for m in session.history]
                    first_new = head + len(session.history)
                output = await self._loop(messages, ctx, state)
                if session is not None:
                    session.history.extend(messages[first_new:])
            except BaseException:
                ctx.metadata.update(state.metadata())
                raise
            agent_span.set(
                steps=state.steps,
                finish_reason=state.finish_reason,
                tokens_in=state.tokens_in,
                tokens_out=state.tokens_out,
                output_preview=preview(output),
            )
        return TargetOutput(
            output=output,
            model=state.model or self.model.name,
            tokens_in=state.tokens_in,
            tokens_out=state.tokens_out,
            metadata=state.metadata(),
        )

    async def _loop(self, messages: list[dict[str, Any]], ctx: RunContext, state: _RunState) -> str:
        schemas = [t.openai_schema() for t in self.tools.values()] or None
        last_text: str | None = None
        for _ in range(self.max_steps):
            response = await self._chat(messages, schemas, ctx.tracer, state)
            if response.content:
                last_text = response.content
            if not response.tool_calls:
                state.finish_reason = response.finish_reason or "stop"
                return response.content or ""
            for call in response.tool_calls:
                result = await self._execute(call, ctx)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content})
        state.finish_reason = "max_steps"
        if last_text is None:
            raise MaxStepsError(
                f"agent {self.name!r} used all {self.max_steps} steps on tool calls without writing an answer"
            )
        return last_text

    async def _chat(
        self,
        messages: list[dict[str, Any]],
        schemas: list[dict[str, Any]] | None,
        tracer: Tracer,
        state: _RunState,
    ) -> ChatResponse:
        # the provider (a model's optional ``provider``) is OpenTelemetry's gen_ai.provider.name when exported
        provider = {"provider": p} if (p := getattr(self.model, "provider", None)) else {}
        with tracer.span("chat", self.model.name, model=self.model.name, step=state.steps, **provider) as span:
            state.steps += 1
            response = await self.model.complete(
                messages,
                tools=schemas,
                temperature=self.temperature,
                seed=self.seed,
                max_tokens=self.max_tokens,
            )
            state.add_usage(response)
            assistant: dict[str, Any] = {"role": "assistant", "content": response.content}
            if response.tool_calls:
                assistant["tool_calls"] = [tool_call_to_message(c) for c in response.tool_calls]
            messages.append(assistant)
            _message_event(tracer, assistant)
            span.set(
                model=response.model or self.model.name,
                tokens_in=response.tokens_in,
                tokens_out=response.tokens_out,
                **_usage_details(response),
                finish_reason=response.finish_reason,
                response_preview=preview(response.content or ""),
                tool_calls=[{"name": c.name, "arguments": c.arguments} for c in response.tool_calls],
            )
        return response

    async def _execute(self, call: ToolCall, ctx: RunContext) -> ToolResult:
        tracer = ctx.tracer
        with tracer.span("execute_tool", call.name, tool_call_id=call.id, arguments=call.arguments) as span:
            result = await self._invoke(call, ctx)
            span.set(
                result_preview=preview(result.content),
                result=result.content,
                tool_error=result.error,
            )
            tracer.message("tool", role="tool", tool_call_id=call.id, tool_name=call.name, content=result.content)
        return result

    async def _invoke(self, call: ToolCall, ctx: RunContext) -> ToolResult:
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            error = f"unknown tool {call.name!r}; available tools: {known}"
            return ToolResult(content=f"Error: {error}", error=error)
        arguments_error = tool_call_arguments_error(call)
        if arguments_error is not None:
            error = f"the arguments for tool {call.name!r} could not be read: {arguments_error}"
            return ToolResult(content=f"Error: {error}. Send them as a JSON object.", error=error)
        return await tool.invoke(call.arguments, ctx)

    def _opening_messages(self, input: Any) -> list[dict[str, Any]]:
        if isinstance(input, dict) and "messages" in input:
            input = input["messages"]
        if isinstance(input, str):
            messages = [{"role": "user", "content": input}]
        elif isinstance(input, list) and input and all(isinstance(m, dict) and "role" in m for m in input):
            messages = [dict(m) for m in input]
        else:
            messages = [{"role": "user", "content": json.dumps(input, ensure_ascii=False)}]
        if self.instructions and messages[0].get("role") != "system":
            messages.insert(0, {"role": "system", "content": self.instructions})
        return messages

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, model={self.model.name!r}, tools={list(self.tools)})"


class _RunState:
    """Counters of one run (kept apart from the Agent so concurrent runs share nothing)."""

    __slots__ = ("finish_reason", "model", "steps", "tokens_in", "tokens_out", "tool_calls")

    def __init__(self) -> None:
        self.steps = 0
        self.tokens_in: int | None = None
        self.tokens_out: int | None = None
        self.model: str | None = None
        self.finish_reason: str | None = None
        self.tool_calls: list[dict[str, Any]] = []

    def add_usage(self, response: ChatResponse) -> None:
        if response.tokens_in is not None:
            self.tokens_in = (self.tokens_in or 0) + response.tokens_in
        if response.tokens_out is not None:
            self.tokens_out = (self.tokens_out or 0) + response.tokens_out
        self.model = response.model or self.model
        self.tool_calls.extend({"name": c.name, "arguments": c.arguments} for c in response.tool_calls)

    def metadata(self) -> dict[str, Any]:
        return {"tool_calls": list(self.tool_calls), "steps": self.steps, "finish_reason": self.finish_reason}


def _usage_details(response: ChatResponse) -> dict[str, Any]:
    """The span attributes :func:`evalcore.costs.case_latency` reads, for those the model reported."""
    details = {
        "tokens_cached_in": response.tokens_cached_in,
        "tokens_reasoning": response.tokens_reasoning,
        "ttft_ms": response.ttft_ms,
    }
    return {key: value for key, value in details.items() if value is not None}


def _message_event(tracer: Tracer, message: dict[str, Any]) -> None:
    """Record a chat message as a ``message`` event named after its role."""
    payload = dict(message)
    if "name" in payload:  # a chat message's optional participant name; ``name`` is the event's own
        payload["participant_name"] = payload.pop("name")
    tracer.message(str(payload.get("role", "message")), **payload)


def _adhoc_context(input: Any) -> RunContext:
    run_id = f"adhoc-{uuid.uuid4().hex[:12]}"
    return RunContext(case=Case(id=run_id, input=input), tracer=Tracer(run_id, run_id), run_id=run_id, trace_id=run_id)
