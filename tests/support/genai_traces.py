"""Traces for the OpenTelemetry tests: a production agent's GenAI spans recorded with the stock
SDK (as a team's own instrumentation would send them), and an Evalsite agent's trace."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from evalcore.runtime.agent import Agent
from evalcore.runtime.scripted import FunctionModel, last_user_text
from evalcore.runtime.tools import tool
from evalcore.targets import RunContext
from evalcore.tracing import TraceEvent, Tracer
from evalcore.types import Case

QUESTION = "Where is my order 42?"
ANSWER = "Order 42 shipped on Monday."


def _messages(*items: dict[str, Any]) -> str:
    return json.dumps(list(items))


def record_support_trace(exporter: SpanExporter, *, service: str = "support-bot", fail_tool: bool = False) -> int:
    """One support-bot turn as GenAI spans (current conventions): invoke_agent > chat (asks for a
    tool) > execute_tool > chat (answers). Each span is exported as it ends (children before
    their parent, as a batch processor can split them). Returns the trace id."""
    provider = TracerProvider(resource=Resource.create({"service.name": service, "deployment.environment": "prod"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("support.agent", "1.2")
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    system = {"role": "system", "parts": [{"type": "text", "content": "You are the support bot."}]}
    call = {"type": "tool_call", "id": "call_9", "name": "get_order", "arguments": {"order_id": 42}}
    with tracer.start_as_current_span(
        "invoke_agent support-bot",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support-bot",
            "gen_ai.conversation.id": "conv-7",
            "gen_ai.input.messages": _messages(system, user),
        },
    ) as root:
        trace_id = root.get_span_context().trace_id
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.input.messages": _messages(system, user),
            },
        ) as chat:
            chat.set_attributes(
                {
                    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                    "gen_ai.usage.input_tokens": 120,
                    "gen_ai.usage.output_tokens": 14,
                    "gen_ai.response.finish_reasons": ["tool_calls"],
                    "gen_ai.output.messages": _messages(
                        {"role": "assistant", "parts": [call], "finish_reason": "tool_calls"}
                    ),
                }
            )
        with tracer.start_as_current_span(
            "execute_tool get_order",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_order",
                "gen_ai.tool.call.id": "call_9",
                "gen_ai.tool.call.arguments": json.dumps({"order_id": 42}),
            },
        ) as tool_span:
            if fail_tool:
                tool_span.set_status(Status(StatusCode.ERROR, "orders service timed out"))
                tool_span.set_attribute("error.type", "TimeoutError")
            else:
                tool_span.set_attribute("gen_ai.tool.call.result", json.dumps({"status": "shipped", "day": "Monday"}))
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            kind=SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
        ) as chat:
            chat.set_attributes(
                {
                    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                    "gen_ai.usage.input_tokens": 160,
                    "gen_ai.usage.output_tokens": 9,
                    "gen_ai.output.messages": _messages(
                        {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}
                    ),
                }
            )
        root.set_attribute(
            "gen_ai.output.messages",
            _messages({"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}),
        )
    provider.shutdown()
    return trace_id


def support_spans(**kwargs: Any) -> list[Any]:
    """:func:`record_support_trace`'s spans as the SDK's ``ReadableSpan`` (in end order)."""
    memory = InMemorySpanExporter()
    record_support_trace(memory, **kwargs)
    return list(memory.get_finished_spans())


@tool
def fetch(doc_id: str) -> str:
    """Fetch a document by id."""
    return f"text of {doc_id}"


def reader_policy(messages: list[dict[str, Any]], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
    """Ask for the document named in the question, then answer ``done``."""
    if messages[-1]["role"] == "user":
        # a fixed id: the scripted model numbers calls per process, so tests would see another order's
        call = {"id": "call_1", "name": "fetch", "arguments": {"doc_id": last_user_text(messages)}}
        return {"content": None, "tool_calls": [call], "tokens_in": 7, "tokens_out": 2}
    return {"content": "done", "tokens_in": 11, "tokens_out": 3}


def reader_agent() -> Agent:
    """An Evalsite agent (scripted model, one tool): chat -> execute_tool -> chat."""
    return Agent(FunctionModel(reader_policy, name="fake-model"), [fetch], name="reader", instructions="be brief")


def agent_trace(question: str = "doc-1", trace_id: str = "evrun:c1") -> tuple[list[TraceEvent], Any]:
    """An Evalsite agent's trace (events) and its output."""
    tracer = Tracer(trace_id, trace_id)
    ctx = RunContext(case=Case(id="c1", input=question), tracer=tracer, run_id=trace_id, trace_id=trace_id)
    output = asyncio.run(reader_agent().run(question, ctx))
    return tracer.events, output.output
