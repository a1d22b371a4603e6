"""rs3-15: review axis values that are not ASCII integers 0..5 (``--5``, ``²``, 5,000 digits,
``١``) are a 400 naming the axis, in the portal form and the API alike, never a 500 or a
silent 1; the same kind of typed number elsewhere (page ids, filters) is ASCII-only too."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.core.auth import create_api_token
from apps.core.forms import ascii_int
from apps.evals.models import EvalResult, Review
from apps.evals.views.forms import ResultFilterForm
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

BAD_AXIS_VALUES = ["--5", "\u00b2", "9" * 5000, "5.0", "-1", "\u0661", "\uff15", "6", " ", "1e0"]
"""From rs3-15 (``²`` superscript two, ``١`` Arabic-Indic one), plus a fullwidth 5 and others."""


@pytest.fixture
def result():
    eval_run = make_eval_run(make_eval_set(n_cases=1), [True], case_ids=["a"])
    return EvalResult.objects.get(eval_run=eval_run)


@pytest.mark.parametrize("value", BAD_AXIS_VALUES)
def test_the_review_form_answers_400_naming_the_axis(client, member, result, value) -> None:
    client.force_login(member)
    save = reverse("evals:save_review", args=[result.eval_run_id, result.pk])
    answer = client.post(save, {"verdict": "pass", "axis_accuracy": value}, HTTP_HX_REQUEST="true")
    if not value.strip():  # a blank axis is no score: the verdict alone is saved
        assert answer.status_code == 200
        return
    assert answer.status_code == 400
    assert "accuracy must be an integer 0..5" in answer.content.decode()
    assert not Review.objects.exists()


def test_the_review_form_takes_ascii_digits(client, member, result) -> None:
    client.force_login(member)
    save = reverse("evals:save_review", args=[result.eval_run_id, result.pk])
    answer = client.post(save, {"verdict": "pass", "axis_accuracy": " 5 ", "axis_hazard_avoidance": "0"})
    assert answer.status_code in (200, 302)
    assert Review.objects.get().axis_scores == {"accuracy": 5, "hazard_avoidance": 0}


@pytest.mark.parametrize("value", ["--5", "\u00b2", "\u0661", "5", 5.0, -1, 6, True, "9" * 5000])
def test_the_api_answers_400_naming_the_axis(client, member, result, value) -> None:
    raw = create_api_token(user=member)[1]
    answer = client.post(
        f"/api/eval/runs/{result.eval_run_id}/cases/a/reviews",
        data={"verdict": "pass", "axis_scores": {"accuracy": value}},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert answer.status_code == 400
    assert answer.json()["field"] == "axis_scores.accuracy"
    assert answer.json()["message"].startswith("accuracy must be an integer 0..5")
    assert len(answer.json()["message"]) < 200  # a 5,000-digit value is not echoed whole


def test_a_json_integer_too_long_to_read_is_a_400(client, member, result) -> None:
    raw = create_api_token(user=member)[1]
    body = '{"verdict": "pass", "axis_scores": {"accuracy": ' + "9" * 5000 + "}}"
    answer = client.post(
        f"/api/eval/runs/{result.eval_run_id}/cases/a/reviews",
        data=body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert answer.status_code == 400
    assert not Review.objects.exists()


def test_typed_numbers_are_ascii_only() -> None:
    assert ascii_int("42") == 42 and ascii_int(" 7 ") == 7
    assert ascii_int("-3", negative=True) == -3 and ascii_int("-3") is None
    for bad in ("\u0661", "\u00b2", "\uff15", "--5", "", None, "9" * 19, "1.0", "+1"):
        assert ascii_int(bad, negative=True) is None
    form = ResultFilterForm({"tokens_min": "\u0661", "score_min": "\u0660.\u0665", "latency_min_ms": "5"})
    assert not form.is_valid()
    assert set(form.errors) == {"tokens_min", "score_min"}
    assert not ResultFilterForm({"tokens_max": "9" * 4000}).is_valid()


def test_pages_reading_ids_from_the_query_refuse_other_digits(client, member, result) -> None:
    client.force_login(member)
    queue = reverse("evals:review_queue", args=[result.eval_run_id])
    for value in ("\u00b2", "9" * 5000, "\u0661"):
        assert client.get(queue, {"result": value}).status_code == 200  # the queue's first case
        assert client.get(reverse("evals:compare"), {"set": value}).status_code == 404  # no such set
        version_diff = reverse("evals:set_versions", args=[result.eval_run.eval_set_id])
        assert client.get(version_diff, {"a": value, "b": "1"}).status_code == 404
