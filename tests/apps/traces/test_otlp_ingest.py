"""``POST /api/otlp/v1/traces``: a stock OpenTelemetry exporter sends a production agent's GenAI
spans with an API token and they become a trace (one run per trace id, target = service name);
JSON works too; a bad token, body, type or size gets OTLP's own error answer; posting again
stores nothing twice."""

from __future__ import annotations

import gzip
import json

import pytest
import requests
from django.test import override_settings
from django.urls import reverse
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from apps.core.auth import create_api_token
from apps.traces.models import Event, Run
from apps.traces.queries import span_tree
from tests.support.genai_traces import ANSWER, QUESTION, record_support_trace, support_spans

URL = "/api/otlp/v1/traces"
PROTOBUF = "application/x-protobuf"


def support_body() -> bytes:
    return encode_spans(support_spans()).SerializeToString()


def post(client, body: bytes, *, token: str | None, content_type: str = PROTOBUF, **headers):
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client.post(URL, data=body, content_type=content_type, **headers)


def status_of(response) -> status_pb2.Status:
    return status_pb2.Status.FromString(response.content)


@pytest.fixture
def token(member) -> str:
    return create_api_token(user=member, name="prod agent")[1]


@pytest.mark.django_db(transaction=True)
def test_a_stock_exporter_with_the_documented_base_url_stores_the_trace(live_server, token, member, monkeypatch):
    # what the docs tell a team to set: exporters add /v1/traces to the base endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{live_server.url}/api/otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{token}")
    exporter = OTLPSpanExporter()
    results: list[SpanExportResult] = []

    class Recording(SpanExporter):
        """The stock exporter, its answers kept."""

        def export(self, spans):
            results.append(exporter.export(spans))
            return results[-1]

    trace_id = record_support_trace(Recording())
    exporter.shutdown()
    # SimpleSpanProcessor: one request per span, children before the root
    assert results == [SpanExportResult.SUCCESS] * 4
    run = Run.objects.get()
    assert run.run_id == f"otlp:{trace_id:032x}" and run.trace_id == f"{trace_id:032x}"
    assert run.target_id == "support-bot" and run.owner == member and not run.private
    assert run.status == "ok" and run.final_answer == ANSWER
    assert run.model == "gpt-4o-mini-2024-07-18"
    assert (run.tokens_in, run.tokens_out) == (280, 23)
    assert run.step_metrics["llm_calls"] == 2 and run.step_metrics["tool_calls"] == 1
    assert run.metadata["source"] == "otlp" and run.metadata["conversation_id"] == "conv-7"
    assert run.metadata["input_messages"][-1] == {"role": "user", "content": QUESTION}
    assert run.metadata["tool_calls"] == [{"name": "get_order", "arguments": {"order_id": 42}}]
    assert run.metadata["resource"]["deployment.environment"] == "prod"
    tree = span_tree(run)
    spans = [(n.depth, n.kind, n.name) for n in tree.nodes if n.is_span]
    assert spans == [
        (0, "invoke_agent", "support-bot"),
        (1, "chat", "gpt-4o-mini-2024-07-18"),
        (1, "execute_tool", "get_order"),
        (1, "chat", "gpt-4o-mini-2024-07-18"),
    ]
    assert all(n.status == "ok" for n in tree.nodes if n.is_span)


@pytest.mark.django_db(transaction=True)
def test_no_token_or_a_bad_one_is_401_for_a_stock_exporter(live_server, token):
    for headers in ({}, {"Authorization": "Bearer esk_not-a-real-token"}, {"Authorization": f"Basic {token}"}):
        exporter = OTLPSpanExporter(endpoint=f"{live_server.url}{URL}", headers=headers, timeout=5)
        assert exporter.export(support_spans()) is SpanExportResult.FAILURE
        exporter.shutdown()
        answer = requests.post(
            f"{live_server.url}{URL}", data=support_body(), headers={"Content-Type": PROTOBUF, **headers}, timeout=10
        )
        assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("Bearer")
        status = status_pb2.Status.FromString(answer.content)
        assert status.code == 16 and "token" in status.message
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_the_json_encoding_is_accepted_and_answered_in_json(client, token):
    from tests.evalcore.test_otel import otlp_json

    response = post(client, otlp_json(support_body()), token=token, content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json() == {}
    run = Run.objects.get()
    assert run.final_answer == ANSWER and run.metadata["tool_calls"][0]["name"] == "get_order"


@pytest.mark.django_db
def test_posting_the_same_spans_again_stores_nothing_twice(client, token):
    body = support_body()
    assert post(client, body, token=token).status_code == 200
    events = list(Event.objects.values_list("seq", "type", "name", "payload"))
    response = post(client, body, token=token)
    assert response.status_code == 200
    assert ExportTraceServiceResponse.FromString(response.content) == ExportTraceServiceResponse()
    assert Run.objects.count() == 1
    assert list(Event.objects.values_list("seq", "type", "name", "payload")) == events


@pytest.mark.django_db
def test_a_failed_tool_call_is_an_error_span_in_an_ok_trace(client, token):
    assert post(client, encode_spans(support_spans(fail_tool=True)).SerializeToString(), token=token).status_code == 200
    run = Run.objects.get()
    tool = next(n for n in span_tree(run).nodes if n.kind == "execute_tool")
    assert tool.status == "error" and tool.error == {"type": "TimeoutError", "message": "orders service timed out"}
    assert run.status == "ok"


@pytest.mark.django_db
def test_malformed_bodies_are_400_with_a_clear_message(client, token):
    response = post(client, b"\xff\xff\xff", token=token)
    assert response.status_code == 400 and response["Content-Type"] == PROTOBUF
    status = status_of(response)
    assert status.code == 3 and "not a protobuf ExportTraceServiceRequest" in status.message
    response = post(
        client,
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}',
        token=token,
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["message"] == "resourceSpans[0].scopeSpans[0].spans[0].traceId: 7 is not a hex id"
    response = post(client, b"not gzip", token=token, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 400 and "not valid gzip" in status_of(response).message
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_gzip_bodies_and_partial_success(client, token):
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {"traceId": "ab" * 16, "spanId": "00" * 8, "name": "zero id"},
                            {
                                "traceId": "ab" * 16,
                                "spanId": "cd" * 8,
                                "name": "work",
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "2000001",
                            },
                        ]
                    }
                ],
            }
        ]
    }
    response = post(
        client,
        gzip.compress(json.dumps(body).encode()),
        token=token,
        content_type="application/json",
        HTTP_CONTENT_ENCODING="gzip",
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "'zero id'" in partial["errorMessage"]
    run = Run.objects.get()
    assert run.target_id == "svc" and [n.name for n in span_tree(run).nodes] == ["work"]


@pytest.mark.django_db
def test_type_size_method_and_role_are_checked(client, token, viewer):
    response = post(client, b"x", token=token, content_type="text/plain")
    assert response.status_code == 415 and "application/x-protobuf or application/json" in response.json()["message"]
    with override_settings(EVALSITE_OTLP_MAX_BYTES=100):
        response = post(client, b"\x00" * 101, token=token)
        assert response.status_code == 413 and "over 100 bytes" in status_of(response).message
        response = post(client, gzip.compress(b"\x00" * 101), token=token, HTTP_CONTENT_ENCODING="gzip")
        assert response.status_code == 413
    response = client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 405 and response["Allow"] == "POST"
    viewer_token = create_api_token(user=viewer)[1]
    response = post(client, support_body(), token=viewer_token)
    assert response.status_code == 403 and "member role" in status_of(response).message
    # the trailing-slash form is the same endpoint
    assert (
        client.post(
            URL + "/", data=support_body(), content_type=PROTOBUF, HTTP_AUTHORIZATION=f"Bearer {token}"
        ).status_code
        == 200
    )
    assert not Run.objects.filter(owner=viewer).exists()


@pytest.mark.django_db
def test_an_ingested_trace_is_listed_under_its_service_and_readable(client, token, viewer):
    post(client, support_body(), token=token)
    run = Run.objects.get()
    client.force_login(viewer)
    listing = client.get(reverse("traces:list") + "?target=support-bot")
    assert run.run_id in listing.content.decode()
    page = client.get(reverse("traces:detail", args=[run.pk])).content.decode()
    assert "sent over OTLP by service support-bot" in page and "conv-7" in page
    assert "Add as eval case" not in page  # a viewer cannot capture


@pytest.mark.django_db
def test_a_browser_session_is_no_credential_and_other_methods_are_405(client, staff, token):
    client.force_login(staff)  # a session, no token: nothing is stored
    response = client.post(URL, data=support_body(), content_type=PROTOBUF)
    assert response.status_code == 401 and not Run.objects.exists()
    for method in ("get", "put", "patch", "delete", "options"):
        response = getattr(client, method)(URL, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 405 and response["Allow"] == "POST"
        assert response.json() == {"code": 12, "message": "send spans with POST (OTLP/HTTP)"}
