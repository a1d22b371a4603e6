"""Issue 23 siblings: text no database stores as typed (a NUL character, which PostgreSQL refuses
and SQLite keeps; a lone surrogate, which no database encodes) typed into a page's form or query
string is a 400 naming the field on every database, never a 500 on PostgreSQL and a save on SQLite.
Views that read ``request.POST`` / ``request.GET`` directly are covered once by
``evalsite.middleware.UnstorableTextMiddleware``; the services refuse it too (the CLI's way in).
Run on PostgreSQL too: ``scripts/test-postgres.sh tests/evalsite/test_unstorable_form_text.py``."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.evals.models import EvalResult, EvalRun, Review
from apps.evals.runs.edits import edit_eval_run
from apps.evals.runs.reviews import save_review
from evalcore.errors import InvalidInputError
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

UNSTORABLE = ["a\x00b", "\x00"]


@pytest.fixture
def result():
    eval_run = make_eval_run(make_eval_set(n_cases=1), [True], case_ids=["a"])
    return EvalResult.objects.select_related("eval_run").get(eval_run=eval_run)


def _forms(result):
    run_id, set_id = result.eval_run_id, result.eval_run.eval_set_id
    return [
        (reverse("evals:save_review", args=[run_id, result.pk]), {"verdict": "pass"}, "comment"),
        (reverse("evals:save_set_review", args=[set_id, result.pk]), {"verdict": "pass"}, "comment"),
        (reverse("evals:edit_eval_run", args=[run_id]), {"notes": "n"}, "name"),
        (reverse("evals:edit_eval_run", args=[run_id]), {"name": "n"}, "notes"),
    ]


@pytest.mark.parametrize("value", UNSTORABLE)
@pytest.mark.parametrize("htmx", [False, True])
def test_a_nul_in_a_posted_field_is_a_400_naming_it(client, member, result, value, htmx) -> None:
    client.force_login(member)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    for url, data, field in _forms(result):
        answer = client.post(url, {**data, field: value}, **headers)
        assert answer.status_code == 400, (url, field)
        text = answer.content.decode()
        assert f"'{field}'" in text and "NUL character" in text, text
    assert not Review.objects.exists()
    assert EvalRun.objects.filter(pk=result.eval_run_id, name="", notes="").exists()


def test_a_nul_in_a_field_name_or_a_query_parameter_is_a_400(client, member, result) -> None:
    client.force_login(member)
    save = reverse("evals:save_review", args=[result.eval_run_id, result.pk])
    assert client.post(save, {"verdict": "pass", "x\x00": "1"}).status_code == 400
    page = client.get(reverse("evals:eval_run", args=[result.eval_run_id]), {"text": "a\x00"})
    assert page.status_code == 400
    assert "query parameter 'text'" in page.content.decode()
    assert client.get(reverse("evals:eval_runs"), {"q": "\x00"}).status_code == 400


def test_the_same_forms_save_typed_text(client, member, result) -> None:
    client.force_login(member)
    for url, data, field in _forms(result):
        assert client.post(url, {**data, field: "fine ünïcode 🙂"}).status_code in (200, 302)
    assert Review.objects.get().comment == "fine ünïcode 🙂"
    run = EvalRun.objects.get(pk=result.eval_run_id)
    assert (run.name, run.notes) == ("n", "fine ünïcode 🙂")


@pytest.mark.parametrize("value", ["a\x00b", "half \ud83d of an emoji"])
def test_the_services_refuse_it_naming_the_field(member, result, value) -> None:
    with pytest.raises(InvalidInputError) as refused:
        save_review(result, member, verdict="pass", comment=value)
    assert refused.value.field == "comment"
    for field in ("name", "notes"):
        with pytest.raises(InvalidInputError) as refused:
            edit_eval_run(result.eval_run, **{field: value})
        assert refused.value.field == field
    assert not Review.objects.exists()


def test_the_api_keeps_its_own_refusal(client, member, result) -> None:
    from apps.core.auth import create_api_token

    raw = create_api_token(user=member)[1]
    answer = client.post(
        f"/api/eval/runs/{result.eval_run_id}/cases/a/reviews",
        data={"verdict": "pass", "comment": "a\x00b"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert answer.status_code == 422
    assert "NUL" in answer.json()["message"]
