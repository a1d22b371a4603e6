"""OTLP spans carrying text no database can store (a lone UTF-16 surrogate, half an emoji) are
stored with U+FFFD in its place, or refused naming where, never a 500 (apps.core.storable)."""

from __future__ import annotations

import json

import pytest

from apps.core.auth import create_api_token
from apps.core.storable import REPLACEMENT as R
from apps.traces.models import Event, Run

URL = "/api/otlp/v1/traces"


def body(service: str, output_messages: str) -> bytes:
    """One chat span; ``output_messages`` is the JSON text OpenTelemetry's GenAI attribute holds."""
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "name": "chat gpt-4o",
                                "startTimeUnixNano": "1764568800000000000",
                                "endTimeUnixNano": "1764568801000000000",
                                "attributes": [
                                    {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                                    {"key": "gen_ai.output.messages", "value": {"stringValue": output_messages}},
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    return json.dumps(request).encode()


@pytest.mark.django_db
def test_a_surrogate_inside_an_attributes_json_text_is_stored_with_the_marker(client, member):
    """The attribute is valid text (its JSON holds the escape ``\\ud83d``); the messages it holds are
    read from it with the lone half in them: the ingest was a 500 (the event's size, then the
    write). Now the run, its final answer and its events are stored with U+FFFD."""
    token = create_api_token(user=member, name="agent")[1]
    messages = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "hel\ud83d"}]}])
    assert "\\ud83d" in messages
    answer = client.post(
        URL, body("bot", messages), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert answer.status_code == 200, answer.content
    run = Run.objects.get()
    assert run.final_answer == f"hel{R}"
    stored = json.dumps([e.payload for e in Event.objects.filter(run=run)], ensure_ascii=False)
    assert f"hel{R}" in stored and "\ud83d" not in stored


@pytest.mark.django_db
def test_a_surrogate_in_an_attribute_itself_is_refused_naming_where(client, member):
    token = create_api_token(user=member, name="agent")[1]
    raw = body("bot\ud83d", "[]")
    answer = client.post(URL, raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 400, answer.content
    assert "surrogate" in answer.json()["message"] and not Run.objects.exists()
