"""Issue 9 §2 / repro rs-07: a playground conversation and its trace are readable by their owner
and staff only, on every page and API route (the walk over every route is in test_urls.py)."""

from __future__ import annotations

import pytest
from django.apps import apps

from apps.traces.access import can_read_run, readable_runs
from apps.traces.models import Run
from tests.apps.factories import make_eval_run, make_eval_set
from tests.security.conftest import SECRET

pytestmark = pytest.mark.django_db


def test_rs07_another_member_and_a_viewer_cannot_read_a_playground_trace(
    client, private_chat, member, member2, viewer, staff
):
    session, run = private_chat
    assert run.private and run.owner == member
    for user in (member2, viewer):
        client.force_login(user)
        assert client.get(f"/playground/{session.pk}/").status_code in (403, 404)
        assert client.get(f"/traces/{run.pk}/").status_code == 404
        listing = client.get("/traces/")
        assert listing.status_code == 200 and f"/traces/{run.pk}/" not in listing.content.decode()
        assert SECRET not in listing.content.decode()
    for user in (member, staff):
        client.force_login(user)
        page = client.get(f"/traces/{run.pk}/")
        assert page.status_code == 200 and SECRET in page.content.decode()
        assert f"/traces/{run.pk}/" in client.get("/traces/").content.decode()


def test_eval_runs_stay_readable_by_every_viewer(client, viewer, private_chat):
    eval_run = make_eval_run(make_eval_set(n_cases=2), [True, False])
    result = eval_run.results.first()
    client.force_login(viewer)
    assert client.get(f"/traces/{result.run_id}/").status_code == 200
    assert client.get(f"/runs/{eval_run.id}/cases/{result.pk}/").status_code == 200
    assert len(client.get(f"/api/eval/runs/{eval_run.id}").json()["results"]["items"]) == 2


def test_the_rule(member, member2, staff, private_chat):
    _, run = private_chat
    assert can_read_run(member, run) and can_read_run(staff, run) and not can_read_run(member2, run)
    assert list(readable_runs(member2)) == [] and list(readable_runs(member)) == [run]
    run.owner = None  # its owner was deleted: staff only
    assert not can_read_run(member, run) and can_read_run(staff, run)


def test_playground_turns_stored_before_the_rule_become_private(private_chat, member):
    from importlib import import_module

    _, run = private_chat
    Run.objects.filter(pk=run.pk).update(private=False, owner=None)
    import_module("apps.agents.migrations.0003_playground_runs_private").mark_private(apps, None)
    run.refresh_from_db()
    assert run.private and run.owner == member
