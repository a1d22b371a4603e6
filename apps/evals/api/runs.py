"""The run routes of the evals API (mounted at ``/api/eval/`` by ``evalsite.api``): start, resume,
cancel, list, read, edit and delete a run, and its per-rule aggregates (``/runs...``).

Thin operations: check the role, read through :mod:`apps.evals.queries` (the same selectors as
the pages), write through :mod:`apps.evals.runs` (and :mod:`apps.evals.worker.tasks` for runs
started or resumed here). The run list is paginated (:class:`~apps.evals.api.pagination.Pages`);
run detail never loads a whole run's results. Domain errors (``evalcore.errors.EvalsiteError``)
propagate and are mapped to 400/404/409 once, in ``evalsite.api``. The operation ids are the ones
these routes had in ``api/routes.py`` before it was split per area (issue 24).

No ``from __future__ import annotations`` here: ninja's ``paginate`` wrapper reads the route's
parameter annotations from its own module, so they must be real objects, not strings.
"""

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse
from ninja import Query, Router
from ninja.pagination import paginate
from ninja.responses import Status

from apps.agents.registry import load_target
from apps.core import access
from apps.core.auth import role_powers, scope_note
from apps.core.models import Scope
from apps.evals.api.common import ERRORS, READ_ERRORS, api_user, get_or_404, require, require_view
from apps.evals.api.pagination import Pages
from apps.evals.api.rule_schemas import RunRulesOut
from apps.evals.api.run_schemas import RunDeletedOut, RunEditIn
from apps.evals.api.schemas import (
    ApiError,
    ErrorOut,
    EvalRunDetailOut,
    EvalRunOut,
    ResultFilterIn,
    RunCreatedOut,
    RunFilterIn,
    RunIn,
)
from apps.evals.models import EvalResult, EvalRun, EvalSet
from apps.evals.queries.results import filter_results, filtered_total, max_result_id, ordered_results
from apps.evals.queries.rules import run_rule_aggregates, uses_rules
from apps.evals.queries.runs import eval_run_history
from apps.evals.queries.search import ResultQuery, search_results
from apps.evals.runs.config import RunConfig, SimulatorConfig, read_run_config
from apps.evals.runs.edits import delete_eval_run, edit_eval_run, pin_baseline
from apps.evals.runs.liveness import show_apparent_status
from apps.evals.runs.prepare import prepare_eval_run
from apps.evals.runs.simulator import simulator_config_of
from apps.evals.worker.shards import cancel_run
from apps.evals.worker.tasks import EXECUTOR, QueueUnavailable, enqueue_eval_run, resume_in_worker
from apps.traces.access import run_visibility
from evalcore.errors import ConflictError, NotFoundError

router = Router(tags=["eval"])


@router.post(
    "/runs",
    response={201: RunCreatedOut, 503: ErrorOut, **ERRORS},
    summary="Start a run (members)",
    operation_id="apps_evals_api_routes_start_eval_run",
)
def start_eval_run(request: HttpRequest, data: RunIn) -> Any:
    user = require(request, access.can_start_runs, "start runs")
    eval_set = get_or_404(EvalSet, "set_id", pk=data.set_id)
    try:
        spec = load_target(data.target_id, settings.EVALSITE_AGENTS_DIR)
    except FileNotFoundError as exc:  # the agents folder itself is missing
        raise NotFoundError(str(exc), field="target_id") from exc
    eval_run = prepare_eval_run(  # an empty split: EmptySplitError, 400
        eval_set=eval_set,
        spec=spec,
        variant=data.variant or None,
        split=data.split,
        allow_test=data.allow_test,
        user=user,
        config=RunConfig(executor=EXECUTOR, simulator=_simulator_of(data)),
        name=data.name,
    )
    try:
        task_id = enqueue_eval_run(eval_run)
    except QueueUnavailable as exc:  # the run was deleted again: a 503 means nothing was created
        raise ApiError(503, exc.message) from None
    return Status(201, _queued_run(eval_run, task_id))


def _simulator_of(data: RunIn) -> SimulatorConfig | None:
    """The run's user simulator from the request (``None``: none asked for)."""
    given = data.simulator
    if given is None:
        return None
    return simulator_config_of(given.model, base_url=given.base_url, seed=given.seed, cache=given.cache)


@router.post(
    "/runs/{run_id}/resume",
    response={202: RunCreatedOut, 409: ErrorOut, **ERRORS},
    summary="Resume an interrupted or failed run in the task worker (members)",
    operation_id="apps_evals_api_routes_resume_eval_run",
)
def resume_eval_run(request: HttpRequest, run_id: str) -> Any:
    require(request, access.can_start_runs, "resume runs")
    eval_run = get_or_404(EvalRun.objects.select_related("eval_set"), "run_id", pk=run_id)
    task_id = resume_in_worker(eval_run)  # RunBusy: 409, ResumeRefused: 400
    return Status(202, _queued_run(eval_run, task_id))


@router.post(
    "/runs/{run_id}/cancel",
    response={200: RunCreatedOut, 409: ErrorOut, **ERRORS},
    summary="Cancel a queued or running sharded run: shards not done are dropped, finished cases kept (members)",
    operation_id="apps_evals_api_routes_cancel_eval_run",
)
def cancel_eval_run(request: HttpRequest, run_id: str) -> Any:
    user = require(request, access.can_start_runs, "cancel runs")
    eval_run = get_or_404(EvalRun.objects.select_related("eval_set"), "run_id", pk=run_id)
    if not eval_run.n_shards:
        raise ConflictError(f"eval run {eval_run.id} is not sharded; only a sharded run can be cancelled")
    if cancel_run(eval_run, by=user.get_username()) is None:
        raise ConflictError(f"eval run {eval_run.id} is {eval_run.status}; only a live run can be cancelled")
    return Status(200, _queued_run(eval_run, None))


@router.get(
    "/runs",
    response={200: list[EvalRunOut], **READ_ERRORS},
    summary="Run history",
    operation_id="apps_evals_api_routes_list_eval_runs",
)
@paginate(Pages)
def list_eval_runs(request: HttpRequest, filters: Query[RunFilterIn]) -> Any:
    require_view(request)  # a read only: the sweeper marks dead runs (apps.evals.worker.sweeper)
    return eval_run_history(
        set_id=filters.set_id,
        target_id=filters.target_id,
        variant=filters.variant,
        split=filters.split,
        status=filters.status,
    )


@router.get(
    "/runs/{run_id}",
    response={200: EvalRunDetailOut, **READ_ERRORS},
    url_name="get_eval_run",
    summary="One run: summary and a page of per-case results",
    operation_id="apps_evals_api_routes_get_eval_run",
)
def get_eval_run(request: HttpRequest, run_id: str, filters: Query[ResultFilterIn]) -> Any:
    require_view(request)
    eval_run = get_or_404(EvalRun.objects.select_related("eval_set", "created_by"), "run_id", pk=run_id)
    show_apparent_status([eval_run])  # a dead run reads interrupted before a sweep writes it
    # Full rows (output and error included), unlike the page table's light queries.run_results.
    readable = EvalResult.objects.filter(eval_run=eval_run).select_related("run")
    readable = readable.filter(run_visibility(request.user, "run__"))
    results = filter_results(readable, status=filters.status, search=filters.search)
    query = ResultQuery.from_data(filters.dict())
    if query.active:
        results = search_results(results, eval_run, query)
    total = filtered_total(eval_run, results, filtered=bool(filters.status or filters.search or query.active))
    page = Pages.page_of(ordered_results(results, filters.order), filters.page, filters.page_size, total=total)
    return {
        "run": eval_run,
        "scorer_specs": eval_run.scorer_specs,
        "config": read_run_config(eval_run.config).stored(),
        "summary": eval_run.summary,
        "last_seq": max_result_id(eval_run),
        "results": page,
    }


@router.patch(
    "/runs/{run_id}",
    response={200: EvalRunOut, 409: ErrorOut, **ERRORS},
    summary="Name, notes, pinned baseline (members)",
    operation_id="apps_evals_api_routes_edit_eval_run_api",
)
def edit_eval_run_api(request: HttpRequest, run_id: str, data: RunEditIn) -> Any:
    require(request, access.can_start_runs, "edit runs")
    eval_run = get_or_404(EvalRun.objects.select_related("eval_set", "created_by"), "run_id", pk=run_id)
    edit_eval_run(eval_run, name=data.name, notes=data.notes)
    if data.pinned is not None:
        pin_baseline(eval_run, data.pinned)
    return eval_run


@router.delete(
    "/runs/{run_id}",
    response={200: RunDeletedOut, 409: ErrorOut, **ERRORS},
    summary="Delete a run with its results, reviews and own traces (staff; 409 while it runs)",
    operation_id="apps_evals_api_routes_delete_eval_run_api",
)
def delete_eval_run_api(request: HttpRequest, run_id: str) -> Any:
    user = api_user(request)
    if not getattr(user, "is_staff", False):
        if not getattr(role_powers(user), "is_staff", False):
            raise ApiError(403, f"only staff can delete runs: user {user.username!r} is not staff")
        raise ApiError(403, "only staff can delete runs" + scope_note(user, needs=Scope.ADMIN))
    eval_run = get_or_404(EvalRun, "run_id", pk=run_id)
    deleted = delete_eval_run(eval_run)  # ConflictError: 409
    return {"id": run_id, "results": deleted.results, "traces": deleted.traces}


@router.get(
    "/runs/{run_id}/rules",
    response={200: RunRulesOut, **READ_ERRORS},
    summary="Per-rule aggregates of a run (rule_adherence): honoured / ignored / absent shares, coverage",
    operation_id="apps_evals_api_routes_get_eval_run_rules",
)
def get_eval_run_rules(request: HttpRequest, run_id: str) -> Any:
    require_view(request)
    eval_run = get_or_404(EvalRun, "run_id", pk=run_id)
    return {"run_id": eval_run.pk, "uses_rules": uses_rules(eval_run), "rules": run_rule_aggregates(eval_run)}


def _queued_run(eval_run: EvalRun, task_id: str | None) -> dict[str, Any]:
    """The body of a run just queued (started or resumed): its id, status and where to follow it."""
    return {
        "id": eval_run.id,
        "name": eval_run.name,
        "status": eval_run.status,
        "url": reverse("evals:eval_run", args=[eval_run.id]),
        "api_url": reverse("api:get_eval_run", args=[eval_run.id]),
        "websocket_url": f"/ws/eval/runs/{eval_run.id}/",
        "n_total": eval_run.n_total,
        "task_id": task_id,
    }
