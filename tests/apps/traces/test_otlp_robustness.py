"""Hostile and sloppy OTLP requests (the inputs are in ``tests/fixtures/repros/ot-*``): NaN and
infinities are stored as text, never a 500; bodies nested past the parsers' limits are a 400;
negative token counts are dropped with a warning; a span without times does not move its trace
to 1970; the trace's finish reason is its last model turn's; a tool's result is read as JSON as
its arguments are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from apps.core.auth import create_api_token
from apps.traces.models import Event, Run
from apps.traces.queries import span_tree

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"
URL = "/api/otlp/v1/traces"
PROTOBUF = "application/x-protobuf"


@pytest.fixture
def token(member) -> str:
    return create_api_token(user=member, name="prod agent")[1]


def post(client, body: bytes, token: str, content_type: str = "application/json"):
    return client.post(URL, data=body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}")


def strict_json(run: Run) -> str:
    """Every stored value of ``run`` as strict JSON (raises on a NaN / infinity)."""
    return json.dumps([[e.payload for e in Event.objects.filter(run=run)], run.metadata], allow_nan=False)


@pytest.mark.django_db
def test_nan_and_infinities_anywhere_are_stored_as_text(client, token):
    response = post(client, (REPROS / "ot-01-nan-attributes.json").read_bytes(), token)
    assert response.status_code == 200, response.content
    run = Run.objects.get()
    chat = next(n for n in span_tree(run).nodes if n.kind == "chat")
    assert chat.attributes["gen_ai.request.temperature"] == "NaN"
    assert chat.attributes["app.score"] == "NaN"  # a bare NaN literal in the JSON body
    assert chat.attributes["app.limits"] == ["-Infinity", 0.5]
    assert run.metadata["resource"]["host.load"] == "Infinity"
    assert run.metadata["input_messages"] == [{"role": "user", "content": "hi"}]
    note = Event.objects.get(run=run, name="app.metric")
    assert note.payload["value"] == "NaN"
    assert run.final_answer == "hello"
    assert chat.attributes["app.body"] == '{"x": NaN, "y": [Infinity]}'  # text that is not JSON stays text
    strict_json(run)


@pytest.mark.django_db
def test_a_protobuf_nan_double_is_stored_as_text(client, token):
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x11" * 16, b"\x22" * 8, "work"
    span.start_time_unix_nano, span.end_time_unix_nano = 1764568800000000000, 1764568801000000000
    for key, number in (("a.nan", float("nan")), ("a.inf", float("inf")), ("a.ninf", float("-inf"))):
        attribute = span.attributes.add()
        attribute.key, attribute.value.double_value = key, number
    event = span.events.add()
    event.name, event.time_unix_nano = "measure", 1764568800500000000
    attribute = event.attributes.add()
    attribute.key, attribute.value.double_value = "x", float("nan")
    response = post(client, request.SerializeToString(), token, PROTOBUF)
    assert response.status_code == 200
    node = next(n for n in span_tree(Run.objects.get()).nodes if n.is_span)
    assert (node.attributes["a.nan"], node.attributes["a.inf"], node.attributes["a.ninf"]) == (
        "NaN",
        "Infinity",
        "-Infinity",
    )
    assert Event.objects.get(name="measure").payload["x"] == "NaN"


def _deep_json_value(levels: int) -> str:
    return '{"kvlistValue":{"values":[{"key":"k","value":' * levels + '{"stringValue":"x"}' + "}]}}" * levels


def _varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


@pytest.mark.django_db
def test_bodies_nested_past_the_limits_are_400_not_500(client, token):
    span = '{"traceId":"%s","spanId":"%s","name":"s","attributes":[{"key":"a","value":%s}]}'
    for levels in (60, 100_000):  # the protobuf parser's depth limit, and the json module's
        body = '{"resourceSpans":[{"scopeSpans":[{"spans":[%s]}]}]}' % (
            span % ("1" * 32, "2" * 16, _deep_json_value(levels))
        )
        response = post(client, body.encode(), token)
        assert response.status_code == 400, levels
        assert "nested too deeply" in response.json()["message"]
    assert len(body) > 200_000
    value = _field(1, b"x")
    for _ in range(100_000):
        value = _field(6, _field(1, _field(1, b"k") + _field(2, value)))
    span_pb = (
        _field(1, b"\x11" * 16)
        + _field(2, b"\x22" * 8)
        + _field(5, b"s")
        + _field(9, _field(1, b"a") + _field(2, value))
    )
    response = post(client, _field(1, _field(2, _field(2, span_pb))), token, PROTOBUF)
    assert response.status_code == 400
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_deep_json_text_inside_an_attribute_is_kept_as_text(client, token):
    deep = "[" * 100_000 + "]" * 100_000
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "1" * 32,
                                "spanId": "2" * 16,
                                "name": "execute_tool t",
                                "startTimeUnixNano": "1764568800000000000",
                                "attributes": [
                                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                                    {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": deep}},
                                    {"key": "gen_ai.input.messages", "value": {"stringValue": deep}},
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    response = post(client, json.dumps(body).encode(), token)
    assert response.status_code == 200, response.content
    node = next(n for n in span_tree(Run.objects.get()).nodes if n.is_span)
    assert node.attributes["arguments"] == deep


@pytest.mark.django_db
def test_negative_tokens_are_dropped_and_missing_times_do_not_move_the_trace(client, token):
    response = post(client, (REPROS / "ot-06-negative-tokens-no-times.json").read_bytes(), token)
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["errorMessage"] == (
        "span 'chat gpt-4o': gen_ai.usage.input_tokens -100 is negative: ignored"
    )
    run = Run.objects.get()
    assert run.tokens_in is None and run.tokens_out == 7
    chat = next(n for n in span_tree(run).nodes if n.kind == "chat")
    assert "tokens_in" not in chat.attributes and "gen_ai.usage.input_tokens" not in chat.attributes
    assert run.started.timestamp() == 1764568800.0  # the agent span's start, not 1970
    assert run.elapsed_ms == 3000.0
    assert min(e.ts.timestamp() for e in Event.objects.filter(run=run)) == 1764568800.0


@pytest.mark.django_db
def test_a_span_alone_without_times_joins_its_stored_trace(client, token):
    data = json.loads((REPROS / "ot-06-negative-tokens-no-times.json").read_text())
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    first, clockless = dict(data), json.loads(json.dumps(data))
    first["resourceSpans"][0]["scopeSpans"][0]["spans"] = [spans[0]]
    assert post(client, json.dumps(first).encode(), token).status_code == 200
    clockless["resourceSpans"][0]["scopeSpans"][0]["spans"] = [spans[1]]
    assert post(client, json.dumps(clockless).encode(), token).status_code == 200
    run = Run.objects.get()
    assert run.started.timestamp() == 1764568800.0
    assert min(e.ts.timestamp() for e in Event.objects.filter(run=run)) == 1764568800.0


@pytest.mark.django_db
def test_the_finish_reason_is_the_last_turns_and_tool_results_read_as_json(client, token, member):
    response = post(client, (REPROS / "ot-07-finish-reason-tool-result.json").read_bytes(), token)
    assert response.status_code == 200
    assert response.json() == json.loads(ExportTraceServiceResponse().SerializeToString() or b"{}")
    run = Run.objects.get()
    assert run.finish_reason == "stop" and run.final_answer == "4 C and rain"
    tool = next(n for n in span_tree(run).nodes if n.kind == "execute_tool")
    assert tool.attributes["arguments"] == {"city": "Oslo"}
    assert tool.attributes["result"] == {"temp_c": 4, "sky": "rain"}
    client.force_login(member)
    page = client.get(f"/traces/{run.pk}/", {"span": tool.span_id})  # the tool's detail in the viewer
    assert page.status_code == 200
    text = page.content.decode()
    assert "finish stop" in text
    assert text.count("&quot;temp_c&quot;: 4") == 1 and "\\&quot;temp_c" not in text  # not an escaped string
