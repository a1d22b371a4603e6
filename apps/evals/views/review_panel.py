"""What the two review queues share (a run's, :mod:`.reviews`, and a set's across its runs,
:mod:`.set_reviews`): the queue as a page (:class:`QueuePage`: its runs, filter and URLs), the
panel of one case (:func:`panel_context`), the save path (:func:`save_and_answer`: a review is
stored before the queue moves on) and assignment (:func:`assign_and_return`).

A walk through a queue (issue 26) is named by ``?walk=<token>`` in every URL of the page and
remembers, in the session, the ids the reviewer saved along it (:func:`remember`): those stay in
the list ``j`` / ``k`` step through and in "case N of M" after the filter drops them (a reviewed
case leaves ``unreviewed``), so going back is exact and survives a reload.

Both queues render ``evals/review.html``; an HTMX request gets its ``#panel`` partial. The keys
are ``evalsite/static/evalsite/review.js``.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from apps.core import access
from apps.core.forms import ascii_int
from apps.core.pages import render_page
from apps.evals.models import EvalCase, EvalResult, Review, ReviewVerdict
from apps.evals.queries.review_queue import QUEUE_FILTERS, QueueItem, ReviewQueue
from apps.evals.queries.reviews import result_reviews, review_progress
from apps.evals.runs.reviews import assign_results, save_review
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.eval_runs import scored_expected
from evalcore.errors import InvalidInputError
from evalcore.judge import AXES


def request_param(request: HtmxHttpRequest, name: str) -> str:
    """``name`` from the query string, else from the posted form ("" when absent)."""
    return request.GET.get(name) or request.POST.get(name) or ""


def queue_filter_of(request: HtmxHttpRequest) -> str:
    """The request's queue filter (``filter``; the default when absent).

    Raises:
        Http404: An unknown filter (the page says which ones exist, as the CLI and the export do;
            a silent fall-back showed another queue than the link promised).
    """
    asked = request_param(request, "filter")
    if not asked:
        return next(iter(QUEUE_FILTERS))
    if asked not in QUEUE_FILTERS:
        raise Http404(f"unknown review queue filter {asked!r}; choose one of {', '.join(QUEUE_FILTERS)}")
    return asked


WALKS_SESSION_KEY = "evals.review-walks"
"""The session entry holding each walk's reviewed result ids: ``{token: [id, ...]}``."""

MAX_WALKS = 20
"""Walks a session remembers (the oldest is forgotten first)."""

MAX_WALK_LENGTH = 2000
"""Reviewed ids a walk remembers (the oldest leave first; past it, "M" counts only these)."""

_WALK_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,32}")


def walk_of(request: HtmxHttpRequest) -> str:
    """The request's walk token (``walk``), or a new one when absent.

    Raises:
        Http404: A ``walk`` that is not 1-32 letters, digits, ``_`` or ``-``.
    """
    asked = request_param(request, "walk")
    if not asked:
        return secrets.token_urlsafe(6)
    if not _WALK_TOKEN.fullmatch(asked):
        raise Http404(f"review queue parameter walk={asked!r} is not a walk token (1-32 letters, digits, _ or -)")
    return asked


def walked(request: HtmxHttpRequest, token: str) -> list[int]:
    """The result ids reviewed along walk ``token`` in this session, oldest first ([] if none)."""
    walks = request.session.get(WALKS_SESSION_KEY) or {}
    ids = walks.get(token) if isinstance(walks, dict) else None
    return [i for i in ids if isinstance(i, int)] if isinstance(ids, list) else []


def remember(request: HtmxHttpRequest, token: str, result_id: int) -> None:
    """Add ``result_id`` (just saved) to walk ``token`` in the session, newest last; keeps at most
    :data:`MAX_WALKS` walks of :data:`MAX_WALK_LENGTH` ids."""
    stored = request.session.get(WALKS_SESSION_KEY)
    walks: dict[str, list[int]] = dict(stored) if isinstance(stored, dict) else {}
    ids = [i for i in walked(request, token) if i != result_id]
    walks.pop(token, None)
    walks[token] = [*ids, result_id][-MAX_WALK_LENGTH:]
    while len(walks) > MAX_WALKS:
        walks.pop(next(iter(walks)))
    request.session[WALKS_SESSION_KEY] = walks


@dataclass(slots=True)
class QueuePage:
    """A review queue as a page: its runs, its filter and how its URLs are built.

    Attributes:
        queue: The queue's runs and order.
        queue_filter: A key of :data:`~apps.evals.queries.review_queue.QUEUE_FILTERS`.
        page_url: The queue page's path.
        save_url_name: The URL name saving one result's review; its arguments are ``url_args``
            and the result id.
        assign_url: Where the assign form posts.
        export_url: The queue's export route (the API), without its query.
        url_args: The URL arguments naming the queue (a run id, or a set id).
        params: Query parameters every URL of the page keeps besides ``filter`` (a set queue's
            ``runs``).
        header: What the page shows above the panel (title, back link, the run picker).
        walk: The walk token every page and save URL keeps ("" outside a walk: assignment).
    """

    queue: ReviewQueue
    queue_filter: str
    page_url: str
    save_url_name: str
    assign_url: str
    export_url: str
    url_args: list[Any]
    params: dict[str, str] = field(default_factory=dict)
    header: dict[str, Any] = field(default_factory=dict)
    walk: str = ""

    def _query(self) -> dict[str, Any]:
        return {"filter": self.queue_filter, **self.params, **({"walk": self.walk} if self.walk else {})}

    def url(self, result_id: int | None = None, *, end: bool = False) -> str:
        """The page showing ``result_id`` (``None``: the queue's first case; ``end``: the end of
        the queue, after its last case)."""
        query = {**self._query(), **({"result": result_id} if result_id else {}), **({"end": 1} if end else {})}
        return f"{self.page_url}?{urlencode(query)}"

    def save_url(self, result_id: int) -> str:
        """Where the panel's form posts the caller's review of ``result_id``."""
        path = reverse(self.save_url_name, args=[*self.url_args, result_id])
        return f"{path}?{urlencode(self._query())}"

    def walk_items(self, request: HtmxHttpRequest) -> list[QueueItem]:
        """The filtered queue plus the cases reviewed along this walk that left it, in queue
        order (see :meth:`~apps.evals.queries.review_queue.ReviewQueue.with_walked`)."""
        items = self.queue.filtered(request.user, self.queue_filter)
        return self.queue.with_walked(items, walked(request, self.walk) if self.walk else [])

    def export_urls(self) -> dict[str, str]:
        """The queue's CSV and JSONL exports, with this page's filter and runs."""
        return {
            fmt: f"{self.export_url}?{urlencode({'format': fmt, 'filter': self.queue_filter, **self.params})}"
            for fmt in ("csv", "jsonl")
        }


def reviewers() -> list[Any]:
    """People who may review (members and superusers), by username."""
    users = get_user_model().objects.filter(is_active=True)
    allowed = (
        Q(is_superuser=True)
        | Q(groups__permissions__codename="review_result")
        | Q(user_permissions__codename="review_result")
    )
    return list(users.filter(allowed).distinct().order_by("username"))


def panel_context(
    request: HtmxHttpRequest,
    page: QueuePage,
    result_id: int | None,
    *,
    saved: str = "",
    error: InvalidInputError | None = None,
    posted: dict[str, Any] | None = None,
    end: bool = False,
) -> dict[str, Any]:
    """The page's context: the header, the progress and the panel of ``result_id`` (``None``: the
    first case of the filtered queue; ``end``: no case, the end of the queue; a result outside the
    queue's runs is a 404).

    The list stepped through is the filtered queue plus the cases reviewed along the page's walk
    (:meth:`QueuePage.walk_items`): "case N of M" and "R reviewed by you" count over it, so they
    hold while reviewed cases leave ``unreviewed``. ``posted`` refills the form with what was
    typed (a refused review); ``saved`` and ``error`` are the confirmation and the refusal shown
    on the panel.
    """
    queue = page.queue
    items = queue.filtered(request.user, page.queue_filter)
    shown = queue.with_walked(items, walked(request, page.walk) if page.walk else [])
    mine_done = set(
        Review.objects.filter(eval_run_id__in=queue.run_ids, reviewer_id=request.user.pk).values_list(
            "result_id", flat=True
        )
    )
    last = shown[-1] if shown else None
    can_review = access.can_review(request.user)
    context: dict[str, Any] = {
        **page.header,
        "filter": page.queue_filter,
        "filters": QUEUE_FILTERS,
        "page_url": page.page_url,
        "assign_url": page.assign_url,
        "export_urls": page.export_urls(),
        "progress": review_progress(queue.runs),
        "n_items": len(items),
        "n_queue": len(shown),
        "n_done": sum(1 for item in shown if item.result_id in mine_done),
        "at_end": bool(shown) and (end or not items) and result_id is None,
        "previous_url": page.url(last.result_id) if last and result_id is None else "",
        "next_url": "",
        "saved": saved,
        "error": error,
        "axes": AXES,
        "verdicts": ReviewVerdict.values,
        "can_review": can_review,
        "result": None,
        "reviewers": reviewers() if can_review else [],
    }
    wanted = result_id if result_id is not None else (items[0].result_id if items and not end else None)
    if wanted is None:
        return context
    result = get_object_or_404(
        EvalResult.objects.select_related("run", "eval_run"), pk=wanted, eval_run_id__in=queue.run_ids
    )
    eval_run = result.eval_run
    case = EvalCase.objects.filter(eval_set_id=eval_run.eval_set_id, case_id=result.case_id).first()
    reviews = result_reviews(result)
    mine = next((r for r in reviews if r.reviewer_id == request.user.pk), None)
    previous = queue.step(result.pk, shown, -1)
    following = queue.step(result.pk, shown, 1)
    current = queue.find(result.pk)
    form = posted or {
        "verdict": mine.verdict if mine else "",
        "axis_scores": dict(mine.axis_scores) if mine else {},
        "comment": mine.comment if mine else "",
    }
    context.update(
        result=result,
        result_run=eval_run,
        case=case,
        expected=scored_expected(result, case, eval_run),
        reason=current.reason if current else "",
        position=next((n for n, i in enumerate(shown, 1) if i.result_id == result.pk), None),
        at_end=False,
        mine=mine,
        others=[r for r in reviews if r.reviewer_id != request.user.pk],
        assignees=[a.assignee.get_username() for a in result.assignments.select_related("assignee")],
        form=form,
        axis_rows=[(axis, form["axis_scores"].get(axis)) for axis in AXES],
        previous_url=page.url(previous.result_id) if previous else "",
        next_url=page.url(following.result_id) if following else "",
        save_url=page.save_url(result.pk),
        here_url=page.url(result.pk),
    )
    return context


def queue_page(request: HtmxHttpRequest, page: QueuePage) -> HttpResponse:
    """The queue page at its ``?result=`` (else its first case); an HTMX request aimed at
    ``#review-panel`` gets the panel alone."""
    raw = request.GET.get("result") or ""
    page.walk = walk_of(request)
    result_id = ascii_int(raw)
    context = panel_context(request, page, result_id, end=result_id is None and request.GET.get("end") == "1")
    return render_page(request, "evals/review.html", context, {"review-panel": "panel"})


def _posted_review(request: HtmxHttpRequest) -> dict[str, Any]:
    axis_scores: dict[str, Any] = {}
    for axis in AXES:
        raw = (request.POST.get(f"axis_{axis}") or "").strip()
        if raw:
            # not a number in ASCII digits ("--5", "²", "١", 5,000 digits): kept as typed, so the
            # check names the axis in a 400 ("accuracy must be an integer 0..5")
            number = ascii_int(raw, negative=True)
            axis_scores[axis] = number if number is not None else raw
    return {
        "verdict": request.POST.get("verdict") or "",
        "axis_scores": axis_scores,
        "comment": request.POST.get("comment") or "",
    }


def _what(posted: dict[str, Any]) -> str:
    if posted["verdict"]:
        return str(posted["verdict"])
    given = {"axis scores": posted["axis_scores"], "comment": posted["comment"].strip()}
    return "no verdict: " + " and ".join(part for part, value in given.items() if value)


def save_and_answer(request: HtmxHttpRequest, page: QueuePage, result_id: int) -> HttpResponse:
    """Save the caller's review of ``result_id`` (members) and answer the panel: the same case
    with "saved", or with ``go=next|prev`` the next / previous case of the queue (the verdict keys
    post ``go=next``: one keystroke saves and moves on); ``go=next`` on the last case answers the
    end of the queue ("all M reviewed"). The saved case joins the page's walk (:func:`remember`),
    so ``k`` comes back to it after the filter dropped it. A refused review answers 400 with the
    form as typed and the error, the case unchanged (nothing moves on). A post without HTMX (no
    script) is answered as a page: redirected to the case to show next, "saved" as a message; a
    refusal as the whole page."""
    if not access.can_review(request.user):
        return HttpResponse("only members can review results", status=403)
    result = get_object_or_404(EvalResult, pk=result_id, eval_run_id__in=page.queue.run_ids)
    page.walk = walk_of(request)
    posted = _posted_review(request)
    # without HTMX (no script) the form posts as a page: the answer is a page too
    template = "evals/review.html#panel" if request.htmx else "evals/review.html"
    try:
        save_review(result, request.user, **posted)
    except InvalidInputError as exc:
        context = panel_context(request, page, result.pk, error=exc, posted=posted)
        return TemplateResponse(request, template, context, status=400)
    remember(request, page.walk, result.pk)
    saved = f"Saved your review of {result.case_id} ({_what(posted)}) at {timezone.localtime():%H:%M:%S}."
    go = request.POST.get("go")
    target: int | None = result.pk
    end = False
    if go in ("next", "prev"):
        moved = page.queue.step(result.pk, page.walk_items(request), 1 if go == "next" else -1)
        if moved is not None:
            target = moved.result_id
        elif go == "next":
            target, end = None, True
            saved += " That was the last case of this queue."
        else:
            saved += " That was the first case of this queue."
    if not request.htmx:
        messages.success(request, saved)
        return redirect(page.url(target, end=end))
    context = panel_context(request, page, target, saved=saved, end=end)
    response = TemplateResponse(request, template, context)
    response["HX-Push-Url"] = page.url(target, end=end)
    return response


def assign_and_return(request: HtmxHttpRequest, page: QueuePage) -> HttpResponse:
    """Hand the cases of the page's queue (its filter) to the posted reviewers in turn (members),
    then back to the queue with a message."""
    if not access.can_review(request.user):
        return HttpResponse("only members can assign reviews", status=403)
    wanted = set(request.POST.getlist("assignees"))
    people = [user for user in reviewers() if user.get_username() in wanted]
    items = page.queue.filtered(request.user, page.queue_filter)
    try:
        made = assign_results([i.result_id for i in items], people, by=request.user)
    except InvalidInputError as exc:
        messages.error(request, f"Not assigned: {exc}")
    else:
        names = ", ".join(u.get_username() for u in people)
        messages.success(request, f"Assigned {made} case{'s' if made != 1 else ''} of this queue to {names}.")
    return redirect(page.url())
