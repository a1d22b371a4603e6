"""Case history (issue 26): a page per case id showing every run that scored it (run name,
verdict, scores, variant, set version, date), newest first, reached from the set page, the run
page and the compare page; its API twin ``GET /api/eval/sets/{id}/cases/{case_id}/history``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from apps.traces.models import Run
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true", "HX-Target": "history"}


@pytest.fixture
def history() -> tuple[EvalSet, EvalRun, EvalRun]:
    """Set qa; run ``old`` passes c1, run ``new`` (a year later, another variant) fails it."""
    qa = make_eval_set("qa", 4)
    old = make_eval_run(qa, [True, True, False, True], variant="v1")
    assert old.started is not None
    new = make_eval_run(qa, [True, False, True, True], variant="v2", started=old.started + timedelta(days=365))
    EvalRun.objects.filter(pk=old.pk).update(name="the old prompt")
    EvalRun.objects.filter(pk=new.pk).update(name="the new prompt")
    return qa, old, new


def url(eval_set: EvalSet, case_id: str) -> str:
    return reverse("evals:case_history", args=[eval_set.pk, case_id])


def test_the_page_lists_every_run_that_scored_the_case_newest_first(
    client: Client, viewer: User, history: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    qa, old, new = history
    client.force_login(viewer)
    page = client.get(url(qa, "c1")).content.decode()
    assert page.index("the new prompt") < page.index("the old prompt")  # newest first
    table = page[page.index('id="case-history"') :]
    assert table.count("<tr data-run=") == 2
    new_row = table[table.index(f'data-run="{new.pk}"') : table.index(f'data-run="{old.pk}"')]
    assert "failed" in new_row and "exact_match" in new_row and "echo/v2" in new_row
    assert "2027-01-01 00:00 UTC" in new_row  # the one date format, zone label included
    assert "passed" in table[table.index(f'data-run="{old.pk}"') :]
    assert "2 results" in page
    # its htmx partial is the table alone
    partial = client.get(url(qa, "c1"), headers=HX).content.decode()
    assert 'id="case-history"' in partial and "<h1>" not in partial


def test_the_set_page_run_page_and_compare_page_link_to_it(
    client: Client, viewer: User, history: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    qa, old, new = history
    client.force_login(viewer)
    link = f'href="{url(qa, "c1")}"'
    assert link in client.get(reverse("evals:set", args=[qa.pk])).content.decode()
    assert link in client.get(reverse("evals:eval_run", args=[new.pk])).content.decode()
    compare = client.get(reverse("evals:compare") + f"?a={old.pk}&b={new.pk}").content.decode()
    assert link in compare
    assert "the old prompt" in compare and "the new prompt" in compare  # compare headers name the runs


def test_access_bad_ids_and_wrong_methods(
    client: Client, outsider: User, viewer: User, history: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    qa, _, _ = history
    assert client.get(url(qa, "c1")).status_code == 302  # anonymous: to the login page
    client.force_login(outsider)
    assert client.get(url(qa, "c1")).status_code == 403
    client.force_login(viewer)
    assert client.get(url(qa, "no-such-case")).status_code == 404
    assert client.get(reverse("evals:case_history", args=[99999, "c1"])).status_code == 404
    assert client.post(url(qa, "c1")).status_code == 405


def test_a_removed_case_keeps_its_history_and_odd_case_ids_work(
    client: Client, viewer: User, history: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    qa, old, _ = history
    EvalCase.objects.filter(eval_set=qa, case_id="c1").delete()
    client.force_login(viewer)
    page = client.get(url(qa, "c1")).content.decode()
    assert 'id="case-removed"' in page and page.count("<tr data-run=") == 2
    # a case id with a slash, a space and a question mark round-trips through its URL
    odd = "math/q 7?"
    EvalCase.objects.create(eval_set=qa, case_id=odd, input="x", expected="y", split="dev", position=9)
    result = EvalResult.objects.filter(eval_run=old, case_id="c2").get()
    EvalResult.objects.filter(pk=result.pk).update(case_id=odd)
    page = client.get(url(qa, odd)).content.decode()
    assert page.count("<tr data-run=") == 1 and "math/q 7?" in page


def test_a_private_trace_is_left_out_for_others(
    client: Client, viewer: User, staff: User, history: tuple[EvalSet, EvalRun, EvalRun]
) -> None:
    qa, old, _ = history
    result = EvalResult.objects.get(eval_run=old, case_id="c1")
    Run.objects.filter(pk=result.run_id).update(private=True, owner=staff)
    client.force_login(viewer)
    assert client.get(url(qa, "c1")).content.decode().count("<tr data-run=") == 1
    client.force_login(staff)
    assert client.get(url(qa, "c1")).content.decode().count("<tr data-run=") == 2


def test_the_api_twin_pages_the_same_rows(viewer: User, history: tuple[EvalSet, EvalRun, EvalRun]) -> None:
    qa, old, new = history
    client = Client()
    client.force_login(viewer)
    answer = client.get(f"/api/eval/sets/{qa.pk}/cases/c1/history?page_size=1")
    assert answer.status_code == 200
    data = answer.json()
    assert (data["total"], data["pages"], len(data["items"])) == (2, 2, 1)
    first = data["items"][0]
    assert (first["run_id"], first["run_name"], first["status"], first["variant"]) == (
        new.pk,
        "the new prompt",
        "failed",
        "v2",
    )
    assert first["scores"][0]["name"] == "exact_match" and first["set_version"] is None
    second = client.get(f"/api/eval/sets/{qa.pk}/cases/c1/history?page=2&page_size=1").json()["items"][0]
    assert (second["run_id"], second["status"]) == (old.pk, "passed")
    assert client.get(f"/api/eval/sets/{qa.pk}/cases/nope/history").status_code == 404
    assert Client().get(f"/api/eval/sets/{qa.pk}/cases/c1/history").status_code == 401
