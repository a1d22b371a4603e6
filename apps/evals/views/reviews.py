"""The review queue (issue 13 §1): people grade a run's cases one after another, by keyboard.

``GET runs/<id>/review/?filter=&result=`` shows one case of the queue (input, expected vs
actual, every score, the caller's review form, others' reviews) with a progress bar; the next
case loads in place (HTMX). ``POST runs/<id>/review/<result>/`` saves the caller's review and
answers the same case with "saved" on screen, or, with ``go=next|prev``, the next case: a review
is confirmed saved before the queue moves on. The keys (``evalsite/static/evalsite/review.js``): ``j`` /
``k`` next / previous, ``p`` / ``f`` / ``u`` verdict (saved at once), ``1``-``5`` (and ``0``) the
score of the active axis, ``a`` next axis, ``c`` comment, ``?`` help.

The judge-vs-people block of the run page is :func:`review_agreement` (loaded after the page).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps.core import access
from apps.core.access import viewer_required
from apps.core.pages import render_page
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet, ReviewVerdict
from apps.evals.queries import NEWEST_FIRST
from apps.evals.queries.figures import LIVE_STATUSES
from apps.evals.queries.review_queue import QUEUE_FILTERS, QueueItem, filtered_queue, step
from apps.evals.queries.reviews import judge_vs_people, result_reviews, review_progress
from apps.evals.reviews import assign_results, save_review
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.eval_runs import scored_expected
from evalcore.errors import InvalidInputError
from evalcore.judge import AXES


def _queue_filter(request: HtmxHttpRequest) -> str:
    asked = request.GET.get("filter") or ""
    return asked if asked in QUEUE_FILTERS else next(iter(QUEUE_FILTERS))


def _queue_url(eval_run: EvalRun, queue_filter: str, result_id: int | None) -> str:
    query = {"filter": queue_filter, **({"result": result_id} if result_id else {})}
    return f"{reverse('evals:review_queue', args=[eval_run.pk])}?{urlencode(query)}"


def _panel_context(
    request: HtmxHttpRequest,
    eval_run: EvalRun,
    queue_filter: str,
    result_id: int | None,
    *,
    saved: str = "",
    error: InvalidInputError | None = None,
    posted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    items = filtered_queue(eval_run, request.user, queue_filter)
    current: QueueItem | None = None
    if result_id is not None:
        current = next((i for i in items if i.result_id == result_id), None)
    elif items:
        current = items[0]
    context: dict[str, Any] = {
        "eval_run": eval_run,
        "filter": queue_filter,
        "filters": QUEUE_FILTERS,
        "progress": review_progress(eval_run),
        "n_items": len(items),
        "saved": saved,
        "error": error,
        "axes": AXES,
        "verdicts": ReviewVerdict.values,
        "can_review": access.can_review(request.user),
        "result": None,
        "reviewers": reviewers() if access.can_review(request.user) else [],
    }
    wanted = result_id if result_id is not None else (current.result_id if current else None)
    if wanted is None:
        return context
    result = get_object_or_404(EvalResult.objects.select_related("run"), pk=wanted, eval_run=eval_run)
    case = EvalCase.objects.filter(eval_set_id=eval_run.eval_set_id, case_id=result.case_id).first()
    reviews = result_reviews(result)
    mine = next((r for r in reviews if r.reviewer_id == request.user.pk), None)
    previous = step(eval_run, result.pk, items, -1)
    following = step(eval_run, result.pk, items, 1)
    position = next((n for n, i in enumerate(items, 1) if i.result_id == result.pk), None)
    form = posted or {
        "verdict": mine.verdict if mine else "",
        "axis_scores": dict(mine.axis_scores) if mine else {},
        "comment": mine.comment if mine else "",
    }
    context.update(
        result=result,
        case=case,
        expected=scored_expected(result, case, eval_run),
        reason=current.reason if current else "",
        position=position,
        mine=mine,
        others=[r for r in reviews if r.reviewer_id != request.user.pk],
        assignees=[a.assignee.get_username() for a in result.assignments.select_related("assignee")],
        form=form,
        axis_rows=[(axis, form["axis_scores"].get(axis)) for axis in AXES],
        previous_url=_queue_url(eval_run, queue_filter, previous.result_id) if previous else "",
        next_url=_queue_url(eval_run, queue_filter, following.result_id) if following else "",
        save_url=reverse("evals:save_review", args=[eval_run.pk, result.pk])
        + f"?{urlencode({'filter': queue_filter})}",
        here_url=_queue_url(eval_run, queue_filter, result.pk),
    )
    return context


@require_GET
@viewer_required
def review_queue(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """One case of the run's review queue (``?filter=``, ``?result=`` picks the case)."""
    eval_run = get_object_or_404(EvalRun.objects.select_related("eval_set"), pk=run_id)
    queue_filter = _queue_filter(request)
    raw = request.GET.get("result") or ""
    result_id = int(raw) if raw.isdigit() else None
    context = _panel_context(request, eval_run, queue_filter, result_id)
    return render_page(request, "evals/review.html", context, {"review-panel": "panel"})


@require_POST
@viewer_required
def save_review_view(request: HtmxHttpRequest, run_id: str, result_id: int) -> HttpResponse:
    """Save the caller's review of one result (members); answer the case again with "saved",
    or the next / previous case (``go``). A refused review answers 400 with the form and the
    error, the case unchanged (nothing moves on)."""
    eval_run = get_object_or_404(EvalRun.objects.select_related("eval_set"), pk=run_id)
    queue_filter = _queue_filter(request)
    if not access.can_review(request.user):
        return HttpResponse("only members can review results", status=403)
    result = get_object_or_404(EvalResult, pk=result_id, eval_run=eval_run)
    axis_scores: dict[str, Any] = {}
    for axis in AXES:
        raw = (request.POST.get(f"axis_{axis}") or "").strip()
        if raw:
            axis_scores[axis] = int(raw) if raw.lstrip("-").isdigit() else raw
    posted = {
        "verdict": request.POST.get("verdict") or "",
        "axis_scores": axis_scores,
        "comment": request.POST.get("comment") or "",
    }
    try:
        save_review(result, request.user, **posted)
    except InvalidInputError as exc:
        context = _panel_context(request, eval_run, queue_filter, result.pk, error=exc, posted=posted)
        return TemplateResponse(request, "evals/review.html#panel", context, status=400)
    saved = f"Saved your review of {result.case_id} ({posted['verdict']}) at {timezone.localtime():%H:%M:%S}."
    go = request.POST.get("go")
    target = result.pk
    if go in ("next", "prev"):
        items = filtered_queue(eval_run, request.user, queue_filter)
        moved = step(eval_run, result.pk, items, 1 if go == "next" else -1)
        if moved is not None:
            target = moved.result_id
        else:
            saved += " That was the last case of this queue."
    context = _panel_context(request, eval_run, queue_filter, target, saved=saved)
    response = TemplateResponse(request, "evals/review.html#panel", context)
    response["HX-Push-Url"] = _queue_url(eval_run, queue_filter, target)
    return response


@require_GET
@viewer_required
def review_agreement(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """The run page's judge-vs-people block: agreement per scorer, per axis, among reviewers."""
    eval_run = get_object_or_404(EvalRun, pk=run_id)
    context = {"eval_run": eval_run, "agreement": judge_vs_people(eval_run), "progress": review_progress(eval_run)}
    return TemplateResponse(request, "evals/review.html#agreement", context)


def reviewers() -> list[Any]:
    """People who may review (members and superusers), by username."""
    users = get_user_model().objects.filter(is_active=True)
    allowed = (
        Q(is_superuser=True)
        | Q(groups__permissions__codename="review_result")
        | Q(user_permissions__codename="review_result")
    )
    return list(users.filter(allowed).distinct().order_by("username"))


@require_POST
@viewer_required
def assign_queue(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Hand the cases of the current queue (its filter) to the chosen reviewers in turn (members)."""
    eval_run = get_object_or_404(EvalRun.objects.select_related("eval_set"), pk=run_id)
    if not access.can_review(request.user):
        return HttpResponse("only members can assign reviews", status=403)
    asked = request.POST.get("filter") or ""
    queue_filter = asked if asked in QUEUE_FILTERS else next(iter(QUEUE_FILTERS))
    wanted = set(request.POST.getlist("assignees"))
    people = [user for user in reviewers() if user.get_username() in wanted]
    items = filtered_queue(eval_run, request.user, queue_filter)
    try:
        made = assign_results([i.result_id for i in items], people, by=request.user)
    except InvalidInputError as exc:
        messages.error(request, f"Not assigned: {exc}")
    else:
        names = ", ".join(u.get_username() for u in people)
        messages.success(request, f"Assigned {made} case{'s' if made != 1 else ''} of this queue to {names}.")
    return redirect(_queue_url(eval_run, queue_filter, None))


SET_RUNS_SHOWN = 20
"""Runs listed in a set's review block (newest first)."""


@require_GET
@viewer_required
def set_review_agreement(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """The set page's judge-vs-people block: agreement over the reviews of all its runs, and each
    run's review progress with a link to its queue (loaded after the set page)."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    runs = EvalRun.objects.filter(eval_set=eval_set).exclude(status__in=LIVE_STATUSES).order_by(NEWEST_FIRST, "-pk")
    context = {
        "eval_run": None,
        "eval_set": eval_set,
        "agreement": judge_vs_people(eval_set),
        "runs": [{"run": r, "progress": review_progress(r)} for r in runs[:SET_RUNS_SHOWN]],
    }
    return TemplateResponse(request, "evals/review.html#agreement", context)
