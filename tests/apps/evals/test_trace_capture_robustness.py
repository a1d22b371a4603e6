"""The capture form on bad values (inputs in ``tests/fixtures/repros/ot-04-*``): an errored trace
with no answer pre-fills an empty Expected field (never ``null``), whatever the set; NaN /
Infinity typed into the form is a field error naming them, never "set already has a case"."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from apps.core.auth import create_api_token
from apps.evals.models import EvalCase, EvalSet
from apps.evals.sets.capture import add_captured_case
from apps.traces.models import Run
from evalcore.errors import InvalidInputError

pytestmark = pytest.mark.django_db

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"


def errored_trace(client, user) -> Run:
    token = create_api_token(user=user)[1]
    body = (REPROS / "ot-04-errored-trace.json").read_bytes()
    response = client.post(
        "/api/otlp/v1/traces", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 200
    return Run.objects.get(run_id__startswith="otlp:")


def make_set(name: str, expected) -> EvalSet:
    eval_set = EvalSet.objects.create(name=name)
    EvalCase.objects.create(eval_set=eval_set, case_id="q1", input="hi", expected=expected, split="dev")
    return eval_set


def test_an_errored_trace_prefills_an_empty_expected_for_every_shape(client, member):
    run = errored_trace(client, member)
    assert run.status == "error" and run.final_answer is None
    client.force_login(member)
    url = reverse("traces:capture", args=[run.pk])
    sets = [
        make_set("text", "hello"),
        make_set("number", 3),
        make_set("bool", True),
        make_set("object", {"answer": "x", "tool_calls": []}),
    ]
    for eval_set in sets:
        form = client.get(url, {"eval_set": eval_set.pk})
        assert form.status_code == 200
        assert form.context["form"].initial["expected"] == "", eval_set.name
        assert form.context["form"].initial["input"] == '"where is my order?"'


def test_no_set_at_all_also_prefills_an_empty_expected(client, member):
    run = errored_trace(client, member)
    client.force_login(member)
    form = client.get(reverse("traces:capture", args=[run.pk]))
    assert form.status_code == 200 and form.context["form"].initial["expected"] == ""


@pytest.mark.parametrize("typed", ["NaN", '{"answer": Infinity}', "-Infinity"])
def test_nan_in_the_form_is_a_json_field_error_not_a_duplicate(client, member, typed):
    run = errored_trace(client, member)
    eval_set = make_set("numbers", 3)
    client.force_login(member)
    response = client.post(
        reverse("traces:capture", args=[run.pk]),
        {"eval_set": eval_set.pk, "case_id": "fresh", "split": "dev", "input": '"q"', "expected": typed},
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "not valid JSON" in errors["expected"][0] and "NaN / Infinity are refused" in errors["expected"][0]
    assert "already has a case" not in response.content.decode()
    assert not EvalCase.objects.filter(case_id="fresh").exists()


def test_a_nan_value_from_code_is_refused_by_field_before_saving(member):
    eval_set = make_set("numbers", 3)
    with pytest.raises(InvalidInputError, match=r"input\['x'\]: nan is not valid JSON") as caught:
        add_captured_case(
            eval_set=eval_set,
            split="dev",
            tags=[],
            case_id="fresh",
            input={"x": float("nan")},
            expected=None,
            metadata={"source": "trace"},
            user=member,
        )
    assert caught.value.field == "input"
    assert not EvalCase.objects.filter(case_id="fresh").exists()
