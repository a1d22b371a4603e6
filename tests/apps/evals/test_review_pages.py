"""The review queue and the judge-vs-people block in the portal (issue 13 §1): the queue puts
the cases that need a person first, saves a review before it moves on, refuses a bad one without
moving, and only members get the form."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from apps.evals.models import EvalResult, Review
from apps.evals.queries.review_queue import ReviewQueue, queue_order
from apps.evals.runs.reviews import save_review
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    eval_run = make_eval_run(
        make_eval_set(n_cases=6), [True, True, False, "errored", True, "unscored"], case_ids=list("abcdef")
    )
    # the judge passes b while exact_match fails it; the judge was unstable on e
    b = EvalResult.objects.get(eval_run=eval_run, case_id="b")
    b.scores = [
        {"name": "exact_match", "value": False, "passed": False},
        {"name": "rubric_judge", "value": True, "passed": True},
    ]
    b.save()
    e = EvalResult.objects.get(eval_run=eval_run, case_id="e")
    e.scores = [{"name": "rubric_judge", "value": True, "passed": True, "metadata": {"unstable": True}}]
    e.save()
    return eval_run


def queue_url(run, **query) -> str:
    base = reverse("evals:review_queue", args=[run.pk])
    return base + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_cases_that_need_a_person_come_first(run, member):
    order = [(i.case_id, i.reason) for i in queue_order(run)]
    assert order == [
        ("e", "judge unstable"),
        ("b", "judge vs scorer"),
        ("d", "errored"),
        ("c", "failed"),
        ("f", "unscored"),
        ("a", ""),
    ]
    assert [i.case_id for i in ReviewQueue([run]).filtered(member, "flagged")] == ["e", "b"]
    assert [i.case_id for i in ReviewQueue([run]).filtered(member, "failed")] == ["d", "c"]


def test_queue_page_shows_the_first_case_with_progress_and_the_form(client, member, run):
    client.force_login(member)
    page = client.get(queue_url(run)).content.decode()
    assert "0 / 6 reviewed" in page and 'id="review-form"' in page
    assert ">e</a>" in page and "judge unstable" in page
    assert "review.js" in page


def test_saving_moves_on_only_after_the_review_is_stored(client, member, run):
    client.force_login(member)
    e = EvalResult.objects.get(eval_run=run, case_id="e")
    save = reverse("evals:save_review", args=[run.pk, e.pk]) + "?filter=unreviewed"
    answer = client.post(
        save, {"verdict": "fail", "axis_accuracy": "2", "comment": "made up", "go": "next"}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 200
    body = answer.content.decode()
    assert "Saved your review of e (fail)" in body and "1 / 6 reviewed" in body
    assert f'data-result="{EvalResult.objects.get(eval_run=run, case_id="b").pk}"' in body  # next in the queue
    assert answer["HX-Push-Url"].endswith(f"result={EvalResult.objects.get(eval_run=run, case_id='b').pk}")
    review = Review.objects.get(result=e)
    assert (review.verdict, review.axis_scores, review.comment) == ("fail", {"accuracy": 2}, "made up")


def test_a_refused_review_stays_on_its_case_with_the_error(client, member, run):
    client.force_login(member)
    e = EvalResult.objects.get(eval_run=run, case_id="e")
    save = reverse("evals:save_review", args=[run.pk, e.pk])
    answer = client.post(save, {"verdict": "pass", "axis_accuracy": "9", "go": "next"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 400
    body = answer.content.decode()
    assert "Not saved: accuracy must be an integer 0..5" in body and f'data-result="{e.pk}"' in body
    assert 'value="9"' in body  # what was typed is kept
    assert not Review.objects.exists()


def test_viewers_read_the_queue_without_a_form_and_cannot_post(client, viewer, member, run):
    save_review(EvalResult.objects.get(eval_run=run, case_id="e"), member, verdict="pass", comment="fine")
    client.force_login(viewer)
    page = client.get(queue_url(run, filter="all")).content.decode()
    assert 'id="review-form"' not in page and "Viewers read reviews" in page
    assert 'member</b>: <span class="pill">pass</span>' in page and "fine" in page
    e = EvalResult.objects.get(eval_run=run, case_id="e")
    refused = client.post(reverse("evals:save_review", args=[run.pk, e.pk]), {"verdict": "fail"})
    assert refused.status_code == 403 and Review.objects.get().verdict == "pass"


def test_reviewed_cases_leave_the_unreviewed_queue_and_the_last_one_says_so(client, member, run):
    client.force_login(member)
    for result in EvalResult.objects.filter(eval_run=run).exclude(case_id="a"):
        save_review(result, member, verdict="pass")
    a = EvalResult.objects.get(eval_run=run, case_id="a")
    page = client.get(queue_url(run)).content.decode()
    assert f'data-result="{a.pk}"' in page and "1 case in this queue" in page
    answer = client.post(
        reverse("evals:save_review", args=[run.pk, a.pk]), {"verdict": "pass", "go": "next"}, HTTP_HX_REQUEST="true"
    )
    assert "That was the last case of this queue." in answer.content.decode()
    assert "Nothing left in this queue" in client.get(queue_url(run)).content.decode()


def test_run_page_loads_judge_vs_people_and_the_case_page_lists_reviews(client, member, run):
    b = EvalResult.objects.get(eval_run=run, case_id="b")
    save_review(b, member, verdict="fail", comment="judge too kind")
    client.force_login(member)
    run_page = client.get(reverse("evals:eval_run", args=[run.pk])).content.decode()
    assert reverse("evals:review_agreement", args=[run.pk]) in run_page
    block = client.get(reverse("evals:review_agreement", args=[run.pk])).content.decode()
    assert "1 of 6 cases reviewed, 1 with a human label" in block
    # rubric_judge passed b, people failed it: 0% agreement, one lenient case linked
    assert "rubric_judge</td><td>1</td><td>0.0%</td>" in block
    assert reverse("evals:result", args=[run.pk, b.pk]) in block
    case_page = client.get(reverse("evals:result", args=[run.pk, b.pk])).content.decode()
    assert "judge too kind" in case_page and "Review this case" in case_page


def test_a_member_assigns_the_queue_in_turn_and_each_sees_their_share(client, member, run, django_user_model):
    from django.contrib.auth.models import Group

    other = django_user_model.objects.create_user("other", password="other-pass-123")
    other.groups.add(Group.objects.get(name="member"))
    client.force_login(member)
    page = client.get(queue_url(run)).content.decode()
    assert 'id="assign-form"' in page and '<option value="other">' in page
    answer = client.post(
        reverse("evals:assign_reviews", args=[run.pk]),
        {"filter": "flagged", "assignees": ["member", "other"]},
        follow=True,
    )
    assert "Assigned 2 cases of this queue to member, other." in answer.content.decode()
    again = client.post(
        reverse("evals:assign_reviews", args=[run.pk]),
        {"filter": "flagged", "assignees": ["member", "other"]},
        follow=True,
    )
    assert "Assigned 0 cases of this queue" in again.content.decode()  # held already: none made
    # flagged: e then b; in turn: e to member, b to other
    mine = client.get(queue_url(run, filter="assigned")).content.decode()
    e = EvalResult.objects.get(eval_run=run, case_id="e")
    assert f'data-result="{e.pk}"' in mine and "1 case in this queue" in mine and "assigned to member" in mine
    save_review(e, member, verdict="pass")
    assert "Nothing left in this queue" in client.get(queue_url(run, filter="assigned")).content.decode()
    client.force_login(other)
    theirs = client.get(queue_url(run, filter="assigned")).content.decode()
    assert f'data-result="{EvalResult.objects.get(eval_run=run, case_id="b").pk}"' in theirs
    none = client.post(reverse("evals:assign_reviews", args=[run.pk]), {"filter": "all"}, follow=True)
    assert "Not assigned: choose at least one reviewer" in none.content.decode()


def test_viewers_cannot_assign(client, viewer, run):
    client.force_login(viewer)
    assert 'id="assign-form"' not in client.get(queue_url(run)).content.decode()
    assert client.post(reverse("evals:assign_reviews", args=[run.pk]), {"assignees": ["viewer"]}).status_code == 403


def test_the_set_page_gathers_judge_vs_people_over_its_runs(client, member, run):
    from tests.apps.factories import make_eval_run as another_run

    second = another_run(run.eval_set, [False] * 6, case_ids=list("abcdef"), variant="v2")
    save_review(EvalResult.objects.get(eval_run=run, case_id="a"), member, verdict="pass")  # run passed a
    save_review(EvalResult.objects.get(eval_run=second, case_id="a"), member, verdict="pass")  # second failed a
    client.force_login(member)
    set_page = client.get(reverse("evals:set", args=[run.eval_set_id])).content.decode()
    assert reverse("evals:set_reviews", args=[run.eval_set_id]) in set_page
    block = client.get(reverse("evals:set_reviews", args=[run.eval_set_id])).content.decode()
    assert "2 results with a human label" in block
    assert "case verdict</td><td>2</td><td>50.0%</td>" in block  # one agrees, one does not
    second_a = EvalResult.objects.get(eval_run=second, case_id="a")
    assert reverse("evals:result", args=[second.pk, second_a.pk]) in block  # the disagreement, linked to its run
    assert block.count("review queue</a>") == 2 and "1 / 6" in block


def test_a_comment_alone_is_saved_from_the_page_and_shown_without_a_verdict(client, member, run):
    client.force_login(member)
    e = EvalResult.objects.get(eval_run=run, case_id="e")
    save = reverse("evals:save_review", args=[run.pk, e.pk]) + "?filter=unreviewed"
    answer = client.post(save, {"verdict": "", "comment": "ask the data team", "go": "next"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    body = answer.content.decode()
    assert "Saved your review of e (no verdict: comment)" in body and "1 / 6 reviewed" in body
    assert Review.objects.get(result=e).verdict == ""
    page = client.get(queue_url(run, filter="reviewed")).content.decode()
    assert "Your review: <b>no verdict</b>" in page and 'name="verdict" value="" checked' in page
    scores = client.post(
        reverse("evals:save_review", args=[run.pk, e.pk]), {"axis_accuracy": "4"}, HTTP_HX_REQUEST="true"
    )
    assert "(no verdict: axis scores)" in scores.content.decode()
    empty = client.post(reverse("evals:save_review", args=[run.pk, e.pk]), {"go": "next"}, HTTP_HX_REQUEST="true")
    assert (
        empty.status_code == 400
        and "Not saved: a review needs a verdict, an axis score or a comment" in empty.content.decode()
    )
    assert f'data-result="{e.pk}"' in empty.content.decode()  # it stays on the case
    case_page = client.get(reverse("evals:result", args=[run.pk, e.pk])).content.decode()
    assert ">no verdict</span>" in case_page


ODD_IDS = ["gsm8k/test/7", "what?", "x#1", "100%", "two\nlines", "a b"]


def test_the_queues_show_and_save_case_ids_that_need_encoding(client, member):
    eval_set = make_eval_set("odd", n_cases=len(ODD_IDS))
    run = make_eval_run(eval_set, [False] * len(ODD_IDS), case_ids=ODD_IDS)
    client.force_login(member)
    queues = (
        ("evals:review_queue", "evals:save_review", [run.pk]),
        ("evals:set_review_queue", "evals:save_set_review", [eval_set.pk]),
    )
    for name, save_name, args in queues:
        base = reverse(name, args=args)
        seen = []
        page = client.get(base + "?filter=all").content.decode()
        for _ in ODD_IDS:
            result = EvalResult.objects.get(pk=int(page.split('data-result="', 1)[1].split('"', 1)[0]))
            seen.append(result.case_id)
            assert reverse("evals:result", args=[run.pk, result.pk]) in page
            save = reverse(save_name, args=[*args, result.pk])
            answer = client.post(save + "?filter=all", {"verdict": "fail", "go": "next"}, HTTP_HX_REQUEST="true")
            assert (
                answer.status_code == 200
                and f"Saved your review of {escape(result.case_id)} (fail)" in answer.content.decode()
            )
            page = answer.content.decode()
        assert sorted(seen) == sorted(ODD_IDS)
        case_page = client.get(reverse("evals:result", args=[run.pk, EvalResult.objects.get(case_id="two\nlines").pk]))
        assert case_page.status_code == 200
    assert Review.objects.count() == len(ODD_IDS)


def test_without_a_script_the_form_posts_as_a_page(client, member, run):
    """No HTMX (the script off): a save redirects to the next case with "saved" as a message, and a
    refusal answers the whole page, not a bare panel."""
    client.force_login(member)
    e, b = EvalResult.objects.get(eval_run=run, case_id="e"), EvalResult.objects.get(eval_run=run, case_id="b")
    save = reverse("evals:save_review", args=[run.pk, e.pk]) + "?filter=unreviewed&walk=w1"
    answer = client.post(save, {"verdict": "pass", "go": "next"})
    # the page's walk (issue 26) stays in the URL: k comes back to e from b
    assert answer.status_code == 302 and answer["Location"] == queue_url(
        run, filter="unreviewed", walk="w1", result=b.pk
    )
    shown = client.get(answer["Location"]).content.decode()
    assert "Saved your review of e (pass)" in shown and f'data-result="{b.pk}"' in shown and "<h1>" in shown
    refused = client.post(reverse("evals:save_review", args=[run.pk, b.pk]), {"axis_accuracy": "7"})
    assert refused.status_code == 400 and "<h1>Review queue</h1>" in refused.content.decode()
    assert "Not saved: accuracy must be an integer 0..5" in refused.content.decode()


def test_an_unknown_queue_filter_is_a_not_found_page_that_names_the_filters(client, member, run):
    """A link with a filter the queue does not have shows why (as the CLI and the export
    refuse it), instead of quietly showing the default queue under the wrong name."""
    client.force_login(member)
    answer = client.get(queue_url(run, filter="nope"))
    assert answer.status_code == 404
    page = answer.content.decode()
    reason = page[page.index('id="not-found-reason">') :].split("</p>")[0]
    assert "unknown review queue filter" in reason and "nope" in reason, reason
    assert all(name in reason for name in ("unreviewed", "mine", "flagged", "failed", "reviewed", "all"))
    assert client.get(queue_url(run, filter="failed")).status_code == 200
    assert client.get(queue_url(run)).status_code == 200
