"""A walk through the review queue (issue 26): one post saves a verdict and moves to the next
case, also without a script (POST, then a redirect); the cases reviewed along the walk stay in
"case N of M" and behind ``k`` / "previous" after ``unreviewed`` dropped them, across a reload;
after the last case the page says "all M reviewed" and still leads back to it."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.evals.models import EvalResult, EvalRun, Review
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

CASES = list("abc")


@pytest.fixture
def run() -> EvalRun:
    return make_eval_run(make_eval_set(n_cases=3), [False, False, False], case_ids=CASES)


def shown_case(page: str) -> str | None:
    """The case id the panel shows (``None``: no case)."""
    match = re.search(r'data-result="(\d+)"', page)
    return EvalResult.objects.get(pk=int(match[1])).case_id if match else None


def form_action(page: str) -> str:
    """Where the panel's review form posts (the save URL with the page's filter and walk)."""
    match = re.search(r'<form id="review-form" method="post" action="([^"]+)"', page)
    assert match, page
    return html.unescape(match[1])


def link(page: str, element_id: str) -> str:
    match = re.search(rf'<a href="([^"]+)"[^>]*id="{element_id}"', page)
    assert match, f"no #{element_id} link"
    return html.unescape(match[1])


def position(page: str) -> str:
    match = re.search(r'<strong id="queue-position">([^<]*)</strong>', page)
    assert match, page
    return match[1]


def test_without_a_script_each_verdict_saves_and_moves_on_and_previous_returns_exactly(
    client: Client, member: Any, run: EvalRun
) -> None:
    client.force_login(member)
    queue = reverse("evals:review_queue", args=[run.pk]) + "?filter=unreviewed"
    page = client.get(queue).content.decode()
    assert shown_case(page) == "a" and position(page) == "case 1 of 3 · 0 reviewed by you"
    walk = re.search(r"walk=([\w-]+)", form_action(page))
    assert walk, form_action(page)
    for n, (case_id, verdict) in enumerate(zip(CASES, ("pass", "fail", "unsure"), strict=True), 1):
        assert shown_case(page) == case_id
        answer = client.post(form_action(page), {"verdict": verdict, "go": "next"})  # no HX-Request: a form post
        assert answer.status_code == 302 and f"walk={walk[1]}" in answer["Location"]
        assert Review.objects.get(result__case_id=case_id, reviewer=member).verdict == verdict
        page = client.get(answer["Location"]).content.decode()
        assert f"Saved your review of {case_id} ({verdict})" in page  # the message after the redirect
        if n < 3:
            # the reviewed case left "unreviewed", and the queue still counts it
            assert position(page) == f"case {n + 1} of 3 · {n} reviewed by you"
            assert shown_case(client.get(link(page, "review-previous")).content.decode()) == case_id
    # after the last case: the end of the queue, its size, and a way back to the last case
    assert shown_case(page) is None and "end=1" in answer["Location"]
    assert position(page) == "all 3 reviewed" and "all 3 cases reviewed" in page
    back = client.get(link(page, "review-previous")).content.decode()
    assert shown_case(back) == "c" and position(back) == "case 3 of 3 · 3 reviewed by you"
    # k, k again: exact, and a reload of the same URL is the same page
    again = link(back, "review-previous")
    first = client.get(again).content.decode()
    assert shown_case(first) == "b" and client.get(again).content.decode().count('data-result="') == 1
    assert shown_case(client.get(again).content.decode()) == "b"
    # a new walk of the same filter starts empty: nothing left to review
    fresh = client.get(queue).content.decode()
    assert shown_case(fresh) is None and "Nothing left in this queue" in fresh and position(fresh) == "0 cases"


def test_a_changed_review_from_a_walked_case_moves_on_in_queue_order(client: Client, member: Any, run: EvalRun) -> None:
    client.force_login(member)
    save = reverse("evals:save_review", args=[run.pk, EvalResult.objects.get(case_id="a").pk])
    first = client.post(save + "?filter=unreviewed&walk=w2", {"verdict": "pass", "go": "next"}, HTTP_HX_REQUEST="true")
    assert shown_case(first.content.decode()) == "b"
    # back on a (it left "unreviewed"), the reviewer changes the verdict: saved, then b again
    again = client.post(save + "?filter=unreviewed&walk=w2", {"verdict": "fail", "go": "next"}, HTTP_HX_REQUEST="true")
    body = again.content.decode()
    assert shown_case(body) == "b" and position(body) == "case 2 of 3 · 1 reviewed by you"
    assert Review.objects.get(result__case_id="a").verdict == "fail"
    # go=prev from b's form: back to a
    b_save = reverse("evals:save_review", args=[run.pk, EvalResult.objects.get(case_id="b").pk])
    prev = client.post(b_save + "?filter=unreviewed&walk=w2", {"verdict": "pass", "go": "prev"}, HTTP_HX_REQUEST="true")
    assert shown_case(prev.content.decode()) == "a"


def test_an_htmx_save_announces_the_verdict_to_screen_readers(client: Client, member: Any, run: EvalRun) -> None:
    client.force_login(member)
    save = reverse("evals:save_review", args=[run.pk, EvalResult.objects.get(case_id="a").pk])
    answer = client.post(
        save + "?filter=unreviewed&walk=w3",
        {"verdict": "pass", "go": "next"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="review-panel",
    )
    body = answer.content.decode()
    live = re.search(r'<div id="review-live" hx-swap-oob="innerHTML">([^<]*)</div>', body)
    assert live and "Saved your review of a (pass)" in live[1] and "Now case b, 2 of 3." in live[1]
    assert answer["HX-Push-Url"].endswith("walk=w3&result=" + str(EvalResult.objects.get(case_id="b").pk))
    page = client.get(reverse("evals:review_queue", args=[run.pk])).content.decode()
    assert 'id="review-live" class="visually-hidden" role="status" aria-live="polite"' in page
    assert 'id="review-keys"' in page and 'id="review-help"' in page  # the keys, listed on the page


def test_a_walk_token_that_is_not_one_is_a_not_found_page_naming_it(client: Client, member: Any, run: EvalRun) -> None:
    client.force_login(member)
    answer = client.get(reverse("evals:review_queue", args=[run.pk]) + "?walk=%3Cx%3E")
    assert answer.status_code == 404 and "walk=" in answer.content.decode()
