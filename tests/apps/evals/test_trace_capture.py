"""An OTLP trace posted in becomes an eval case from its trace page ("Add as eval case"), as a
playground conversation does: input and expected pre-filled from the trace, in the set's shape."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from apps.core.auth import create_api_token
from apps.evals.models import EvalCase, EvalSet
from apps.traces.models import Run
from tests.apps.factories import make_eval_run, make_eval_set
from tests.support.genai_traces import ANSWER, QUESTION, support_spans

pytestmark = pytest.mark.django_db

URL = "/api/otlp/v1/traces"


def ingest(client, user, body: bytes | None = None, content_type: str = "application/x-protobuf") -> Run:
    """Post a trace with ``user``'s token, as a production agent would; the stored run."""
    token = create_api_token(user=user)[1]
    body = body if body is not None else encode_spans(support_spans()).SerializeToString()
    response = client.post(URL, data=body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    return Run.objects.filter(run_id__startswith="otlp:").latest("pk")


def text_set() -> EvalSet:
    eval_set = EvalSet.objects.create(name="support")
    EvalCase.objects.create(eval_set=eval_set, case_id="q1", input="hi", expected="hello", split="dev")
    return eval_set


def test_an_ingested_trace_becomes_a_case_with_its_input_and_answer(client, member):
    eval_set = text_set()
    run = ingest(client, member)
    client.force_login(member)
    page = client.get(reverse("traces:detail", args=[run.pk])).content.decode()
    capture_url = reverse("traces:capture", args=[run.pk])
    assert "Add as eval case" in page and capture_url in page

    form = client.get(capture_url, {"eval_set": eval_set.pk})
    assert form.status_code == 200
    assert form.context["form"].initial["input"] == json.dumps(QUESTION)
    assert form.context["form"].initial["expected"] == json.dumps(ANSWER)
    html = form.content.decode()
    assert "Add this trace as an eval case" in html and run.run_id in html
    assert "Save and run it" not in html  # support-bot is not an Evalsite target

    response = client.post(
        capture_url,
        {
            "eval_set": eval_set.pk,
            "case_id": "order-42",
            "split": "dev",
            "tags": "prod, orders",
            "input": json.dumps(QUESTION),
            "expected": json.dumps(ANSWER),
            "then": "save",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("evals:set", args=[eval_set.pk]) + "?q=order-42"
    case = EvalCase.objects.get(eval_set=eval_set, case_id="order-42")
    assert (case.input, case.expected, case.split, case.tags) == (QUESTION, ANSWER, "dev", ["prod", "orders"])
    assert case.position == 1 and case.has_expected
    assert case.metadata == {
        "source": "trace",
        "run_id": run.run_id,
        "trace_id": run.trace_id,
        "target_id": "support-bot",
        "run_ids": [run.run_id],
        "captured_by": "member",
        "conversation_id": "conv-7",
    }

    # re-importing the set's file keeps the captured case, as it keeps playground captures
    from apps.evals.sets.cases import import_cases
    from evalcore.types import Case

    summary = import_cases(name="support", cases=[Case(id="q1", input="hi", expected="hello")], content_hash="f")
    assert (summary.removed, summary.kept_captured) == (0, 1)
    assert EvalCase.objects.filter(eval_set=eval_set, case_id="order-42").exists()


def test_the_expected_value_takes_the_shape_of_the_sets_cases(client, member):
    eval_set = EvalSet.objects.create(name="tools")
    EvalCase.objects.create(
        eval_set=eval_set,
        case_id="t1",
        input="x",
        expected={"answer": "y", "tool_calls": [{"name": "get_order", "arguments": {"order_id": 1}}]},
        split="dev",
    )
    run = ingest(client, member)
    client.force_login(member)
    form = client.get(reverse("traces:capture", args=[run.pk]), {"eval_set": eval_set.pk})
    assert json.loads(form.context["form"].initial["expected"]) == {
        "answer": ANSWER,
        "tool_calls": [{"name": "get_order", "arguments": {"order_id": 42}}],
    }
    # a wrong shape is refused with the set's shape named, and nothing is saved
    response = client.post(
        reverse("traces:capture", args=[run.pk]),
        {"eval_set": eval_set.pk, "case_id": "o42", "split": "dev", "input": '"q"', "expected": '"just text"'},
    )
    assert response.status_code == 400 and "this set&#x27;s cases expect a JSON object" in response.content.decode()
    assert not EvalCase.objects.filter(case_id="o42").exists()


def test_a_multi_turn_trace_keeps_its_turns_without_the_system_prompt(client, member):
    text_set()
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": "be nice"}]},
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "hello, what do you need?"}]},
        {"role": "user", "parts": [{"type": "text", "content": "my invoice"}]},
    ]
    attributes = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(messages)}},
        {
            "key": "gen_ai.output.messages",
            "value": {
                "stringValue": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "Here it is."}]}]
                )
            },
        },
    ]
    span = {
        "traceId": "12" * 16,
        "spanId": "34" * 8,
        "name": "chat m",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "5",
        "attributes": attributes,
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    run = ingest(client, member, body, "application/json")
    assert run.target_id == "unknown_service" and run.final_answer == "Here it is."
    client.force_login(member)
    form = client.get(reverse("traces:capture", args=[run.pk]))
    assert json.loads(form.context["form"].initial["input"]) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello, what do you need?"},
        {"role": "user", "content": "my invoice"},
    ]


def test_a_trace_of_an_evalsite_target_can_be_saved_and_run(client, member):
    text_set()
    span = {"traceId": "56" * 16, "spanId": "78" * 8, "name": "x", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "gsm8k-replay"}}]}
    body = json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}).encode()
    run = ingest(client, member, body, "application/json")
    client.force_login(member)
    html = client.get(reverse("traces:capture", args=[run.pk])).content.decode()
    assert "Save and run it" in html and "runs the new case against gsm8k-replay" in html


def test_who_may_add_a_trace_and_which_traces(client, member, viewer):
    eval_set = text_set()
    run = ingest(client, member)
    url = reverse("traces:capture", args=[run.pk])
    client.force_login(viewer)
    assert client.get(url).status_code == 403
    assert "Add as eval case" not in client.get(reverse("traces:detail", args=[run.pk])).content.decode()
    client.force_login(member)
    # an eval case's own trace is not offered (it already is a case)
    case_run = Run.objects.get(
        run_id__endswith=":c0", pk__in=make_eval_run(make_eval_set(), [True]).results.values("run")
    )
    assert client.get(reverse("traces:capture", args=[case_run.pk])).status_code == 404
    assert "Add as eval case" not in client.get(reverse("traces:detail", args=[case_run.pk])).content.decode()
    assert client.get(reverse("traces:capture", args=[999999])).status_code == 404
    # the same case id twice is a form error
    data = {"eval_set": eval_set.pk, "case_id": "q1", "split": "dev", "input": '"x"', "expected": '"y"'}
    response = client.post(url, data)
    assert response.status_code == 400 and "already has a case" in response.content.decode()
    client.logout()
    assert client.get(url).status_code == 302  # to the login page


def test_every_capture_source_is_one_a_reimport_keeps():
    from apps.evals.sets.capture import add_captured_case

    eval_set = text_set()
    with pytest.raises(ValueError, match="PORTAL_CAPTURE_SOURCES"):
        add_captured_case(
            eval_set=eval_set,
            split="dev",
            tags=[],
            case_id="x",
            input="a",
            expected="b",
            metadata={"source": "somewhere-new"},
            user=None,
        )
    assert not EvalCase.objects.filter(case_id="x").exists()
