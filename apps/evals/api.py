"""The evals JSON API (mounted at ``/api/eval/`` by ``evalsite.api``).

Thin operations: check the role, read with paginated queries, write through ``services`` (and
``tasks`` for runs started here). Every list is paginated; run detail and compare never load a
whole run's results. Domain errors raised by services are mapped to JSON once, in
``evalsite.api``; :class:`~apps.evals.schemas.ApiError` names the field at fault.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Model, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from ninja import Query, Router
from ninja.responses import Status

from apps.agents.models import Session
from apps.agents.registry import load_target
from apps.core import access
from apps.evals import queries
from apps.evals.capture import DuplicateCaseError, capture_session_as_case, captured_defaults
from apps.evals.liveness import RunBusy, mark_stale_runs
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from apps.evals.prepare import prepare_eval_run
from apps.evals.resume import ResumeRefused
from apps.evals.schemas import (
    ApiError,
    CaptureIn,
    CaseFilterIn,
    CasePageOut,
    CompareIn,
    CompareOut,
    ErrorOut,
    EvalCaseOut,
    EvalRunDetailOut,
    EvalSetOut,
    ResultFilterIn,
    RunCreatedOut,
    RunFilterIn,
    RunIn,
    RunPageOut,
)
from apps.evals.tasks import EXECUTOR, enqueue_eval_run, resume_in_worker
from apps.traces.access import run_visibility

router = Router(tags=["eval"])

ERRORS: dict[int, Any] = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}
READ_ERRORS = {k: v for k, v in ERRORS.items() if k != 400}


# -- access and small helpers -----------------------------------------------------------------


def _user(request: HttpRequest) -> Any:
    return getattr(request, "auth", None) or request.user


def _require_view(request: HttpRequest) -> Any:
    user = _user(request)
    if not access.can_view(user):
        raise ApiError(403, "your account has no role that can read eval runs (ask for viewer)")
    return user


def _require(request: HttpRequest, allowed: bool, action: str) -> Any:
    if not allowed:
        raise ApiError(403, f"only members can {action}")
    return _user(request)


def _get_or_404(source: type[Model] | QuerySet, field: str, **lookup: Any) -> Any:
    """The one row matching ``lookup``, or a 404 naming ``field``."""
    qs = source if isinstance(source, QuerySet) else source._default_manager.all()
    obj = qs.filter(**lookup).first()
    if obj is None:
        value = next(iter(lookup.values()))
        raise ApiError(404, f"no {qs.model._meta.verbose_name} with id {value!r}", field)
    return obj


def _page(qs: QuerySet, page: int, page_size: int, total: int | None = None) -> dict[str, Any]:
    """Slice one page from an ordered queryset: ``{items, page, page_size, total, pages}``."""
    total = qs.count() if total is None else total
    start = (page - 1) * page_size
    items = list(qs[start : start + page_size]) if start < total else []
    return {
        "items": items,
        "page": page,
        "page_size": page_size,
        "total": total,
        "pages": max(1, math.ceil(total / page_size)),
    }


def run_page_url(eval_run_id: str) -> str:
    """The browser page of a run (the pages app's URL when it is installed)."""
    for name in ("evals:run", "evals:run_detail"):
        try:
            return reverse(name, args=[eval_run_id])
        except NoReverseMatch:
            continue
    return f"/runs/{eval_run_id}/"


def _run_out(run: EvalRun) -> dict[str, Any]:
    return {
        "id": run.id,
        "set_id": run.eval_set_id,
        "set_name": run.eval_set.name,
        "target_id": run.target_id,
        "variant": run.variant,
        "split": run.split,
        "model": run.model,
        "git_sha": run.git_sha,
        "git_dirty": run.git_dirty,
        "status": run.status,
        "started": run.started,
        "finished": run.finished,
        "n_total": run.n_total,
        "n_done": run.n_done,
        "n_passed": run.n_passed,
        "n_failed": run.n_failed,
        "n_errored": run.n_errored,
        "n_unscored": run.n_unscored,
        "pass_rate": run.pass_rate,
        "source_eval_run_id": run.source_eval_run_id,
        "created_by": run.created_by.get_username() if run.created_by else None,
        "error": run.error,
        "heartbeat_at": run.heartbeat_at,
        "executor": f"PID {run.executor_pid} on {run.executor_host}" if run.executor_pid else "",
    }


def result_out(result: EvalResult) -> dict[str, Any]:
    """One result row as the API (and the JSON websocket fallback) shows it; needs ``run``."""
    run = result.run
    return {
        "seq": result.pk,
        "case_id": result.case_id,
        "repeat_index": result.repeat_index,
        "split": result.split,
        "status": result.status,
        "reason": result.outcome.reason.value,
        "passed": result.passed,
        "score": result.score,
        "scores": result.scores,
        "run_id": run.run_id,
        "trace_id": run.trace_id,
        "output": run.final_answer,
        "expected": result.expected,
        "expected_hash": result.expected_hash,
        "error": run.error,
        "elapsed_ms": run.elapsed_ms,
        "tokens_in": run.tokens_in,
        "tokens_out": run.tokens_out,
    }


# -- sets and cases -----------------------------------------------------------------------------


@router.get("/sets", response={200: list[EvalSetOut], **READ_ERRORS}, summary="Eval sets with per-split case counts")
def list_sets(request: HttpRequest) -> Any:
    _require_view(request)
    counts: dict[int, dict[str, int]] = {}
    for row in EvalCase.objects.values("eval_set_id", "split").annotate(n=Count("id")).order_by():
        counts.setdefault(row["eval_set_id"], {})[row["split"]] = row["n"]
    out = []
    for eval_set in EvalSet.objects.order_by("name"):
        splits = {"train": 0, "dev": 0, "test": 0, **counts.get(eval_set.pk, {})}
        out.append(
            {
                "id": eval_set.pk,
                "name": eval_set.name,
                "description": eval_set.description,
                "source_path": eval_set.source_path,
                "n_cases": sum(splits.values()),
                "splits": splits,
                "created": eval_set.created,
                "updated": eval_set.updated,
            }
        )
    return out


@router.get("/sets/{set_id}/cases", response={200: CasePageOut, **READ_ERRORS}, summary="Browse a set's cases")
def list_cases(request: HttpRequest, set_id: int, filters: Query[CaseFilterIn]) -> Any:
    _require_view(request)
    eval_set = _get_or_404(EvalSet, "set_id", pk=set_id)
    cases = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id")
    if filters.split:
        cases = cases.filter(split=filters.split)
    if filters.tag:
        cases = cases.filter(queries.has_tag(filters.tag))
    return _page(cases, filters.page, filters.page_size)


# -- runs ---------------------------------------------------------------------------------------


@router.post("/runs", response={201: RunCreatedOut, **ERRORS}, summary="Start a run (members)")
def start_run(request: HttpRequest, data: RunIn) -> Any:
    user = _require(request, access.can_start_runs(_user(request)), "start runs")
    eval_set = _get_or_404(EvalSet, "set_id", pk=data.set_id)
    try:
        spec = load_target(data.target_id, settings.EVALSITE_AGENTS_DIR)
    except FileNotFoundError as exc:
        raise ApiError(404, str(exc), "target_id") from exc
    except LookupError as exc:
        raise ApiError(404, str(exc), "target_id") from exc
    eval_run = prepare_eval_run(
        eval_set=eval_set,
        spec=spec,
        variant=data.variant or None,
        split=data.split,
        allow_test=data.allow_test,
        user=user,
        extra_config={"executor": EXECUTOR},
    )
    task_id = enqueue_eval_run(eval_run)
    return Status(201, _queued_run(eval_run, task_id))


@router.post(
    "/runs/{run_id}/resume",
    response={202: RunCreatedOut, 409: ErrorOut, **ERRORS},
    summary="Resume an interrupted or failed run in the task worker (members)",
)
def resume_run(request: HttpRequest, run_id: str) -> Any:
    _require(request, access.can_start_runs(_user(request)), "resume runs")
    eval_run = _get_or_404(EvalRun.objects.select_related("eval_set"), "run_id", pk=run_id)
    try:
        task_id = resume_in_worker(eval_run)
    except RunBusy as exc:
        raise ApiError(409, str(exc)) from None
    except ResumeRefused as exc:
        raise ApiError(400, str(exc)) from None
    return Status(202, _queued_run(eval_run, task_id))


@router.get("/runs", response={200: RunPageOut, **READ_ERRORS}, summary="Run history")
def list_runs(request: HttpRequest, filters: Query[RunFilterIn]) -> Any:
    _require_view(request)
    mark_stale_runs()  # a run whose process died shows interrupted, not running
    runs = EvalRun.objects.select_related("eval_set", "created_by").order_by(F("started").desc(nulls_first=True), "id")
    for field, value in (
        ("eval_set_id", filters.set_id),
        ("target_id", filters.target_id),
        ("variant", filters.variant),
        ("split", filters.split),
        ("status", filters.status),
    ):
        if value is not None:
            runs = runs.filter(**{field: value})
    page = _page(runs, filters.page, filters.page_size)
    page["items"] = [_run_out(r) for r in page["items"]]
    return page


@router.get(
    "/runs/{run_id}",
    response={200: EvalRunDetailOut, **READ_ERRORS},
    url_name="get_run",
    summary="One run: summary and a page of per-case results",
)
def get_run(request: HttpRequest, run_id: str, filters: Query[ResultFilterIn]) -> Any:
    _require_view(request)
    mark_stale_runs()
    eval_run = _get_or_404(EvalRun.objects.select_related("eval_set", "created_by"), "run_id", pk=run_id)
    # Full rows (output and error included), unlike the page table's light queries.run_results.
    results = EvalResult.objects.filter(eval_run=eval_run).select_related("run")
    results = results.filter(run_visibility(request.user, "run__"))
    if filters.status:
        results = results.filter(status=filters.status)
    if filters.search:
        results = results.filter(case_id__icontains=filters.search)
    results = results.order_by(*queries.RESULT_ORDERS[filters.order or "arrival"])
    # The run's counters are the totals of the unfiltered list: no COUNT over 100k rows.
    total = eval_run.n_done if not (filters.status or filters.search) else None
    page = _page(results, filters.page, filters.page_size, total=total)
    page["items"] = [result_out(r) for r in page["items"]]
    last_seq = queries.max_result_id(eval_run)
    return {
        "run": _run_out(eval_run),
        "scorer_specs": eval_run.scorer_specs,
        "config": eval_run.config,
        "summary": eval_run.summary,
        "last_seq": last_seq,
        "results": page,
    }


def _side(result: EvalResult) -> dict[str, Any]:
    return {
        "seq": result.pk,
        "status": result.status,
        "passed": result.passed,
        "score": result.score,
        "run_id": result.run.run_id,
    }


def _interval(ci: Any) -> dict[str, Any] | None:
    if ci is None:
        return None
    return {f: getattr(ci, f) for f in ("estimate", "low", "high", "confidence", "resamples", "n")}


@router.get("/compare", response={200: CompareOut, **ERRORS}, summary="Two runs aligned per case (paginated)")
def compare(request: HttpRequest, params: Query[CompareIn]) -> Any:
    _require_view(request)
    runs = EvalRun.objects.select_related("eval_set", "created_by")
    run_a = _get_or_404(runs, "a", pk=params.a)
    run_b = _get_or_404(runs, "b", pk=params.b)
    try:
        view = queries.compare_runs(run_a, run_b, page=params.page, page_size=params.page_size, only=params.only)
        deltas = queries.scorer_deltas(run_a, run_b) if params.scorers else None
    except queries.CompareError as exc:
        raise ApiError(400, str(exc), "b") from exc
    counts = view.counts
    return {
        "a": _run_out(run_a),
        "b": _run_out(run_b),
        "counts": {
            "both": counts.both,
            "a_only": counts.a_only,
            "b_only": counts.b_only,
            "neither": counts.neither,
            "n": counts.n,
            "pass_rate_a": counts.pass_rate_a,
            "pass_rate_b": counts.pass_rate_b,
            "delta": counts.delta,
        },
        "only_a": view.only_a,
        "only_b": view.only_b,
        "pass_rate_interval": _interval(view.interval),
        "verdict": {f: getattr(view.verdict, f) for f in ("outcome", "text", "p_value", "significant")},
        "scorer_deltas": None
        if deltas is None
        else [
            {
                "name": d.name,
                "n": d.n,
                "mean_a": d.mean_a,
                "mean_b": d.mean_b,
                "delta": d.delta,
                "interval": _interval(d.interval),
            }
            for d in deltas
        ],
        "only": view.only,
        "items": [
            {
                "case_id": row.case_id,
                "repeat_index": row.repeat_index,
                "kind": row.kind,
                "score_delta": row.score_delta,
                "a": _side(row.a),
                "b": _side(row.b),
            }
            for row in view.rows
        ],
        "page": view.page,
        "page_size": view.page_size,
        "total": view.total,
        "pages": view.num_pages,
    }


# -- cases from the playground ----------------------------------------------------------------


@router.post("/cases/from-session", response={201: EvalCaseOut, **ERRORS}, summary="Capture a session as a case")
def capture_case(request: HttpRequest, data: CaptureIn) -> Any:
    user = _require(request, access.can_capture(_user(request)), "capture cases")
    # a member captures only their own conversations (staff any), as on the playground page
    owned = {} if user.is_staff else {"user": user}
    session = _get_or_404(Session, "session_id", pk=data.session_id, **owned)
    eval_set = _get_or_404(EvalSet, "set_id", pk=data.set_id)
    # Omitted input / expected take the captured conversation; an explicit "expected": null is
    # kept as given and means "no reference answer" (the only way to say so in this route).
    defaults = captured_defaults(session, eval_set)  # the expected value in the set's shape
    given = data.model_fields_set
    try:
        case = capture_session_as_case(
            session=session,
            eval_set=eval_set,
            split=data.split,
            tags=data.tags,
            case_id=data.case_id or f"session-{session.pk}",
            input=data.input if "input" in given else defaults["input"],
            expected=data.expected if "expected" in given else defaults["expected"],
            user=user,
        )
    except DuplicateCaseError as exc:
        raise ApiError(400, str(exc), "case_id") from exc
    except ValueError as exc:  # an expected value not in the shape of the set's cases, a bad split or id
        raise ApiError(400, str(exc), "expected" if "expect" in str(exc) else None) from exc
    return Status(201, case)


def _queued_run(eval_run: EvalRun, task_id: str | None) -> dict[str, Any]:
    """The body of a run just queued (started or resumed): its id, status and where to follow it."""
    return {
        "id": eval_run.id,
        "status": eval_run.status,
        "url": run_page_url(eval_run.id),
        "api_url": reverse("api:get_run", args=[eval_run.id]),
        "websocket_url": f"/ws/eval/runs/{eval_run.id}/",
        "n_total": eval_run.n_total,
        "task_id": task_id,
    }
