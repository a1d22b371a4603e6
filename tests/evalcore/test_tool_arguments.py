"""A tool call's arguments are read one way (evalcore.tool_arguments) by the OpenAI-compatible
client, the scripted model, the agent's check and the tool-call scorers."""

from __future__ import annotations

from typing import Any

import pytest

from evalcore.runtime.models import ToolCall, chat_response_from_openai, tool_call_arguments_error
from evalcore.runtime.scripted import to_chat_response
from evalcore.scorers.calls import parse_actual_calls
from evalcore.tool_arguments import ToolArguments, read_tool_arguments

CASES: list[tuple[Any, ToolArguments]] = [
    (None, ToolArguments({}, "")),
    ("", ToolArguments({}, "")),
    ("  ", ToolArguments({}, "  ")),
    ('{"city": "Paris"}', ToolArguments({"city": "Paris"}, '{"city": "Paris"}')),
    ({"city": "Zürich"}, ToolArguments({"city": "Zürich"}, '{"city": "Zürich"}')),
    ("[1, 2]", ToolArguments({}, "[1, 2]", "arguments must be a JSON object, got list")),
    ([1, 2], ToolArguments({}, "[1, 2]", "arguments must be a JSON object, got list")),
    ('{"x": NaN}', ToolArguments({}, '{"x": NaN}', "arguments are not valid JSON (NaN is not valid JSON)")),
    ('{"x": 1, "x": 2}', ToolArguments({}, '{"x": 1, "x": 2}', "arguments are not valid JSON (duplicate key 'x')")),
]


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_arguments_read_the_same_whatever_their_form(raw: Any, expected: ToolArguments) -> None:
    assert read_tool_arguments(raw) == expected


def test_unreadable_text_names_where_it_broke() -> None:
    got = read_tool_arguments('{"city": ')
    assert got.value == {} and got.error is not None
    assert got.error.startswith("arguments are not valid JSON (Expecting value at line 1")


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_the_client_the_scripted_model_the_agent_and_the_scorers_agree(raw: Any, expected: ToolArguments) -> None:
    function: dict[str, Any] = {"name": "lookup"}
    if raw is not None:
        function["arguments"] = raw
    body = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [{"function": function}]}}]}
    from_client = chat_response_from_openai(body).tool_calls[0]
    from_script = to_chat_response({"tool_calls": [{"name": "lookup", "arguments": raw}]}, model="m").tool_calls[0]
    for call in (from_client, from_script):
        assert (call.arguments, call.raw_arguments) == (expected.value, expected.text)
        assert tool_call_arguments_error(call) == expected.error
    [scored] = parse_actual_calls([{"name": "lookup", "arguments": raw}])
    assert scored.arguments == (None if expected.error else expected.value)


def test_an_agent_call_with_arguments_is_fine_without_rereading() -> None:
    assert tool_call_arguments_error(ToolCall("c1", "lookup", {"city": "Paris"}, "not json")) is None
