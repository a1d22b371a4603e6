"""Pages of eval runs: the history, one eval run (summary and case table), one case of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET, require_POST

from apps.core import access
from apps.core.access import member_required, viewer_required
from apps.core.pages import render_page
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalRunStatus, ResultStatus
from apps.evals.queries.conversations import attach_conversations, case_transcript, playing_turns
from apps.evals.queries.figures import LIVE_STATUSES
from apps.evals.queries.previews import attach_previews
from apps.evals.queries.results import latest_results, neighbours, run_results
from apps.evals.queries.reviews import result_reviews
from apps.evals.queries.rules import result_rules
from apps.evals.queries.run_table import run_rows, run_table
from apps.evals.queries.runs import eval_run_history, test_split_runs
from apps.evals.queries.search import ResultQuery, index_state
from apps.evals.runs.liveness import RunBusy, show_apparent_status
from apps.evals.runs.resume import ResumeRefused
from apps.evals.sets.versions import current_version
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.forms import ResultFilterForm, RunFilterForm
from apps.evals.views.live import LIVE_ROWS
from apps.evals.worker.caseruns import CaseRunRefused, start_case_run, target_here
from apps.evals.worker.shards import cancel_run
from apps.evals.worker.tasks import resume_in_worker
from apps.traces.access import run_visibility
from apps.traces.queries import span_tree
from evalcore.errors import InvalidInputError
from evalcore.jsonvalue import MISSING
from evalcore.types import expected_hash

RESUMABLE_STATUSES = (EvalRunStatus.INTERRUPTED, EvalRunStatus.FAILED)


@dataclass(slots=True)
class ScoredExpected:
    """The expected value a result was scored against, and how the set's case differs today.

    Attributes:
        has: The result was scored against an expected value (``False``: the case had none).
        value: That value.
        recorded: Stored with the result; ``False`` for results stored before that, whose
            expected value can only be read from today's set.
        changed: The set's case differs today (edited expected value, or removed).
        today_has, today: Today's expected value of the case (when it still exists).
        case_gone: The case is no longer in the set.
        set_changed: The set differs from the one the run was scored on; when it does not, a
            difference came with the run itself (an imported Inspect run keeps the target its
            log scored against), and the page must not say the set changed.
    """

    has: bool
    value: Any
    recorded: bool
    changed: bool
    today_has: bool = False
    today: Any = None
    case_gone: bool = False
    set_changed: bool = True


def scored_expected(result: EvalResult, case: EvalCase | None, eval_run: EvalRun) -> ScoredExpected:
    """What ``result`` was scored against (see :class:`ScoredExpected`)."""
    today_has = bool(case and case.has_expected)
    today = case.expected if case and case.has_expected else None
    if not result.expected_recorded:
        # older result: only today's value exists; the run's set hash tells whether the set moved
        changed = case is None or bool(eval_run.set_hash and eval_run.set_hash != eval_run.eval_set.content_hash)
        return ScoredExpected(today_has, today, False, changed, today_has, today, case is None)
    today_hash = expected_hash(today if today_has else MISSING) if case is not None else None
    return ScoredExpected(
        has=not result.expected_missing,
        value=result.expected,
        recorded=True,
        changed=today_hash != result.expected_hash,
        today_has=today_has,
        today=today,
        case_gone=case is None,
        set_changed=case is None or eval_run.set_hash != eval_run.eval_set.content_hash,
    )


def _get_eval_run(run_id: str) -> EvalRun:
    """The eval run (404 when missing); access is checked by the decorators (roles are global)."""
    return get_object_or_404(EvalRun.objects.select_related("eval_set", "created_by", "set_version"), pk=run_id)


@require_GET
def home(request: HtmxHttpRequest) -> HttpResponse:
    return redirect("evals:eval_runs")


@require_GET
@viewer_required
def eval_run_list(request: HtmxHttpRequest) -> HttpResponse:
    """All eval runs, filtered (set, target, variant, split, status), newest first, paginated.

    A read only: runs whose process died are marked interrupted by the sweeper
    (``apps.evals.worker.sweeper``), not here."""
    form = RunFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    sort = data.get("sort") or ""
    history = eval_run_history(
        set_id=data["set"].pk if data.get("set") else None,
        target_id=data.get("target") or None,
        variant=data.get("variant") or None,
        split=data.get("split") or None,
        status=data.get("status") or None,
    )
    page = Paginator(run_table(history, sort), 50).get_page(data.get("page") or 1)
    runs = list(page.object_list)
    show_apparent_status(runs)  # a dead run reads interrupted before a sweep writes it
    context = {"form": form, "page": page, "rows": run_rows(runs), "columns": sort_columns(sort)}
    return render_page(request, "evals/runs.html", context, {"runs-table": "table"})


@dataclass(frozen=True, slots=True)
class SortColumn:
    """A sortable column head of the runs table: its label, the ``?sort=`` a click asks for
    (the other direction when it is the current order) and the arrow showing the current one."""

    label: str
    sort: str
    arrow: str
    numeric: bool


_SORTABLE = (
    ("name", "name", "name", False),
    ("pass rate", "-pass_rate", "pass_rate", True),
    ("duration", "-duration", "duration", True),
    ("tokens", "-tokens", "tokens", True),
    ("cost", "-cost", "cost", True),
    ("model", "model", "model", False),
)
"""(label, first click's sort, its key, numeric) of each sortable column; numbers sort high first."""


def sort_columns(current: str) -> dict[str, SortColumn]:
    """The sortable column heads by key, for the current ``?sort=``."""
    columns = {}
    for label, first, key, numeric in _SORTABLE:
        if current.lstrip("-") == key:
            descending = current.startswith("-")
            columns[key] = SortColumn(label, key if descending else f"-{key}", "↓" if descending else "↑", numeric)
        else:
            columns[key] = SortColumn(label, first, "", numeric)
    return columns


@require_GET
@viewer_required
def eval_run_detail(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """A run: summary, per-split aggregates, and one page of the case table (never all of it).

    An interrupted or failed run offers members a resume button (see :func:`resume_eval_run`).
    A read only: dead runs, lapsed shards and the search index are the sweeper's
    (``apps.evals.worker.sweeper``); a text search the index does not cover yet says "indexing…".
    """
    eval_run = _get_eval_run(run_id)
    show_apparent_status([eval_run])  # a dead run reads interrupted (resumable) before a sweep writes it
    form = ResultFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    status, search, order, page = (
        data.get("status") or None,
        data.get("q") or None,
        data.get("order") or None,
        data.get("page") or 1,
    )
    try:
        query = ResultQuery.from_data(data)
        results = run_results(eval_run, status=status, search=search, order=order, page=page, query=query)
    except InvalidInputError as exc:  # a malformed metadata filter or an inverted range
        form.add_error(None, str(exc))
        results = run_results(eval_run, status=status, search=search, order=order, page=page)
    attach_previews(results.rows)  # one query: the page's rows only, each JSON column cut in SQL
    attach_conversations(results.rows)  # one query: a conversation's turn count and first failing turn
    # case links keep the filter, so "next case" steps through e.g. the failures only
    case_filter = {k: data[k] for k in ("status", "q") if data.get(k)}
    live = eval_run.status in LIVE_STATUSES
    context = {
        "eval_run": eval_run,
        "form": form,
        "results": results,
        "case_qs": urlencode(case_filter),
        "live": live,
        "can_resume": eval_run.status in RESUMABLE_STATUSES
        and not eval_run.source_eval_run_id
        and access.can_start_runs(request.user),
        "can_cancel": bool(eval_run.n_shards) and live and access.can_start_runs(request.user),
        # a live run shows its newest cases in a bounded block the websocket replaces whole
        "latest": latest_results(eval_run, LIVE_ROWS) if live else [],
        "playing": playing_turns(eval_run) if live else [],  # conversations in flight: turns done
        "live_rows": LIVE_ROWS,
        "test_runs": test_split_runs(eval_run.eval_set, variant=eval_run.variant, target_id=eval_run.target_id),
        "search_index": index_state(eval_run, data.get("text") or "") if data.get("text") else None,
    }
    return render_page(request, "evals/run_detail.html", context, {"results": "results", "run-summary": "summary"})


@require_POST
@member_required
def resume_eval_run(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Queue the remaining cases of an interrupted or failed run for the task worker (members).

    Any run can be resumed here, whatever started it (CLI, portal, another host): the target
    comes from the agents folder recorded on the run. Refusals (another process holds it, the
    set changed, the judge's options are needed) come back as a message on the run page.
    """
    eval_run = _get_eval_run(run_id)
    try:
        resume_in_worker(eval_run)
    except (RunBusy, ResumeRefused) as exc:
        messages.error(request, f"Not resumed: {exc}")
    else:
        messages.success(request, f"Resuming: {eval_run.n_total - eval_run.n_done} remaining case(s) queued.")
    return redirect("evals:eval_run", run_id=eval_run.pk)


@require_POST
@member_required
def cancel_eval_run(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Cancel a queued or running sharded run (members): its shards not yet done are dropped,
    the finished cases kept; the run is interrupted and can be resumed."""
    eval_run = _get_eval_run(run_id)
    if not eval_run.n_shards:
        messages.error(request, "Only a sharded run can be cancelled here.")
    elif cancel_run(eval_run, by=request.user.get_username()) is not None:
        messages.success(request, f"Cancelled: {eval_run.n_done} finished case(s) kept.")
    else:
        messages.error(request, f"Not cancelled: the run is {eval_run.status}.")
    return redirect("evals:eval_run", run_id=eval_run.pk)


@require_GET
@viewer_required
def result_detail(request: HtmxHttpRequest, run_id: str, result_id: int) -> HttpResponse:
    """One case of a run: actual vs expected diff (a conversation case: its transcript, turn by
    turn), every score, each rule's outcome (with the ``rule_adherence`` scorer), and the trace
    as a span tree."""
    eval_run = _get_eval_run(run_id)
    readable = EvalResult.objects.select_related("run").filter(run_visibility(request.user, "run__"))
    result = get_object_or_404(readable, pk=result_id, eval_run=eval_run)
    case = EvalCase.objects.filter(eval_set_id=eval_run.eval_set_id, case_id=result.case_id).first()
    # previous / next within the filter the list was showing (status, case-id search)
    status = request.GET.get("status") if request.GET.get("status") in ResultStatus.values else None
    search = (request.GET.get("q") or "").strip()[:200] or None
    previous, following = neighbours(result, status=status, search=search)
    case_filter = {k: v for k, v in (("status", status), ("q", search)) if v}
    expected = scored_expected(result, case, eval_run)
    context = {
        "case_qs": urlencode(case_filter),
        "filter_label": " · ".join(f"{k}: {v}" for k, v in case_filter.items()),
        "eval_run": eval_run,
        "result": result,
        "outcome": result.outcome,
        "case": case,
        "expected": expected,
        "transcript": case_transcript(result, case, expected.value if expected.has else MISSING),
        "tree": span_tree(result.run),
        "rules": result_rules(result),
        "reviews": result_reviews(result),
        "current_version": current_version(eval_run.eval_set),
        "previous": previous,
        "next": following,
        "target_here": target_here(eval_run.target_id, eval_run.variant),
    }
    return render_page(request, "evals/result_detail.html", context)


@require_POST
@member_required
def rerun_case(request: HtmxHttpRequest, run_id: str, result_id: int) -> HttpResponse:
    """Run this one case again with the run's target and variant; go to the new run's page."""
    eval_run = _get_eval_run(run_id)
    result = get_object_or_404(EvalResult, pk=result_id, eval_run=eval_run)
    try:
        new_run = start_case_run(
            eval_set=eval_run.eval_set,
            case_id=result.case_id,
            target_id=eval_run.target_id,
            variant=eval_run.variant,
            user=request.user,
        )
    except CaseRunRefused as exc:
        messages.error(request, f"could not re-run case {result.case_id!r}: {exc}")
        return redirect("evals:result", eval_run.pk, result.pk)
    return redirect("evals:eval_run", new_run.id)
