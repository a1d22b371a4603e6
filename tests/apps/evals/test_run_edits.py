"""Runs get a name and notes, a pinned baseline per set and target, a sortable list, and delete
for staff with their results, reviews and own traces (issue 13 §2)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.evals.models import EvalCase, EvalResult, EvalRun, Review
from apps.evals.queries.compare import suggested_partner
from apps.evals.queries.runs import eval_run_history
from apps.evals.runs.edits import delete_eval_run, pin_baseline
from apps.evals.runs.reviews import save_review
from apps.traces.models import Event, Run
from evalcore.errors import ConflictError
from tests.apps.factories import add_trace, make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs():
    eval_set = make_eval_set(n_cases=4)
    older = make_eval_run(eval_set, [True, False, False, False], variant="v1")
    newer = make_eval_run(eval_set, [True, True, True, False], variant="v2")
    EvalRun.objects.filter(pk=newer.pk).update(started=older.started.replace(year=older.started.year + 1))
    newer.refresh_from_db()
    return older, newer


def test_members_name_annotate_and_pin_a_run_on_its_page(client, member, runs):
    older, newer = runs
    client.force_login(member)
    client.post(reverse("evals:edit_eval_run", args=[older.pk]), {"name": "baseline prompt", "notes": "before the fix"})
    client.post(reverse("evals:pin_eval_run", args=[older.pk]), {"pinned": "1"})
    page = client.get(reverse("evals:eval_run", args=[older.pk])).content.decode()
    assert "baseline prompt" in page and "before the fix" in page and 'id="pinned-badge"' in page
    older.refresh_from_db()
    assert (older.name, older.notes, older.pinned) == ("baseline prompt", "before the fix", True)
    # compare suggests the pinned baseline for a later run of the same target... even over a newer one
    third = make_eval_run(older.eval_set, [True] * 4, variant="v3")
    assert suggested_partner(third) == older
    # pinning another unpins the first: one baseline per set and target
    pin_baseline(newer)
    assert list(EvalRun.objects.filter(pinned=True).values_list("pk", flat=True)) == [newer.pk]


def test_viewers_cannot_edit_and_a_too_long_name_is_refused(client, viewer, member, runs):
    older, _ = runs
    client.force_login(viewer)
    assert client.post(reverse("evals:edit_eval_run", args=[older.pk]), {"name": "x"}).status_code == 403
    client.force_login(member)
    answer = client.post(reverse("evals:edit_eval_run", args=[older.pk]), {"name": "x" * 201}, follow=True)
    assert "Not saved: name is over 200 characters" in answer.content.decode()
    assert EvalRun.objects.get(pk=older.pk).name == ""


def test_the_run_list_sorts_by_pass_rate_and_name(client, viewer, runs):
    older, newer = runs
    EvalRun.objects.filter(pk=older.pk).update(name="a first")
    assert [r.pk for r in eval_run_history(order="-pass_rate")] == [newer.pk, older.pk]
    assert [r.pk for r in eval_run_history(order="pass_rate")] == [older.pk, newer.pk]
    assert [r.pk for r in eval_run_history(order="oldest")] == [older.pk, newer.pk]
    assert [r.pk for r in eval_run_history(order="name")] == [newer.pk, older.pk]  # "" sorts before "a first"
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_runs") + "?sort=pass_rate").content.decode()
    assert page.index(older.pk) < page.index(newer.pk)


def test_staff_delete_a_run_with_its_results_reviews_and_own_traces_after_confirming(client, staff, member, runs):
    older, newer = runs
    first = EvalResult.objects.filter(eval_run=older).select_related("run").first()
    add_trace(first.run)
    save_review(first, member, verdict="fail")
    own_traces = set(EvalResult.objects.filter(eval_run=older).values_list("run_id", flat=True))
    client.force_login(member)
    assert client.get(reverse("evals:delete_eval_run", args=[older.pk])).status_code == 403
    client.force_login(staff)
    confirm = client.get(reverse("evals:delete_eval_run", args=[older.pk])).content.decode()
    assert "its 4 results (with their reviews) and the 4 traces only it uses" in confirm
    assert EvalRun.objects.filter(pk=older.pk).exists()  # nothing deleted by asking
    client.post(reverse("evals:delete_eval_run", args=[older.pk]))
    assert not EvalRun.objects.filter(pk=older.pk).exists()
    assert not EvalResult.objects.filter(eval_run_id=older.pk).exists() and not Review.objects.exists()
    assert (
        not Run.objects.filter(pk__in=own_traces).exists() and not Event.objects.filter(run_id__in=own_traces).exists()
    )
    assert EvalResult.objects.filter(eval_run=newer).count() == 4  # the other run is untouched


def test_deleting_a_source_keeps_the_traces_its_rescore_uses(runs):
    older, _ = runs
    rescored = EvalRun.objects.create(
        eval_set=older.eval_set, target_id=older.target_id, split=older.split, status="finished", source_eval_run=older
    )
    for result in EvalResult.objects.filter(eval_run=older):
        EvalResult.objects.create(
            eval_run=rescored, case_id=result.case_id, run=result.run, passed=True, status="passed", scores=[]
        )
    deleted = delete_eval_run(older)
    assert (deleted.results, deleted.traces) == (4, 0)
    rescored.refresh_from_db()
    assert rescored.source_eval_run_id is None and EvalResult.objects.filter(eval_run=rescored).count() == 4


def test_a_running_run_cannot_be_deleted_and_the_api_says_409(client, staff, runs):
    older, _ = runs
    EvalRun.objects.filter(pk=older.pk).update(status="running")
    client.force_login(staff)
    answer = client.delete(f"/api/eval/runs/{older.pk}")
    assert answer.status_code == 409 and "wait for it to end" in answer.json()["message"]


def test_api_patch_and_delete(client, member, staff, runs):
    older, newer = runs
    client.force_login(member)
    body = client.patch(
        f"/api/eval/runs/{newer.pk}", {"name": "candidate", "pinned": True}, content_type="application/json"
    ).json()
    assert (body["name"], body["pinned"], body["notes"]) == ("candidate", True, "")
    assert client.delete(f"/api/eval/runs/{older.pk}").status_code == 403
    client.force_login(staff)
    gone = client.delete(f"/api/eval/runs/{older.pk}").json()
    assert gone == {"id": older.pk, "results": 4, "traces": 4}
    assert client.get(f"/api/eval/runs/{older.pk}").status_code == 404


def test_a_running_run_cannot_be_pinned(client, member, runs):
    older, _ = runs
    EvalRun.objects.filter(pk=older.pk).update(status="running")
    older.refresh_from_db()
    with pytest.raises(ConflictError):
        pin_baseline(older)
    client.force_login(member)
    answer = client.patch(f"/api/eval/runs/{older.pk}", {"pinned": True}, content_type="application/json")
    assert answer.status_code == 409 and "once it has ended" in answer.json()["message"]
    page = client.post(reverse("evals:pin_eval_run", args=[older.pk]), {"pinned": "1"}, follow=True)
    assert "Not pinned" in page.content.decode() and not EvalRun.objects.get(pk=older.pk).pinned
    pin_baseline(older, False)  # unpinning is always allowed


def test_a_reimport_that_only_reorders_cases_counts_no_update(tmp_path):
    from apps.evals.models import SetVersion
    from apps.evals.sets.cases import import_cases
    from evalcore.types import Case

    first = [Case(f"x{i}", f"q{i}", f"a{i}", split="dev") for i in (1, 2, 3)]
    import_cases(name="order", cases=first, content_hash="h1")
    reordered = import_cases(name="order", cases=[first[2], first[0]], content_hash="h2")
    assert (reordered.created, reordered.updated, reordered.removed, reordered.unchanged) == (0, 0, 1, 2)
    assert list(
        EvalCase.objects.filter(eval_set__name="order").order_by("position").values_list("case_id", flat=True)
    ) == ["x3", "x1"]
    latest = SetVersion.objects.filter(eval_set__name="order").order_by("-number").first()
    assert (latest.updated, latest.removed) == (0, 1)  # the CLI's counts and the version agree
