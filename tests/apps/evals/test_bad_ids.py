"""Ids too large for the database are "not found" everywhere, never a 500."""

from __future__ import annotations

import pytest

HUGE = "9" * 25


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [f"/compare/?set={HUGE}", f"/sets/{HUGE}/", f"/sets/{HUGE}/splits/", f"/traces/{HUGE}/", f"/playground/{HUGE}/"],
)
def test_pages_answer_404(client, member, path):
    client.force_login(member)
    assert client.get(path).status_code == 404, path


@pytest.mark.django_db
def test_the_compare_picker_ignores_an_unknown_set(client, member):
    """``set`` only narrows the picker's list: an unknown set lists no runs (not an error page)."""
    from tests.apps.factories import make_eval_run, make_eval_set

    run = make_eval_run(make_eval_set("known", 2), [True, False])
    client.force_login(member)
    narrowed = client.get("/compare/?set=999999")
    assert narrowed.status_code == 200
    assert run.pk not in narrowed.content.decode()
    assert run.pk in client.get("/compare/").content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", [f"/api/eval/runs?set_id={HUGE}", f"/api/eval/sets/{HUGE}/cases", f"/api/eval/compare?a={HUGE}&b=1"]
)
def test_api_answers_json_not_500(client, member, path):
    client.force_login(member)
    response = client.get(path)
    assert response.status_code in (404, 422), (path, response.content)
    assert "message" in response.json()


@pytest.mark.django_db
def test_a_member_cannot_capture_another_members_session(client, member, django_user_model):
    from apps.agents.models import Session
    from tests.apps.factories import make_eval_set

    other = django_user_model.objects.create_user("alice", password="alice-pass-123")
    session = Session.objects.create(user=other, target_id="t")
    eval_set = make_eval_set("cap", 1)
    client.force_login(member)
    response = client.post(
        "/api/eval/cases/from-session",
        {"session_id": session.pk, "set_id": eval_set.pk, "split": "dev"},
        content_type="application/json",
    )
    assert response.status_code == 404 and response.json()["field"] == "session_id"
