"""The OTLP mapping without Django: an Evalsite trace as GenAI spans, the wire both ways, and
spans from other tools read back as a trace with its input, answer, model, tokens and tools."""

from __future__ import annotations

import base64
import gzip
import json

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from evalcore.otel import semconv as sc
from evalcore.otel.export import CaseRoot, trace_spans
from evalcore.otel.ingest import Pending, order_events, span_events, trace_summary
from evalcore.otel.messages import case_input, chat_messages, genai_messages, indexed_messages
from evalcore.otel.model import OtelSpan, otel_span_id, otel_trace_id, to_ns
from evalcore.otel.otlp import JSON, PROTOBUF, OtlpError, decode_body, decode_request, export_response
from evalcore.otel.sdk import parse_headers, readable_spans, traces_endpoint
from evalcore.tracing import TraceEvent
from tests.support.genai_traces import ANSWER, QUESTION, agent_trace, support_spans


def wire(spans: list[OtelSpan]) -> bytes:
    """The spans as a stock exporter puts them on the wire (protobuf)."""
    return encode_spans(readable_spans(spans)).SerializeToString()


def otlp_json(protobuf: bytes) -> bytes:
    """The same request in OTLP's JSON encoding (ids as hex, as the spec writes them)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    data = json_format.MessageToDict(ExportTraceServiceRequest.FromString(protobuf))

    def hexify(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId"):
                    node[key] = base64.b64decode(value).hex()
                else:
                    hexify(value)
        elif isinstance(node, list):
            for item in node:
                hexify(item)

    hexify(data)
    return json.dumps(data).encode()


def ingest(spans: list[OtelSpan], run_id: str = "otlp:x") -> list[TraceEvent]:
    return order_events([p for s in spans for p in span_events(s, run_id=run_id)], run_id=run_id)


def test_an_agent_trace_becomes_genai_spans_with_parent_links_and_times():
    events, output = agent_trace()
    spans = trace_spans(events, trace_id="evrun:c1", resource={"service.name": "reader"}, root=CaseRoot(output=output))
    assert [s.name for s in spans] == [
        "invoke_agent reader",
        "chat fake-model",
        "execute_tool fetch",
        "chat fake-model",
    ]
    root, first_chat, tool_span, last_chat = spans
    assert {s.trace_id for s in spans} == {otel_trace_id("evrun:c1")}
    assert root.parent_span_id is None
    assert {s.parent_span_id for s in spans[1:]} == {root.span_id == otel_span_id("evrun:c1", "s0") and root.span_id}
    begin = {e.payload["span_id"]: e.ts for e in events if e.type == "span_begin"}
    end = {e.payload["span_id"]: e.ts for e in events if e.type == "span_end"}
    assert root.start_ns == round(begin["s0"] * 1e6) * 1000 and root.end_ns == round(end["s0"] * 1e6) * 1000
    assert first_chat.kind == "client" and tool_span.kind == "internal"

    assert first_chat.attributes[sc.OPERATION] == "chat"
    assert first_chat.attributes[sc.REQUEST_MODEL] == "fake-model" == first_chat.attributes[sc.RESPONSE_MODEL]
    assert (first_chat.attributes[sc.INPUT_TOKENS], first_chat.attributes[sc.OUTPUT_TOKENS]) == (7, 2)
    assert first_chat.attributes[sc.FINISH_REASONS] == ["tool_calls"]
    sent = json.loads(first_chat.attributes[sc.INPUT_MESSAGES])
    assert sent == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "user", "parts": [{"type": "text", "content": "doc-1"}]},
    ]
    asked = json.loads(first_chat.attributes[sc.OUTPUT_MESSAGES])
    assert asked[0]["parts"][0] == {
        "type": "tool_call",
        "id": "call_1",
        "name": "fetch",
        "arguments": {"doc_id": "doc-1"},
    }
    # the second call was sent the whole conversation, tool answer included
    roles = [m["role"] for m in json.loads(last_chat.attributes[sc.INPUT_MESSAGES])]
    assert roles == ["system", "user", "assistant", "tool"]

    assert tool_span.attributes[sc.OPERATION] == "execute_tool"
    assert tool_span.attributes[sc.TOOL_NAME] == "fetch" and tool_span.attributes[sc.TOOL_CALL_ID] == "call_1"
    assert json.loads(tool_span.attributes[sc.TOOL_ARGUMENTS]) == {"doc_id": "doc-1"}
    assert tool_span.attributes[sc.TOOL_RESULT] == "text of doc-1"

    assert root.attributes[sc.AGENT_NAME] == "reader" and root.attributes[sc.OPERATION] == "invoke_agent"
    assert (root.attributes[sc.INPUT_TOKENS], root.attributes[sc.OUTPUT_TOKENS]) == (18, 5)
    assert json.loads(root.attributes[sc.OUTPUT_MESSAGES])[0]["parts"] == [{"type": "text", "content": "done"}]
    # the point events ride along (the tool's answer message inside its span)
    assert [e.name for e in tool_span.events] == ["evalsite.message"]


def test_a_failed_span_is_an_error_with_its_type_and_an_orphan_event_rides_on_the_root():
    t = 1_800_000_000.0
    events = [
        TraceEvent("t", "t", 0, t, "span_begin", "agent", {"span_id": "a", "parent_span_id": None, "kind": "node"}),
        TraceEvent(
            "t", "t", 1, t + 0.1, "span_begin", "lookup", {"span_id": "b", "parent_span_id": "a", "kind": "node"}
        ),
        TraceEvent(
            "t",
            "t",
            2,
            t + 0.2,
            "span_end",
            "lookup",
            {
                "span_id": "b",
                "parent_span_id": "a",
                "kind": "node",
                "elapsed_ms": 100.0,
                "status": "error",
                "error": {"type": "KeyError", "message": "no such row"},
            },
        ),
        TraceEvent(
            "t",
            "t",
            3,
            t + 0.3,
            "span_end",
            "agent",
            {"span_id": "a", "parent_span_id": None, "kind": "node", "elapsed_ms": 300.0, "status": "ok"},
        ),
        TraceEvent("t", "t", 4, t + 0.4, "error", "timeout", {"parent_span_id": None, "message": "too slow"}),
    ]
    root, child = trace_spans(events, trace_id="t", root=CaseRoot(attributes={sc.CASE_ID: "c9"}))
    assert child.status == "error" and child.status_message == "no such row"
    assert child.attributes[sc.ERROR_TYPE] == "KeyError"
    assert root.status == "unset" and root.attributes[sc.CASE_ID] == "c9"
    assert [(e.name, e.attributes[sc.EXCEPTION_MESSAGE]) for e in root.events] == [("exception", "too slow")]
    assert json.loads(root.events[0].attributes[sc.EVENT_PAYLOAD]) == {"message": "too slow"}
    # back in: the same events, the orphan without a parent again
    back = ingest(trace_spans(events, trace_id="t"))
    assert [(e.type, e.name, e.payload.get("parent_span_id") is None) for e in back] == [
        (e.type, e.name, e.payload.get("parent_span_id") is None) for e in events
    ]


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_an_exported_trace_comes_back_exactly_through_the_wire(encoding):
    events, output = agent_trace()
    spans = trace_spans(events, trace_id="evrun:c1", resource={"service.name": "reader"}, root=CaseRoot(output=output))
    body = wire(spans)
    decoded = decode_request(body, PROTOBUF) if encoding == "protobuf" else decode_request(otlp_json(body), JSON)
    assert decoded.rejected == 0 and len(decoded.spans) == 4
    assert decoded.spans[0].resource["service.name"] == "reader"
    back = ingest(decoded.spans)
    ids = {
        otel_span_id("evrun:c1", e.payload["span_id"]): e.payload["span_id"] for e in events if "span_id" in e.payload
    }

    def original_ids(payload):
        out = dict(payload)
        for key in ("span_id", "parent_span_id"):
            if out.get(key) is not None:
                out[key] = ids[out[key]]
        return out

    assert [(e.seq, e.type, e.name, original_ids(e.payload)) for e in back] == [
        (e.seq, e.type, e.name, e.payload) for e in events
    ]
    assert [to_ns(e.ts) for e in back] == [to_ns(e.ts) for e in events]  # to the microsecond


def test_spans_from_the_stock_sdk_map_back_to_a_trace_and_its_summary():
    decoded = decode_request(encode_spans(support_spans()).SerializeToString(), PROTOBUF)
    events = ingest(decoded.spans)
    kinds = [(e.type, e.payload.get("kind"), e.name) for e in events if e.type.startswith("span")]
    assert kinds == [
        ("span_begin", "invoke_agent", "support-bot"),
        ("span_begin", "chat", "gpt-4o-mini-2024-07-18"),
        ("span_end", "chat", "gpt-4o-mini-2024-07-18"),
        ("span_begin", "execute_tool", "get_order"),
        ("span_end", "execute_tool", "get_order"),
        ("span_begin", "chat", "gpt-4o-mini-2024-07-18"),
        ("span_end", "chat", "gpt-4o-mini-2024-07-18"),
        ("span_end", "invoke_agent", "support-bot"),
    ]
    chat_end = next(e for e in events if e.type == "span_end" and e.payload["kind"] == "chat")
    assert (chat_end.payload["tokens_in"], chat_end.payload["tokens_out"]) == (120, 14)
    assert chat_end.payload["model"] == "gpt-4o-mini-2024-07-18" and chat_end.payload["finish_reason"] == "tool_calls"
    chat_begin = next(e for e in events if e.type == "span_begin" and e.payload["kind"] == "chat")
    assert chat_begin.payload["provider"] == "openai"
    tool_begin = next(e for e in events if e.payload.get("kind") == "execute_tool")
    assert tool_begin.payload["arguments"] == {"order_id": 42} and tool_begin.payload["tool_call_id"] == "call_9"

    summary = trace_summary(events)
    assert summary.root_name == "support-bot" and summary.output == ANSWER
    assert summary.input_messages[-1] == {"role": "user", "content": QUESTION}
    assert summary.model == "gpt-4o-mini-2024-07-18"
    assert summary.tool_calls == [{"name": "get_order", "arguments": {"order_id": 42}}]
    assert summary.conversation_id == "conv-7" and summary.error is None
    assert case_input(summary.input_messages) == QUESTION


def test_older_instrumentations_prompt_and_completion_attributes_are_read():
    span = OtelSpan(
        "ab" * 16,
        "cd" * 8,
        None,
        "openai.chat",
        1_000_000_000,
        2_000_000_000,
        attributes={
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-3.5-turbo",
            "gen_ai.usage.prompt_tokens": 30,
            "gen_ai.usage.completion_tokens": 5,
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "2+2?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "4",
            "http.route": "/ask",
        },
    )
    events = ingest([span])
    begin, end = events
    assert begin.payload["kind"] == "chat" and begin.payload["input_messages"] == [{"role": "user", "content": "2+2?"}]
    assert begin.payload["http.route"] == "/ask" and "gen_ai.prompt.0.content" not in begin.payload
    assert (end.payload["tokens_in"], end.payload["tokens_out"]) == (30, 5) and end.payload["elapsed_ms"] == 1000.0
    summary = trace_summary(events)
    assert (summary.output, summary.tokens_in, summary.model) == ("4", None, "gpt-3.5-turbo")
    assert indexed_messages(span.attributes, "gen_ai.completion") == [{"role": "assistant", "content": "4"}]
    # the JSON list form and a plain string
    assert chat_messages('[{"role": "user", "content": "hi"}]') == [{"role": "user", "content": "hi"}]
    assert chat_messages("hello") == [{"role": "user", "content": "hello"}]


def test_children_arriving_before_their_parent_are_ordered_inside_it():
    spans = decode_request(encode_spans(support_spans()).SerializeToString(), PROTOBUF).spans
    assert spans[-1].parent_span_id is None  # the stock SDK ends (and sends) the root last
    first_batch = [p for s in spans[:-1] for p in span_events(s, run_id="r")]
    numbered = order_events(first_batch, run_id="r")
    merged = order_events([Pending(e) for e in numbered] + span_events(spans[-1], run_id="r"), run_id="r")
    assert merged[0].type == "span_begin" and merged[0].payload["parent_span_id"] is None
    assert merged[-1].type == "span_end" and merged[-1].payload["parent_span_id"] is None
    assert [e.seq for e in merged] == list(range(len(merged)))


def test_genai_messages_round_trip_through_chat_messages():
    chat = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"city": "Oslo"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "assistant", "content": "Rain in Oslo."},
    ]
    parts = genai_messages(chat)
    assert parts[1]["parts"] == [{"type": "tool_call", "id": "c1", "name": "w", "arguments": {"city": "Oslo"}}]
    assert parts[2]["parts"] == [{"type": "tool_call_response", "id": "c1", "response": "rain"}]
    back = chat_messages(json.dumps(parts))
    assert back[0] == chat[0] and back[2] == chat[2] and back[3] == chat[3]
    assert json.loads(back[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert case_input(back) == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": back[1]["tool_calls"]},
        {"role": "tool", "content": "rain", "tool_call_id": "c1"},
        {"role": "assistant", "content": "Rain in Oslo."},
    ]


def test_bad_requests_are_refused_with_what_was_wrong():
    with pytest.raises(OtlpError, match="not a protobuf ExportTraceServiceRequest"):
        decode_request(b"\xff\xff\xff", PROTOBUF)
    with pytest.raises(OtlpError, match="not JSON"):
        decode_request(b"{nope", JSON)
    with pytest.raises(OtlpError, match=r"resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.traceId: 'xyz'"):
        decode_request(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}', JSON)
    with pytest.raises(OtlpError, match="resourceSpans: expected a list"):
        decode_request(b'{"resourceSpans": 3}', JSON)
    # a span with a zero span id is refused, the others kept
    body = json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {"traceId": "ab" * 16, "spanId": "00" * 8, "name": "bad"},
                                {
                                    "traceId": "ab" * 16,
                                    "spanId": "cd" * 8,
                                    "name": "good",
                                    "kind": 3,
                                    "startTimeUnixNano": "1000",
                                    "endTimeUnixNano": 2000,
                                    "unknownField": 1,
                                },
                            ]
                        }
                    ]
                }
            ]
        }
    ).encode()
    decoded = decode_request(body, JSON)
    assert decoded.rejected == 1 and "'bad'" in decoded.problems[0]
    assert [(s.name, s.kind, s.start_ns, s.end_ns) for s in decoded.spans] == [("good", "client", 1000, 2000)]
    assert json.loads(export_response(JSON, rejected=1, message="x")) == {
        "partialSuccess": {"rejectedSpans": "1", "errorMessage": "x"}
    }
    assert export_response(PROTOBUF) == b""


def test_compressed_bodies_are_inflated_within_the_limit():
    data = b"x" * 1000
    assert decode_body(gzip.compress(data), "gzip", limit=1000) == data
    with pytest.raises(OtlpError, match="more than 999 bytes") as raised:
        decode_body(gzip.compress(data), "gzip", limit=999)
    assert raised.value.status == 413
    with pytest.raises(OtlpError, match="not valid gzip"):
        decode_body(b"plain", "gzip", limit=10)
    with pytest.raises(OtlpError, match="'br' is not supported") as raised:
        decode_body(b"", "br", limit=10)
    assert raised.value.status == 415


def test_endpoint_and_headers_are_read_as_the_otel_variables_write_them():
    assert traces_endpoint("http://c:4318") == "http://c:4318/v1/traces"
    assert traces_endpoint("http://c:4318/") == "http://c:4318/v1/traces"
    assert traces_endpoint("http://s/api/otlp/v1/traces") == "http://s/api/otlp/v1/traces"
    assert parse_headers("Authorization=Bearer%20esk_1, x-team = a%2Cb") == {
        "Authorization": "Bearer esk_1",
        "x-team": "a,b",
    }
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_headers("nonsense")


def test_ids_are_stable_and_kept_when_already_otlp_ids():
    assert otel_trace_id("run:c1") == otel_trace_id("run:c1") != otel_trace_id("run:c2")
    assert len(otel_trace_id("run:c1")) == 32 and len(otel_span_id("run:c1", "s0")) == 16
    assert otel_trace_id("ab" * 16) == "ab" * 16 and otel_span_id("t", "cd" * 8) == "cd" * 8
    assert otel_trace_id("0" * 32) != "0" * 32  # an all-zero id is invalid in OTLP


def test_the_models_provider_is_named_on_chat_spans():
    import asyncio

    from evalcore.runtime.agent import Agent
    from evalcore.runtime.openai_client import OpenAIChatModel
    from evalcore.runtime.scripted import FunctionModel
    from evalcore.targets import RunContext
    from evalcore.tracing import Tracer
    from evalcore.types import Case
    from tests.support.genai_traces import fetch, reader_policy

    class OpenAIStandIn(FunctionModel):
        provider = OpenAIChatModel.provider

    tracer = Tracer("p", "p")
    ctx = RunContext(case=Case(id="p", input="doc-1"), tracer=tracer, run_id="p", trace_id="p")
    asyncio.run(Agent(OpenAIStandIn(reader_policy, name="gpt-x"), [fetch], name="r").run("doc-1", ctx))
    chats = [s for s in trace_spans(tracer.events, trace_id="p") if s.attributes[sc.SPAN_KIND] == "chat"]
    assert [(s.attributes[sc.PROVIDER], s.attributes[sc.SYSTEM]) for s in chats] == [("openai", "openai")] * 2
