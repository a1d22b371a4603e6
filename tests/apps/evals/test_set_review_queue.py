"""A set's review queue across its runs (issue 13 §1): one queue of (run, case) results over the
latest run of each target and variant (or every run, or one chosen run), in the run queue's order
of need, with its filters, assignment, progress, save-before-moving-on, and exports."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.evals.models import EvalResult, Review
from apps.evals.queries import set_queue
from apps.evals.queries.review_queue import ReviewQueue
from apps.evals.queries.set_queue import set_queue_runs
from apps.evals.runs.reviews import save_review
from evalcore.errors import NotFoundError
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def runs():
    """Three finished runs of one set: echo/v1 twice (the older one superseded), echo/v2 once."""
    eval_set = make_eval_set("qa", n_cases=3)
    old = make_eval_run(eval_set, [False, False, False], variant="v1", started=T0)
    new = make_eval_run(eval_set, [True, False, "errored"], variant="v1", started=T0 + timedelta(hours=1))
    v2 = make_eval_run(eval_set, [True, True, False], variant="v2", started=T0 + timedelta(hours=2))
    return {"set": eval_set, "old": old, "new": new, "v2": v2}


def result(run, case_id: str) -> EvalResult:
    return EvalResult.objects.get(eval_run=run, case_id=case_id)


def queue_url(eval_set, **query) -> str:
    base = reverse("evals:set_review_queue", args=[eval_set.pk])
    return base + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_latest_keeps_the_newest_run_of_each_target_and_variant(runs):
    latest = set_queue_runs(runs["set"], None)
    assert latest.choice == "latest" and [r.pk for r in latest.runs] == [runs["v2"].pk, runs["new"].pk]
    every = set_queue_runs(runs["set"], "all")
    assert [r.pk for r in every.runs] == [runs["v2"].pk, runs["new"].pk, runs["old"].pk] and not every.capped
    one = set_queue_runs(runs["set"], runs["old"].pk)
    assert [r.pk for r in one.runs] == [runs["old"].pk] and one.n_runs == 3
    with pytest.raises(NotFoundError) as caught:
        set_queue_runs(runs["set"], "0123456789abcdef")
    assert caught.value.field == "runs"
    other = make_eval_run(make_eval_set("other", 1), [True])
    with pytest.raises(NotFoundError):
        set_queue_runs(runs["set"], other.pk)  # a run of another set is not one of this set's


def test_all_keeps_only_the_newest_runs_past_the_cap(runs, monkeypatch):
    monkeypatch.setattr(set_queue, "MAX_SET_QUEUE_RUNS", 2)
    capped = set_queue_runs(runs["set"], "all")
    assert capped.capped and [r.pk for r in capped.runs] == [runs["v2"].pk, runs["new"].pk]


def test_latest_and_all_keep_only_the_newest_runs_past_the_results_cap(client, member, runs, monkeypatch):
    monkeypatch.setattr(set_queue, "MAX_SET_QUEUE_RESULTS", 4)
    capped = set_queue_runs(runs["set"], "latest")
    assert capped.capped and [r.pk for r in capped.runs] == [runs["v2"].pk]
    monkeypatch.setattr(set_queue, "MAX_SET_QUEUE_RESULTS", 1)  # one run is kept whatever its size
    assert [r.pk for r in set_queue_runs(runs["set"], "all").runs] == [runs["v2"].pk]
    client.force_login(member)
    page = client.get(queue_url(runs["set"], runs="all")).content.decode()
    note = page.split("queue-runs-note", 1)[1][:300]
    assert "1 run of 3 in this queue (only the newest: at most 50 runs and 1 results;" in note, note


def test_a_one_case_rerun_does_not_supersede_the_full_run(runs):
    rerun = make_eval_run(runs["set"], [True], case_ids=["c1"], variant="v2", started=T0 + timedelta(hours=5))
    rerun.config = {"case_ids": ["c1"]}
    rerun.save(update_fields=["config"])
    assert [r.pk for r in set_queue_runs(runs["set"], "latest").runs] == [runs["v2"].pk, runs["new"].pk]
    assert rerun.pk in [r.pk for r in set_queue_runs(runs["set"], "all").runs]


def test_a_set_without_runs_has_an_empty_queue(client, member):
    eval_set = make_eval_set("fresh", 2)
    client.force_login(member)
    page = client.get(queue_url(eval_set)).content.decode()
    assert "0 / 0 reviewed" in page and "Nothing left in this queue" in page and "0 runs of 0" in page


def test_live_runs_stay_out_of_latest_and_all(runs):
    live = make_eval_run(runs["set"], [True] * 3, variant="v3", status="running", started=T0 + timedelta(hours=3))
    assert live.pk not in [r.pk for r in set_queue_runs(runs["set"], "all").runs]
    assert [r.pk for r in set_queue_runs(runs["set"], live.pk).runs] == [live.pk]  # chosen: any run


def test_the_merged_order_puts_need_first_and_a_case_s_runs_together(runs):
    queue = ReviewQueue(set_queue_runs(runs["set"], "latest").runs)
    order = [(i.case_id, i.eval_run_id, i.reason) for i in queue.order()]
    v2, new = runs["v2"].pk, runs["new"].pk
    assert order == [
        ("c2", new, "errored"),
        ("c1", new, "failed"),
        ("c2", v2, "failed"),
        ("c0", v2, ""),
        ("c0", new, ""),
        ("c1", v2, ""),
    ]
    assert [i.case_id for i in queue.filtered(None, "failed")] == ["c2", "c1", "c2"]


def test_the_page_shows_the_first_case_with_its_run_and_progress_over_the_runs(client, member, runs):
    client.force_login(member)
    page = client.get(queue_url(runs["set"])).content.decode()
    assert "Review queue across runs" in page and "0 / 6 reviewed" in page and "6 cases in this queue" in page
    first = result(runs["new"], "c2")
    assert f'data-result="{first.pk}"' in page and 'id="result-run"' in page
    assert reverse("evals:eval_run", args=[runs["new"].pk]) in page
    assert 'id="review-form"' in page and "review.js" in page
    assert f'<option value="{runs["old"].pk}"' in page  # the picker offers every run
    assert (
        f"/api/eval/sets/{runs['set'].pk}/review-queue/export?format=csv&amp;filter=unreviewed&amp;runs=latest" in page
    )
    every = client.get(queue_url(runs["set"], runs="all")).content.decode()
    assert "0 / 9 reviewed" in every and "3 runs of 3 in this queue" in every
    chosen = client.get(queue_url(runs["set"], runs=runs["old"].pk)).content.decode()
    assert "0 / 3 reviewed" in chosen and f'data-result="{result(runs["old"], "c0").pk}"' in chosen


def test_the_htmx_panel_is_the_panel_alone(client, member, runs):
    client.force_login(member)
    second = result(runs["new"], "c1")
    answer = client.get(
        queue_url(runs["set"], result=second.pk), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="review-panel"
    ).content.decode()
    assert answer.lstrip().startswith('<section id="review-panel"') and "<h1>" not in answer
    assert f'data-result="{second.pk}"' in answer and "case 2 of 6" in answer


def test_saving_moves_on_only_after_the_review_is_stored_and_keeps_the_runs(client, member, runs):
    client.force_login(member)
    first, second = result(runs["new"], "c2"), result(runs["new"], "c1")
    save = reverse("evals:save_set_review", args=[runs["set"].pk, first.pk]) + "?filter=unreviewed&runs=latest&walk=w1"
    answer = client.post(save, {"verdict": "fail", "comment": "crashed", "go": "next"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    body = answer.content.decode()
    assert "Saved your review of c2 (fail)" in body and "1 / 6 reviewed" in body
    assert f'data-result="{second.pk}"' in body
    assert answer["HX-Push-Url"] == queue_url(
        runs["set"], filter="unreviewed", runs="latest", walk="w1", result=second.pk
    )
    assert (Review.objects.get(result=first).verdict, Review.objects.get(result=first).comment) == ("fail", "crashed")
    # the same case of another run is another result: still unreviewed
    assert not Review.objects.filter(result=result(runs["v2"], "c2")).exists()


def test_a_result_outside_the_chosen_runs_is_not_found(client, member, runs):
    client.force_login(member)
    old = result(runs["old"], "c0")
    assert client.get(queue_url(runs["set"], result=old.pk)).status_code == 404  # latest: old is superseded
    refused = client.post(reverse("evals:save_set_review", args=[runs["set"].pk, old.pk]), {"verdict": "pass"})
    assert refused.status_code == 404 and not Review.objects.exists()
    assert client.get(queue_url(runs["set"], result=old.pk, runs="all")).status_code == 200
    unknown = client.get(queue_url(runs["set"], runs="feedfacefeedface"))
    assert unknown.status_code == 404
    assert "has no eval run &#x27;feedfacefeedface&#x27;" in unknown.content.decode()  # the page says which value
    assert client.get(reverse("evals:set_review_queue", args=[999999])).status_code == 404


def test_reviewed_results_leave_the_unreviewed_queue_and_the_reviewed_filter_gathers_them(client, member, runs):
    client.force_login(member)
    for r in EvalResult.objects.filter(eval_run=runs["v2"]):
        save_review(r, member, verdict="pass")
    page = client.get(queue_url(runs["set"])).content.decode()
    assert "3 / 6 reviewed" in page and "3 cases in this queue" in page
    reviewed = client.get(queue_url(runs["set"], filter="reviewed")).content.decode()
    assert "3 cases in this queue" in reviewed


def test_viewers_read_the_set_queue_without_a_form_and_cannot_post(client, viewer, runs):
    client.force_login(viewer)
    page = client.get(queue_url(runs["set"])).content.decode()
    assert 'id="review-form"' not in page and "Viewers read reviews" in page and 'id="assign-form"' not in page
    first = result(runs["new"], "c2")
    assert (
        client.post(reverse("evals:save_set_review", args=[runs["set"].pk, first.pk]), {"verdict": "fail"}).status_code
        == 403
    )
    assert (
        client.post(reverse("evals:assign_set_reviews", args=[runs["set"].pk]), {"assignees": ["x"]}).status_code == 403
    )
    client.logout()
    assert client.get(queue_url(runs["set"])).status_code == 302


def test_a_member_assigns_the_set_queue_across_runs(client, member, runs):
    client.force_login(member)
    answer = client.post(
        reverse("evals:assign_set_reviews", args=[runs["set"].pk]),
        {"filter": "failed", "runs": "latest", "assignees": ["member"]},
        follow=True,
    )
    assert "Assigned 3 cases of this queue to member." in answer.content.decode()
    mine = client.get(queue_url(runs["set"], filter="assigned")).content.decode()
    assert "3 cases in this queue" in mine and "assigned to member" in mine


def test_the_set_page_links_the_set_queue(client, member, runs):
    client.force_login(member)
    block = client.get(reverse("evals:set_reviews", args=[runs["set"].pk])).content.decode()
    assert reverse("evals:set_review_queue", args=[runs["set"].pk]) in block


def streamed(response) -> bytes:
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content)


def test_the_set_queue_exports_in_queue_order_with_each_row_s_run(client, member, runs):
    save_review(result(runs["v2"], "c0"), member, verdict="pass", comment="fine")
    client.force_login(member)
    base = f"/api/eval/sets/{runs['set'].pk}/review-queue/export"
    rows = [json.loads(line) for line in streamed(client.get(base)).decode().splitlines()]
    assert [(r["id"], r["evalsite"]["eval_run"], r["evalsite"]["position"]) for r in rows] == [
        (i.case_id, i.eval_run_id, n) for n, i in enumerate(ReviewQueue([runs["v2"], runs["new"]]).order(), 1)
    ]
    assert rows[3]["evalsite"]["reviews"][0]["comment"] == "fine"
    reviewed = streamed(client.get(f"{base}?format=csv&filter=reviewed&runs=all")).decode()
    assert [(r["id"], r["evalsite.eval_run"]) for r in csv.DictReader(io.StringIO(reviewed))] == [("c0", runs["v2"].pk)]
    every = streamed(client.get(f"{base}?runs=all")).decode().splitlines()
    assert len(every) == 9
    assert client.get(f"{base}?runs=nope").status_code == 404
    assert client.get(f"{base}?filter=nope").json()["field"] == "filter"


def test_the_cli_exports_a_set_queue(runs, tmp_path, capsys):
    out = tmp_path / "queue.jsonl"
    call_command("export", "--set", "qa", "--review-queue", "--runs", "all", "-o", str(out))
    assert len(out.read_text().splitlines()) == 9
