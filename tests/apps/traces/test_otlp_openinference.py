"""OpenInference spans (Phoenix's instrumentations) sent to ``POST /api/otlp/v1/traces``: the
model call gets its model, tokens, messages and tool calls, the tool span its name, arguments and
result, the trace its input (the capture form's) and answer; a missing finish reason is
``unknown``, not ``stop``; spans that map to nothing are counted and named in the answer and on
the trace page (issue 23)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from apps.core.auth import create_api_token
from apps.evals.sets.trace_capture import trace_defaults
from apps.traces.models import Event, Run
from evalcore.otel.ingest import unmapped_reason
from evalcore.otel.model import OtelSpan
from evalcore.otel.openinference import messages

URL = "/api/otlp/v1/traces"
TRACE = "5b8efff798038103d269b633813fc60c"
QUESTION = "What is the weather in Paris?"
ANSWER = "It is 18 °C and sunny in Paris."


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": value}


def _span(span_id: str, name: str, parent: str | None, start: int, attributes: dict[str, Any]) -> dict[str, Any]:
    span = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + start * 1_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + (start + 5) * 1_000_000),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def openinference_export(*, extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An agent turn as openinference-instrumentation-openai records it: an AGENT root, a model
    call asking for a tool, the TOOL span, and the model call that answers."""
    root = "a000000000000001"
    spans = [
        _span(
            root,
            "weather-agent",
            None,
            0,
            {"openinference.span.kind": "AGENT", "input.value": QUESTION, "output.value": ANSWER, "session.id": "s-1"},
        ),
        _span(
            "a000000000000002",
            "ChatCompletion",
            root,
            10,
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-mini-2024-07-18",
                "llm.provider": "openai",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "You answer weather questions.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": QUESTION,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
                "llm.token_count.prompt": 52,
                "llm.token_count.completion": 17,
                "llm.token_count.total": 69,
                "llm.finish_reason": "tool_calls",
                "llm.invocation_parameters": '{"temperature": 0}',
            },
        ),
        _span(
            "a000000000000003",
            "get_weather",
            root,
            20,
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                "input.value": '{"city": "Paris"}',
                "output.value": '{"celsius": 18, "sky": "sunny"}',
            },
        ),
        _span(
            "a000000000000004",
            "ChatCompletion",
            root,
            30,
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-mini-2024-07-18",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": QUESTION,
                "llm.input_messages.1.message.role": "tool",
                "llm.input_messages.1.message.tool_call_id": "call_1",
                "llm.input_messages.1.message.content": '{"celsius": 18, "sky": "sunny"}',
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.contents.0.message_content.type": "text",
                "llm.output_messages.0.message.contents.0.message_content.text": ANSWER,
                "llm.token_count.prompt": 80,
                "llm.token_count.completion": 12,
            },
        ),
        *(extra or []),
    ]
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "weather-bot"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


@pytest.fixture
def token(member) -> str:
    return create_api_token(user=member, name="phoenix")[1]


def post(client, export: dict[str, Any], token: str):
    return client.post(
        URL, data=json.dumps(export), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


@pytest.mark.django_db
def test_an_openinference_trace_is_mapped_like_a_genai_one(client, token) -> None:
    response = post(client, openinference_export(), token)
    assert response.status_code == 200
    assert json.loads(response.content) == {}  # nothing refused, nothing unmapped
    run = Run.objects.get(run_id=f"otlp:{TRACE}")
    assert run.model == "gpt-4o-mini-2024-07-18"
    assert (run.tokens_in, run.tokens_out) == (132, 29)
    assert run.final_answer == ANSWER
    assert run.metadata["tool_calls"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert run.metadata["input_messages"] == [{"role": "user", "content": QUESTION}]
    assert run.metadata["conversation_id"] == "s-1"
    assert "unmapped_spans" not in run.metadata
    begins = {e.payload["span_id"]: e for e in Event.objects.filter(run=run, type="span_begin")}
    ends = {e.payload["span_id"]: e for e in Event.objects.filter(run=run, type="span_end")}
    first_call = begins["a000000000000002"]
    assert (first_call.payload["kind"], first_call.name) == ("chat", "gpt-4o-mini-2024-07-18")
    assert first_call.payload["input_messages"][1] == {"role": "user", "content": QUESTION}
    assert first_call.payload["provider"] == "openai"
    assert ends["a000000000000002"].payload["output_messages"][0]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert ends["a000000000000002"].payload["finish_reason"] == "tool_calls"
    assert (ends["a000000000000002"].payload["tokens_in"], ends["a000000000000002"].payload["tokens_out"]) == (52, 17)
    tool = begins["a000000000000003"]
    assert (tool.payload["kind"], tool.name, tool.payload["arguments"]) == (
        "execute_tool",
        "get_weather",
        {"city": "Paris"},
    )
    assert ends["a000000000000003"].payload["result"] == {"celsius": 18, "sky": "sunny"}
    assert begins["a000000000000001"].payload["kind"] == "invoke_agent"
    # the capture form's input is the user's question, not null
    assert trace_defaults(run, None)["input"] == QUESTION


@pytest.mark.django_db
def test_a_missing_finish_reason_is_unknown_not_stop(client, token) -> None:
    export = openinference_export()
    spans = export["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1]["attributes"] = [a for a in spans[1]["attributes"] if a["key"] != "llm.finish_reason"]
    assert post(client, export, token).status_code == 200
    assert Run.objects.get(run_id=f"otlp:{TRACE}").finish_reason == "unknown"


@pytest.mark.django_db
def test_unmapped_spans_are_counted_and_named_in_the_answer_and_on_the_trace_page(client, token, member) -> None:
    extra = [
        _span("a000000000000005", "GET /weather", "a000000000000001", 21, {"http.method": "GET"}),
        _span("a000000000000006", "mystery", "a000000000000001", 22, {"openinference.span.kind": "TELEPATHY"}),
    ]
    response = post(client, openinference_export(extra=extra), token)
    assert response.status_code == 200
    warning = json.loads(response.content)["partialSuccess"]
    assert warning.get("rejectedSpans", 0) in (0, "0")
    assert warning["errorMessage"].startswith("2 spans stored unmapped")
    assert "'GET /weather'" in warning["errorMessage"] and "'mystery'" in warning["errorMessage"]
    run = Run.objects.get(run_id=f"otlp:{TRACE}")
    assert run.metadata["unmapped_spans"]["count"] == 2
    assert run.metadata["unmapped_spans"]["names"] == ["GET /weather", "mystery"]
    client.force_login(member)
    page = client.get(reverse("traces:detail", args=[run.pk])).content.decode()
    assert 'id="unmapped-spans"' in page
    assert "2 spans could not be mapped" in page and "GET /weather" in page


def test_flattened_messages_keep_order_tool_calls_and_content_parts() -> None:
    attributes = {
        "llm.output_messages.1.message.role": "assistant",
        "llm.output_messages.1.message.content": "second",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "b",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "a",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{}",
        "llm.output_messages.10.message.role": "user",
        "llm.output_messages.10.message.contents.0.message_content.text": "ten",
    }
    found = messages(attributes, "llm.output_messages")
    assert [m["role"] for m in found] == ["assistant", "assistant", "user"]
    assert [c["function"]["name"] for c in found[0]["tool_calls"]] == ["a", "b"]
    assert (found[1]["content"], found[2]["content"]) == ("second", "ten")


def test_what_counts_as_unmapped() -> None:
    def span(**attributes: Any) -> OtelSpan:
        return OtelSpan(
            trace_id=TRACE, span_id="a000000000000009", parent_span_id=None, name="s", start_ns=1, end_ns=2,
            attributes=attributes,
        )  # fmt: skip

    assert unmapped_reason(span(**{"gen_ai.operation.name": "chat"})) is None
    assert unmapped_reason(span(**{"openinference.span.kind": "RETRIEVER"})) is None
    assert unmapped_reason(span(**{"llm.model_name": "m"})) is None
    assert unmapped_reason(span(**{"http.method": "GET"})) == "no GenAI or OpenInference attributes"
    assert "TELEPATHY" in (unmapped_reason(span(**{"openinference.span.kind": "TELEPATHY"})) or "")


@pytest.mark.django_db
def test_a_trace_without_input_says_so_on_the_capture_form(client, token, member) -> None:
    only_http = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "api"}}]},
                "scopeSpans": [{"spans": [_span("b000000000000001", "GET /", None, 0, {"http.method": "GET"})]}],
            }
        ]
    }
    assert post(client, only_http, token).status_code == 200
    run = Run.objects.get(run_id=f"otlp:{TRACE}")
    client.force_login(member)
    page = client.get(reverse("traces:capture", args=[run.pk])).content.decode()
    assert "no input was found in this source" in page
    assert "null</textarea>" not in page
    # the OpenInference trace's form holds the question
    Run.objects.all().delete()
    assert post(client, openinference_export(), token).status_code == 200
    run = Run.objects.get(run_id=f"otlp:{TRACE}")
    page = client.get(reverse("traces:capture", args=[run.pk])).content.decode()
    assert "no input was found" not in page and "What is the weather in Paris?" in page
