"""A set's review queue across its runs (issue 13 §1): one queue of (run, case) results.

``GET sets/<id>/review/?runs=&filter=&result=`` is the run queue's page (:mod:`.reviews`) over
the runs ``runs`` names (:func:`~apps.evals.queries.set_queue.set_queue_runs`): the latest run of
each target and variant (default), every run (the newest, up to 50 runs and 100,000 results), or
one run by id. The order, the
filters, assignment, the progress bar, the keys and the save path (``POST
sets/<id>/review/<result>/``, confirmed before the queue moves on) are the run queue's
(:mod:`.review_panel`); a case's results in several runs stand together, the newest run first,
and the panel names the run of the case shown.
"""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.core.access import viewer_required
from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries import set_queue
from apps.evals.queries.review_queue import ReviewQueue
from apps.evals.queries.set_queue import SET_SCOPES, set_queue_runs
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.review_panel import (
    QueuePage,
    assign_and_return,
    queue_filter_of,
    queue_page,
    request_param,
    save_and_answer,
)
from evalcore.errors import NotFoundError


def run_label(eval_run: EvalRun) -> str:
    """A run as the picker names it: id, target/variant, name, start time."""
    parts = [f"run {eval_run.pk}", f"{eval_run.target_id}/{eval_run.variant or '-'}"]
    if eval_run.name:
        parts.append(eval_run.name)
    if eval_run.started:
        parts.append(f"{eval_run.started:%Y-%m-%d %H:%M}")
    return " · ".join(parts)


def _set_queue(request: HtmxHttpRequest, set_id: int) -> QueuePage:
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    try:
        scope = set_queue_runs(eval_set, request_param(request, "runs"))
    except NotFoundError as exc:
        raise Http404(str(exc)) from None
    choices = [(key, f"{key}: {label}") for key, label in SET_SCOPES.items()]
    choices += [(r.pk, run_label(r)) for r in scope.listed]
    if scope.choice not in dict(choices):  # a chosen run older than the picker's list
        choices.append((scope.choice, run_label(scope.runs[0])))
    return QueuePage(
        queue=ReviewQueue(scope.runs),
        queue_filter=queue_filter_of(request),
        page_url=reverse("evals:set_review_queue", args=[eval_set.pk]),
        save_url_name="evals:save_set_review",
        assign_url=reverse("evals:assign_set_reviews", args=[eval_set.pk]),
        export_url=f"/api/eval/sets/{eval_set.pk}/review-queue/export",
        url_args=[eval_set.pk],
        params={"runs": scope.choice},
        header={
            "eval_set": eval_set,
            "title": f"set {eval_set.name}",
            "back_url": reverse("evals:set", args=[eval_set.pk]),
            "back_label": f"set {eval_set.name}",
            "set_scope": scope,
            "run_choices": choices,
            "runs_cap": set_queue.MAX_SET_QUEUE_RUNS,
            "results_cap": f"{set_queue.MAX_SET_QUEUE_RESULTS:,}",
        },
    )


@require_GET
@viewer_required
def set_review_queue(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """One case of the set's review queue (``?runs=``, ``?filter=``, ``?result=`` picks the case)."""
    return queue_page(request, _set_queue(request, set_id))


@require_POST
@viewer_required
def save_set_review(request: HtmxHttpRequest, set_id: int, result_id: int) -> HttpResponse:
    """Save the caller's review of one result of the set's queue (members); see
    :func:`~apps.evals.views.review_panel.save_and_answer`."""
    return save_and_answer(request, _set_queue(request, set_id), result_id)


@require_POST
@viewer_required
def assign_set_queue(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """Hand the cases of the set's current queue (its runs and filter) to reviewers in turn (members)."""
    return assign_and_return(request, _set_queue(request, set_id))
