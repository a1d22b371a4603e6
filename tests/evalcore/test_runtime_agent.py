"""The agent loop with a scripted model: tool round trips, step budget, traces, concurrency."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from typing import Any

import pytest

from evalcore.runner import run_eval
from evalcore.runtime.agent import Agent, MaxStepsError
from evalcore.runtime.models import ChatResponse, ModelError, ToolCall
from evalcore.runtime.scripted import FunctionModel, ScriptedModel, last_user_text
from evalcore.runtime.tools import tool
from evalcore.targets import RunContext
from evalcore.tracing import TraceEvent, Tracer
from evalcore.types import Case, CaseResult, TargetOutput


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def make_ctx(input: Any = "q") -> RunContext:
    tracer = Tracer("trace-1", "run-1")
    return RunContext(case=Case("c1", input), tracer=tracer, run_id="run-1", trace_id="trace-1")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}], "tokens_in": 10, "tokens_out": 3}


def check_trace(events: list[TraceEvent]) -> list[tuple[int, str, str]]:
    """Assert a run's events are well formed; return ``(depth, type, kind-or-name)`` per event.

    Checks: seq is 0, 1, 2, ... (so strictly increasing), one run id, every span ends after it
    begins and in LIFO order, each span's parent is the span open around it, and each point
    event's parent is the innermost open span.
    """
    assert [e.seq for e in events] == list(range(len(events)))
    assert len({e.run_id for e in events}) == 1
    stack: list[str] = []
    shape: list[tuple[int, str, str]] = []
    for event in events:
        payload = event.payload
        if event.type == "span_begin":
            assert payload["parent_span_id"] == (stack[-1] if stack else None)
            shape.append((len(stack), "begin", payload["kind"]))
            stack.append(payload["span_id"])
        elif event.type == "span_end":
            assert stack and stack[-1] == payload["span_id"], "span ended out of order"
            stack.pop()
            assert payload["parent_span_id"] == (stack[-1] if stack else None)
            shape.append((len(stack), "end", payload["kind"]))
        else:
            assert payload["parent_span_id"] == (stack[-1] if stack else None)
            shape.append((len(stack), event.type, event.name))
    assert stack == [], "a span was never closed"
    return shape


async def test_tool_call_round_trip() -> None:
    model = ScriptedModel(
        [
            call("add", a=2, b=3),
            {"content": "The sum is 5.", "tokens_in": 20, "tokens_out": 4},
        ]
    )
    agent = Agent(model, [add], instructions="You add numbers.", name="adder")
    ctx = make_ctx()
    result = await agent.run("What is 2+3?", ctx)

    assert isinstance(result, TargetOutput)
    assert result.output == "The sum is 5."
    assert (result.tokens_in, result.tokens_out) == (30, 7)
    assert result.model == "scripted"
    assert result.metadata == {
        "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}],
        "steps": 2,
        "finish_reason": "stop",
    }
    first, second = model.calls
    assert first.messages == [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": "What is 2+3?"},
    ]
    assert first.tools == [add.openai_schema()]
    assistant, tool_message = second.messages[-2:]
    call_id = assistant["tool_calls"][0]["id"]
    assert assistant["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    assert tool_message == {"role": "tool", "tool_call_id": call_id, "content": "5"}


async def test_several_steps_and_several_calls_in_one_step_run_in_order() -> None:
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"name": "shout", "arguments": {"text": "a"}},
                    {"name": "add", "arguments": {"a": 1, "b": 1}},
                ]
            },
            call("shout", text="b"),
            "done",
        ]
    )
    ctx = make_ctx()
    result = await Agent(model, [add, shout]).run("go", ctx)
    assert result.output == "done"
    assert [c["name"] for c in result.metadata["tool_calls"]] == ["shout", "add", "shout"]
    assert result.metadata["steps"] == 3
    tool_contents = [m["content"] for m in model.calls[2].messages if m["role"] == "tool"]
    assert tool_contents == ["A", "2", "B"]
    executed = [e.name for e in ctx.tracer.events if e.type == "span_begin" and e.payload["kind"] == "execute_tool"]
    assert executed == ["shout", "add", "shout"]
    # tokens: none reported on the first and last responses, 10/3 on the second
    assert (result.tokens_in, result.tokens_out) == (10, 3)


async def test_invalid_arguments_go_back_to_the_model_which_can_recover() -> None:
    model = ScriptedModel([call("add", a="two", b=3), call("add", a=2, b=3), "5"])
    result = await Agent(model, [add]).run("2+3?", make_ctx())
    assert result.output == "5"
    error_message = model.calls[1].messages[-1]
    assert error_message["role"] == "tool"
    assert error_message["content"].startswith("Error: invalid arguments for tool 'add': a: Input should be a valid")
    assert model.calls[2].messages[-1]["content"] == "5"


async def test_unknown_tool_and_malformed_arguments_are_reported_to_the_model() -> None:
    broken = ChatResponse(
        content=None,
        tool_calls=[
            ToolCall(id="c1", name="nope", arguments={}),
            ToolCall(id="c2", name="add", arguments={}, raw_arguments='{"a": 1, "b":'),
        ],
    )
    model = ScriptedModel([broken, "sorry"])
    ctx = make_ctx()
    result = await Agent(model, [add, shout]).run("x", ctx)
    assert result.output == "sorry"
    unknown, malformed = model.calls[1].messages[-2:]
    assert unknown == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Error: unknown tool 'nope'; available tools: add, shout",
    }
    assert malformed["tool_call_id"] == "c2"
    assert "arguments for tool 'add' could not be read: arguments are not valid JSON" in malformed["content"]
    # the raw text is what goes back in the assistant message, so the model sees what it sent
    assert model.calls[1].messages[-3]["tool_calls"][1]["function"]["arguments"] == '{"a": 1, "b":'
    ends = [e for e in ctx.tracer.events if e.type == "span_end" and e.payload["kind"] == "execute_tool"]
    assert [e.payload["tool_error"] is not None for e in ends] == [True, True]


async def test_max_steps_returns_the_last_text_with_finish_reason_max_steps() -> None:
    model = ScriptedModel(
        [
            {"content": "Let me add.", "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
            call("add", a=3, b=4),
        ]
    )
    result = await Agent(model, [add], max_steps=2).run("x", make_ctx())
    assert result.output == "Let me add."
    assert result.metadata["finish_reason"] == "max_steps"
    assert result.metadata["steps"] == 2
    assert len(result.metadata["tool_calls"]) == 2


async def test_max_steps_without_any_text_raises_and_keeps_the_metadata() -> None:
    model = ScriptedModel([call("add", a=1, b=1)] * 3)
    ctx = make_ctx()
    with pytest.raises(MaxStepsError, match="used all 3 steps"):
        await Agent(model, [add], max_steps=3, name="looper").run("x", ctx)
    assert ctx.metadata["finish_reason"] == "max_steps"
    assert ctx.metadata["steps"] == 3
    assert model.remaining == 0


async def test_multi_turn_inputs() -> None:
    conversation = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "What is my name?"},
    ]
    model = ScriptedModel(["Ada.", "Ada.", "Ada."])
    agent = Agent(model, instructions="Be brief.")
    await agent.run(conversation, make_ctx())
    await agent.run({"messages": [{"role": "system", "content": "Own prompt."}, *conversation]}, make_ctx())
    await agent.run({"question": "q?"}, make_ctx())
    assert model.calls[0].messages == [{"role": "system", "content": "Be brief."}, *conversation]
    assert model.calls[0].tools is None
    assert model.calls[1].messages[0] == {"role": "system", "content": "Own prompt."}
    assert [m["role"] for m in model.calls[1].messages].count("system") == 1
    assert model.calls[2].messages[-1] == {"role": "user", "content": '{"question": "q?"}'}
    assert conversation[-1] == {"role": "user", "content": "What is my name?"}  # input not mutated


async def test_sampling_options_reach_the_model() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model, temperature=0.0, seed=7, max_tokens=64).run("x", make_ctx())
    assert (model.calls[0].temperature, model.calls[0].seed, model.calls[0].max_tokens) == (0.0, 7, 64)


async def test_scripted_model_running_out_is_a_clear_error() -> None:
    model = ScriptedModel([call("add", a=1, b=1)])
    ctx = make_ctx()
    with pytest.raises(ModelError, match="ran out of responses: call 2 but only 1 scripted"):
        await Agent(model, [add]).run("x", ctx)
    chat_ends = [e for e in ctx.tracer.events if e.type == "span_end" and e.payload["kind"] == "chat"]
    assert [e.payload["status"] for e in chat_ends] == ["ok", "error"]
    assert ctx.metadata["steps"] == 2
    check_trace(ctx.tracer.events)


async def test_trace_nesting_ordering_and_payloads() -> None:
    big = "x" * 10_000

    @tool
    def fetch(doc_id: str) -> str:
        """Fetch a document."""
        return big

    model = ScriptedModel([call("fetch", doc_id="d1"), {"content": "summary", "tokens_in": 5, "tokens_out": 1}])
    ctx = make_ctx()
    await Agent(model, [fetch], instructions="sys", name="reader").run("read d1", ctx)
    events = ctx.tracer.events
    assert check_trace(events) == [
        (0, "begin", "invoke_agent"),
        (1, "message", "system"),
        (1, "message", "user"),
        (1, "begin", "chat"),
        (2, "message", "assistant"),
        (1, "end", "chat"),
        (1, "begin", "execute_tool"),
        (2, "message", "tool"),
        (1, "end", "execute_tool"),
        (1, "begin", "chat"),
        (2, "message", "assistant"),
        (1, "end", "chat"),
        (0, "end", "invoke_agent"),
    ]
    agent_begin = events[0]
    assert agent_begin.name == "reader"
    assert agent_begin.payload["tools"] == ["fetch"]
    chat_end = events[5]
    assert chat_end.payload["tokens_in"] == 10 and chat_end.payload["finish_reason"] == "tool_calls"
    assert chat_end.payload["tool_calls"] == [{"name": "fetch", "arguments": {"doc_id": "d1"}}]
    tool_begin, tool_end = events[6], events[8]
    assert tool_begin.payload["arguments"] == {"doc_id": "d1"}
    assert tool_end.payload["result"] == big  # kept whole
    assert len(tool_end.payload["result_preview"]) <= 200
    assert events[7].payload["content"] == big
    final_chat_end = events[11]
    assert final_chat_end.payload["response_preview"] == "summary"
    agent_end = events[-1]
    assert (agent_end.payload["steps"], agent_end.payload["tokens_in"], agent_end.payload["tokens_out"]) == (2, 15, 4)


class _CollectingSink:
    def __init__(self) -> None:
        self.events: dict[str, list[TraceEvent]] = defaultdict(list)
        self.results: list[CaseResult] = []

    def on_event(self, event: TraceEvent) -> None:
        self.events[event.run_id].append(event)

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)

    def flush(self) -> None:
        pass


async def test_concurrent_runs_in_run_eval_keep_their_traces_apart() -> None:
    rng = random.Random(3)

    @tool
    async def double(n: int) -> int:
        """Double a number, slowly."""
        await asyncio.sleep(rng.random() * 0.01)  # interleave the concurrent runs
        return 2 * n

    def policy(messages: list[dict[str, Any]]) -> dict[str, Any]:
        tool_results = [m for m in messages if m["role"] == "tool"]
        n = int(last_user_text(messages))
        if len(tool_results) < 2:
            return call("double", n=n + len(tool_results))
        return {"content": f"{n}:{tool_results[0]['content']},{tool_results[1]['content']}", "tokens_in": 1}

    agent = Agent(FunctionModel(policy), [double], name="doubler")
    cases = [Case(f"c{i}", str(i), expected=f"{i}:{2 * i},{2 * (i + 1)}") for i in range(20)]
    sink = _CollectingSink()
    report = await run_eval(cases, agent, ["exact_match"], concurrency=8, sink=sink)

    assert (report.n, report.passed, report.errored) == (20, 20, 0)
    assert report.tokens_in == 20 * 21
    assert len(sink.results) == 20
    assert all(r.passed for r in sink.results), [(r.case_id, r.run.output, r.run.error) for r in sink.results]
    assert len(sink.events) == 20
    expected_shape = [
        (0, "begin", "invoke_agent"),  # the agent's own span (the runner adds none around it)
        (1, "message", "user"),
        *[(1, "begin", "chat"), (2, "message", "assistant"), (1, "end", "chat")],
        *[(1, "begin", "execute_tool"), (2, "message", "tool"), (1, "end", "execute_tool")],
        *[(1, "begin", "chat"), (2, "message", "assistant"), (1, "end", "chat")],
        *[(1, "begin", "execute_tool"), (2, "message", "tool"), (1, "end", "execute_tool")],
        *[(1, "begin", "chat"), (2, "message", "assistant"), (1, "end", "chat")],
        (0, "end", "invoke_agent"),
    ]
    for result in sink.results:
        events = sink.events[result.run.run_id]
        assert check_trace(events) == expected_shape
        i = int(result.case_id[1:])
        tool_results = [e.payload["result"] for e in events if e.type == "span_end" and e.name == "double"]
        assert tool_results == [str(2 * i), str(2 * (i + 1))]  # no cross-talk between cases
        assert result.run.metadata["steps"] == 3
        assert result.run.metadata["tool_calls"] == [
            {"name": "double", "arguments": {"n": i}},
            {"name": "double", "arguments": {"n": i + 1}},
        ]
        assert result.run.tokens_in == 21


async def test_a_named_chat_message_is_traced_without_clashing_with_the_event_name() -> None:
    model = ScriptedModel(["hi Bo"])
    ctx = make_ctx()
    await Agent(model).run([{"role": "user", "name": "bo", "content": "hi"}], ctx)
    user_event = next(e for e in ctx.tracer.events if e.type == "message")
    assert (user_event.name, user_event.payload["participant_name"]) == ("user", "bo")
    assert model.calls[0].messages == [{"role": "user", "name": "bo", "content": "hi"}]


def test_a_model_name_builds_the_configured_model_at_construction(monkeypatch):
    """`Agent("model-name")` failed every case with AttributeError: 'str' object has no attribute 'name'."""
    from evalcore.runtime.openai_client import OpenAIChatModel

    monkeypatch.setenv("EVALSITE_MODEL_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("EVALSITE_MODEL_API_KEY_ENV", "MY_KEY")
    agent = Agent("qwen2.5-7b", tools=[add])
    assert isinstance(agent.model, OpenAIChatModel) and agent.model.name == "qwen2.5-7b"
    assert (agent.model.endpoint, agent.model.api_key_env) == ("http://127.0.0.1:9/v1", "MY_KEY")
    assert Agent("scripted:echo").model.name.startswith("scripted")


@pytest.mark.parametrize(
    ("model", "error", "words"),
    [
        ("", ValueError, "give a model name"),
        ("local:gpt5", ValueError, "Agent('local:gpt5'): unknown local model 'gpt5'"),
        (
            42,
            TypeError,
            "takes a chat model (an object with .name and async .complete(messages)) or a model name, got int",
        ),
    ],
)
def test_what_is_not_a_model_is_refused_at_construction_with_a_message(model, error, words):
    with pytest.raises(error) as caught:
        Agent(model)
    assert words in str(caught.value)
