"""The review queue of a run (issue 13 §1): people grade a run's cases one after another, by keyboard.

``GET runs/<id>/review/?filter=&result=`` shows one case of the queue (input, expected vs
actual, every score, the caller's review form, others' reviews) with a progress bar; the next
case loads in place (HTMX). ``POST runs/<id>/review/<result>/`` saves the caller's review and
answers the same case with "saved" on screen, or, with ``go=next|prev``, the next case: a review
is confirmed saved before the queue moves on. The keys (``evalsite/static/evalsite/review.js``): ``j`` /
``k`` next / previous, ``p`` / ``f`` / ``u`` verdict (saved at once), ``1``-``5`` (and ``0``) the
score of the active axis, ``a`` next axis, ``c`` comment, ``?`` help. A set's queue across its
runs is :mod:`.set_reviews`; both are built from :mod:`.review_panel`.

The judge-vs-people blocks of the run page and the set page are :func:`review_agreement` and
:func:`set_review_agreement` (loaded after the page).
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.core.access import viewer_required
from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries.figures import LIVE_STATUSES
from apps.evals.queries.review_queue import ReviewQueue
from apps.evals.queries.reviews import judge_vs_people, review_progress
from apps.evals.queries.runs import NEWEST_FIRST
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.review_panel import QueuePage, assign_and_return, queue_filter_of, queue_page, save_and_answer


def _run_queue(request: HtmxHttpRequest, run_id: str) -> QueuePage:
    eval_run = get_object_or_404(EvalRun.objects.select_related("eval_set"), pk=run_id)
    return QueuePage(
        queue=ReviewQueue([eval_run]),
        queue_filter=queue_filter_of(request),
        page_url=reverse("evals:review_queue", args=[eval_run.pk]),
        save_url_name="evals:save_review",
        assign_url=reverse("evals:assign_reviews", args=[eval_run.pk]),
        export_url=f"/api/eval/runs/{eval_run.pk}/review-queue/export",
        url_args=[eval_run.pk],
        header={
            "eval_run": eval_run,
            "title": f"run {eval_run.pk}",
            "back_url": reverse("evals:eval_run", args=[eval_run.pk]),
            "back_label": f"run {eval_run.pk}",
        },
    )


@require_GET
@viewer_required
def review_queue(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """One case of the run's review queue (``?filter=``, ``?result=`` picks the case)."""
    return queue_page(request, _run_queue(request, run_id))


@require_POST
@viewer_required
def save_review_view(request: HtmxHttpRequest, run_id: str, result_id: int) -> HttpResponse:
    """Save the caller's review of one result of the run (members); see
    :func:`~apps.evals.views.review_panel.save_and_answer`."""
    return save_and_answer(request, _run_queue(request, run_id), result_id)


@require_POST
@viewer_required
def assign_queue(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Hand the cases of the current queue (its filter) to the chosen reviewers in turn (members)."""
    return assign_and_return(request, _run_queue(request, run_id))


@require_GET
@viewer_required
def review_agreement(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """The run page's judge-vs-people block: agreement per scorer, per axis, among reviewers."""
    eval_run = get_object_or_404(EvalRun, pk=run_id)
    context = {"eval_run": eval_run, "agreement": judge_vs_people(eval_run), "progress": review_progress(eval_run)}
    return TemplateResponse(request, "evals/review.html#agreement", context)


SET_RUNS_SHOWN = 20
"""Runs listed in a set's review block (newest first)."""


@require_GET
@viewer_required
def set_review_agreement(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """The set page's judge-vs-people block: agreement over the reviews of all its runs, and each
    run's review progress with a link to its queue and to the set's queue (loaded after the set page)."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    runs = EvalRun.objects.filter(eval_set=eval_set).exclude(status__in=LIVE_STATUSES).order_by(NEWEST_FIRST, "-pk")
    context = {
        "eval_run": None,
        "eval_set": eval_set,
        "agreement": judge_vs_people(eval_set),
        "runs": [{"run": r, "progress": review_progress(r)} for r in runs[:SET_RUNS_SHOWN]],
    }
    return TemplateResponse(request, "evals/review.html#agreement", context)
