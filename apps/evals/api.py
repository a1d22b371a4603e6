"""The evals JSON API (mounted at ``/api/eval/`` by ``evalsite.api``).

Thin operations: check the role, read through :mod:`apps.evals.queries` (the same selectors as
the pages), write through ``prepare`` / ``capture`` (and ``tasks`` for runs started or resumed here). Every list is
paginated (:class:`~apps.evals.pagination.Pages`, ninja's pagination); run detail and compare
never load a whole run's results. Routes return model rows and query results; the ``XOut``
schemas shape them. Domain errors (``evalcore.errors.EvalsiteError``) propagate and are mapped
to 400/404/409 once, in ``evalsite.api``.

No ``from __future__ import annotations`` here: ninja's ``paginate`` wrapper reads the route's
parameter annotations from its own module, so they must be real objects, not strings.
"""

from typing import Any

from django.conf import settings
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from ninja import Query, Router
from ninja.pagination import paginate
from ninja.responses import Status

from apps.agents.models import Session
from apps.agents.registry import load_target
from apps.core import access
from apps.evals.capture import capture_session_as_case, captured_defaults
from apps.evals.liveness import mark_stale_runs
from apps.evals.models import EvalResult, EvalRun, EvalSet
from apps.evals.pagination import Pages
from apps.evals.prepare import prepare_eval_run
from apps.evals.queries import (
    eval_run_history,
    filter_results,
    filtered_total,
    max_result_id,
    ordered_results,
    set_cases,
    split_counts_by_set,
)
from apps.evals.queries.compare import compare_runs, scorer_deltas
from apps.evals.queries.reviews import judge_vs_people, result_reviews, review_progress
from apps.evals.queries.rules import compare_rules, run_rule_aggregates, uses_rules
from apps.evals.queries.slices import comparison_slices
from apps.evals.review_schemas import PeopleAgreementOut, ReviewIn, ReviewListOut, ReviewOut
from apps.evals.reviews import find_result, save_review
from apps.evals.rule_schemas import RuleCompareIn, RuleFlipsOut, RunRulesOut
from apps.evals.schemas import (
    ApiError,
    CaptureIn,
    CaseFilterIn,
    CompareIn,
    CompareOut,
    ErrorOut,
    EvalCaseOut,
    EvalRunDetailOut,
    EvalRunOut,
    EvalSetOut,
    ResultFilterIn,
    RunCreatedOut,
    RunFilterIn,
    RunIn,
)
from apps.evals.slice_schemas import SlicesOut
from apps.evals.tasks import EXECUTOR, enqueue_eval_run, resume_in_worker
from apps.traces.access import run_visibility
from evalcore.errors import NotFoundError
from evalcore.types import SPLITS

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


def _get_or_404(source: type[Model] | QuerySet[Any], field: str, **lookup: Any) -> Any:
    """The one row matching ``lookup``.

    Raises:
        NotFoundError: No such row (naming ``field``).
    """
    qs = source if isinstance(source, QuerySet) else source._default_manager.all()
    obj = qs.filter(**lookup).first()
    if obj is None:
        value = next(iter(lookup.values()))
        raise NotFoundError(f"no {qs.model._meta.verbose_name} with id {value!r}", field=field)
    return obj


# -- sets and cases -----------------------------------------------------------------------------


@router.get("/sets", response={200: list[EvalSetOut], **READ_ERRORS}, summary="Eval sets with per-split case counts")
def list_sets(request: HttpRequest) -> Any:
    _require_view(request)
    counts = split_counts_by_set()
    out = []
    for eval_set in EvalSet.objects.order_by("name"):
        splits = counts.get(eval_set.pk) or dict.fromkeys(SPLITS, 0)
        out.append(
            {
                "id": eval_set.pk,
                "name": eval_set.name,
                "description": eval_set.description,
                "source_path": eval_set.source_path,
                "n_cases": sum(splits.values()),
                "splits": splits,
                "split_aliases": eval_set.split_aliases or {},
                "created": eval_set.created,
                "updated": eval_set.updated,
            }
        )
    return out


@router.get("/sets/{set_id}/cases", response={200: list[EvalCaseOut], **READ_ERRORS}, summary="Browse a set's cases")
@paginate(Pages)
def list_cases(request: HttpRequest, set_id: int, filters: Query[CaseFilterIn]) -> Any:
    _require_view(request)
    eval_set = _get_or_404(EvalSet, "set_id", pk=set_id)
    return set_cases(eval_set, split=filters.split, tag=filters.tag)


# -- runs ---------------------------------------------------------------------------------------


@router.post("/runs", response={201: RunCreatedOut, **ERRORS}, summary="Start a run (members)")
def start_eval_run(request: HttpRequest, data: RunIn) -> Any:
    user = _require(request, access.can_start_runs(_user(request)), "start runs")
    eval_set = _get_or_404(EvalSet, "set_id", pk=data.set_id)
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
        extra_config={"executor": EXECUTOR},
    )
    task_id = enqueue_eval_run(eval_run)
    return Status(201, _queued_run(eval_run, task_id))


@router.post(
    "/runs/{run_id}/resume",
    response={202: RunCreatedOut, 409: ErrorOut, **ERRORS},
    summary="Resume an interrupted or failed run in the task worker (members)",
)
def resume_eval_run(request: HttpRequest, run_id: str) -> Any:
    _require(request, access.can_start_runs(_user(request)), "resume runs")
    eval_run = _get_or_404(EvalRun.objects.select_related("eval_set"), "run_id", pk=run_id)
    task_id = resume_in_worker(eval_run)  # RunBusy: 409, ResumeRefused: 400
    return Status(202, _queued_run(eval_run, task_id))


@router.get("/runs", response={200: list[EvalRunOut], **READ_ERRORS}, summary="Run history")
@paginate(Pages)
def list_eval_runs(request: HttpRequest, filters: Query[RunFilterIn]) -> Any:
    _require_view(request)
    mark_stale_runs()  # a run whose process died shows interrupted, not running
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
)
def get_eval_run(request: HttpRequest, run_id: str, filters: Query[ResultFilterIn]) -> Any:
    _require_view(request)
    mark_stale_runs()
    eval_run = _get_or_404(EvalRun.objects.select_related("eval_set", "created_by"), "run_id", pk=run_id)
    # Full rows (output and error included), unlike the page table's light queries.run_results.
    readable = EvalResult.objects.filter(eval_run=eval_run).select_related("run")
    readable = readable.filter(run_visibility(request.user, "run__"))
    results = filter_results(readable, status=filters.status, search=filters.search)
    total = filtered_total(eval_run, results, filtered=bool(filters.status or filters.search))
    page = Pages.page_of(ordered_results(results, filters.order), filters.page, filters.page_size, total=total)
    return {
        "run": eval_run,
        "scorer_specs": eval_run.scorer_specs,
        "config": eval_run.config,
        "summary": eval_run.summary,
        "last_seq": max_result_id(eval_run),
        "results": page,
    }


@router.get(
    "/runs/{run_id}/rules",
    response={200: RunRulesOut, **READ_ERRORS},
    summary="Per-rule aggregates of a run (rule_adherence): honoured / ignored / absent shares, coverage",
)
def get_eval_run_rules(request: HttpRequest, run_id: str) -> Any:
    _require_view(request)
    eval_run = _get_or_404(EvalRun, "run_id", pk=run_id)
    return {"run_id": eval_run.pk, "uses_rules": uses_rules(eval_run), "rules": run_rule_aggregates(eval_run)}


@router.get(
    "/compare/rules",
    response={200: RuleFlipsOut, **ERRORS},
    summary="Per-rule flips between two runs (e.g. honoured → rule_absent), counted, and a page of them",
)
def compare_rule_flips(request: HttpRequest, params: Query[RuleCompareIn]) -> Any:
    _require_view(request)
    runs = EvalRun.objects.select_related("eval_set")
    run_a = _get_or_404(runs, "a", pk=params.a)
    run_b = _get_or_404(runs, "b", pk=params.b)
    found = compare_rules(run_a, run_b)  # CompareError: 400
    total = len(found.flips)
    start = (params.page - 1) * params.page_size
    return {
        "a": run_a.pk,
        "b": run_b.pk,
        "uses_rules": found.uses_rules,
        "groups": found.groups,
        "items": found.flips[start : start + params.page_size],
        "page": params.page,
        "page_size": params.page_size,
        "total": total,
        "pages": max(1, -(-total // params.page_size)),
    }


@router.get("/compare", response={200: CompareOut, **ERRORS}, summary="Two runs aligned per case (paginated)")
def compare(request: HttpRequest, params: Query[CompareIn]) -> Any:
    _require_view(request)
    runs = EvalRun.objects.select_related("eval_set", "created_by")
    run_a = _get_or_404(runs, "a", pk=params.a)
    run_b = _get_or_404(runs, "b", pk=params.b)
    view = compare_runs(run_a, run_b, page=params.page, page_size=params.page_size, only=params.only)
    view.scorer_deltas = scorer_deltas(run_a, run_b) if params.scorers else None
    return view


@router.get(
    "/compare/slices",
    response={200: SlicesOut, **ERRORS},
    summary="Where did B change: the comparison by tag, split and metadata field, Holm-corrected, by contribution",
)
def compare_by_slice(request: HttpRequest, a: str, b: str) -> Any:
    _require_view(request)
    runs = EvalRun.objects.select_related("eval_set")
    run_a = _get_or_404(runs, "a", pk=a)
    run_b = _get_or_404(runs, "b", pk=b)
    return {"a": run_a.pk, "b": run_b.pk, "items": comparison_slices(run_a, run_b)}  # CompareError: 400


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
    case = capture_session_as_case(  # DuplicateCaseError, a bad expected value: 400
        session=session,
        eval_set=eval_set,
        split=data.split,
        tags=data.tags,
        case_id=data.case_id or f"session-{session.pk}",
        input=data.input if "input" in given else defaults["input"],
        expected=data.expected if "expected" in given else defaults["expected"],
        user=user,
    )
    return Status(201, case)


def _queued_run(eval_run: EvalRun, task_id: str | None) -> dict[str, Any]:
    """The body of a run just queued (started or resumed): its id, status and where to follow it."""
    return {
        "id": eval_run.id,
        "status": eval_run.status,
        "url": reverse("evals:eval_run", args=[eval_run.id]),
        "api_url": reverse("api:get_eval_run", args=[eval_run.id]),
        "websocket_url": f"/ws/eval/runs/{eval_run.id}/",
        "n_total": eval_run.n_total,
        "task_id": task_id,
    }


# -- human reviews (issue 13) -------------------------------------------------------------------


def _review_out(review: Any) -> dict[str, Any]:
    return {
        "id": review.pk,
        "run_id": review.eval_run_id,
        "case_id": review.case_id,
        "repeat_index": review.result.repeat_index,
        "reviewer": review.reviewer.get_username(),
        "verdict": review.verdict,
        "axis_scores": review.axis_scores or {},
        "comment": review.comment,
        "created": review.created,
        "updated": review.updated,
        "revisions": getattr(review, "n_revisions", None) or review.revisions.count(),
    }


@router.get(
    "/runs/{run_id}/cases/{path:case_id}/reviews",
    response={200: ReviewListOut, **READ_ERRORS},
    summary="People's reviews of one case of a run (viewers read)",
)
def list_case_reviews(request: HttpRequest, run_id: str, case_id: str, repeat: int = 0) -> Any:
    _require_view(request)
    result = find_result(run_id, case_id, repeat)
    items = [_review_out(r) for r in result_reviews(result)]
    return {"run_id": run_id, "case_id": case_id, "repeat_index": repeat, "items": items}


@router.post(
    "/runs/{run_id}/cases/{path:case_id}/reviews",
    response={200: ReviewOut, 201: ReviewOut, **ERRORS},
    summary="Review one case of a run, or edit your review (members; 201 when created)",
)
def post_case_review(request: HttpRequest, run_id: str, case_id: str, data: ReviewIn) -> Any:
    user = _require(request, access.can_review(_user(request)), "review results")
    result = find_result(run_id, case_id, data.repeat)
    review, created = save_review(
        result, user, verdict=data.verdict, axis_scores=data.axis_scores, comment=data.comment
    )
    review.result = result
    return Status(201 if created else 200, _review_out(review))


@router.get(
    "/runs/{run_id}/reviews/agreement",
    response={200: PeopleAgreementOut, **READ_ERRORS},
    summary="Judge and scorers vs people: accuracy, Cohen's kappa, per-axis gaps, Krippendorff's alpha",
)
def get_review_agreement(request: HttpRequest, run_id: str) -> Any:
    _require_view(request)
    eval_run = _get_or_404(EvalRun, "run_id", pk=run_id)
    found = judge_vs_people(eval_run)
    progress = review_progress(eval_run)
    return {
        "run_id": eval_run.pk,
        "reviewed": progress.reviewed,
        "total": progress.total,
        "labelled": found.labelled,
        "scorers": [
            {
                "name": s.name,
                "n": s.figures.n,
                "accuracy": s.figures.accuracy,
                "cohen_kappa": s.figures.cohen_kappa,
                "confusion": s.figures.confusion,
                "disagreements": s.disagreements,
            }
            for s in found.scorers
        ],
        "axes": found.axes,
        "alpha": found.alpha,
        "multi_rated": found.multi_rated,
    }
