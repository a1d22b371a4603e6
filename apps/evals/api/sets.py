"""The set and case routes of the evals API (mounted at ``/api/eval/`` by ``evalsite.api``):
``GET /sets``, ``GET /sets/{id}/cases`` and ``GET /sets/{id}/cases/{case_id}/history``. Cases are
written through :mod:`apps.evals.api.conversations` (``POST /cases``, ``/cases/from-session``).

Thin operations, as every router here: check the role, read through :mod:`apps.evals.queries`
(the same selectors as the pages); domain errors (``evalcore.errors.EvalsiteError``) propagate
and are mapped to 400/404/409 once, in ``evalsite.api``. Routes that came from ``api/routes.py``
keep the operation ids they had there (issue 24): clients generated from the OpenAPI document
keep working.

No ``from __future__ import annotations`` here: ninja's ``paginate`` wrapper reads the route's
parameter annotations from its own module, so they must be real objects, not strings.
"""

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from ninja.pagination import paginate

from apps.evals.api.common import ERRORS, READ_ERRORS, get_or_404, require_view
from apps.evals.api.leaderboard_schemas import LeaderboardIn, LeaderboardOut
from apps.evals.api.pagination import Pages
from apps.evals.api.schemas import CaseFilterIn, EvalCaseOut
from apps.evals.api.set_schemas import CaseHistoryOut, EvalSetOut, SetFilterIn
from apps.evals.models import EvalSet
from apps.evals.queries.case_history import case_history, case_in_set
from apps.evals.queries.leaderboard import board_record, leaderboard
from apps.evals.queries.sets import set_cases, set_listing
from evalcore.errors import InvalidInputError, NotFoundError

router = Router(tags=["eval"])


@router.get(
    "/sets",
    response={200: list[EvalSetOut], **READ_ERRORS},
    summary="Eval sets with per-split case counts (paginated)",
    operation_id="apps_evals_api_routes_list_sets",
)
@paginate(Pages)
def list_sets(request: HttpRequest, filters: Query[SetFilterIn]) -> Any:
    require_view(request)
    return set_listing(name=filters.name)


@router.get(
    "/sets/{set_id}/cases",
    response={200: list[EvalCaseOut], **READ_ERRORS},
    summary="Browse a set's cases",
    operation_id="apps_evals_api_routes_list_cases",
)
@paginate(Pages)
def list_cases(request: HttpRequest, set_id: int, filters: Query[CaseFilterIn]) -> Any:
    require_view(request)
    eval_set = get_or_404(EvalSet, "set_id", pk=set_id)
    return set_cases(eval_set, split=filters.split, tag=filters.tag)


@router.get(
    "/sets/{set_id}/cases/{path:case_id}/history",
    response={200: list[CaseHistoryOut], **READ_ERRORS},
    summary="One case across runs: every run that scored it, newest first (paginated)",
    operation_id="apps_evals_api_sets_case_history",
)
@paginate(Pages)
def get_case_history(request: HttpRequest, set_id: int, case_id: str) -> Any:
    require_view(request)
    eval_set = get_or_404(EvalSet, "set_id", pk=set_id)
    results = case_history(eval_set, case_id, request.user)
    if case_in_set(eval_set, case_id) is None and not results.exists():
        raise NotFoundError(f"set {eval_set.name!r} has no case {case_id!r} and no run scored one", field="case_id")
    return results


@router.get(
    "/sets/{set_id}/leaderboard",
    response={200: LeaderboardOut, **ERRORS},
    summary="A set's leaderboard on one split: the latest finished run per (target, variant) with intervals",
    operation_id="apps_evals_api_sets_leaderboard",
)
def get_leaderboard(request: HttpRequest, set_id: int, filters: Query[LeaderboardIn]) -> Any:
    require_view(request)
    eval_set = get_or_404(EvalSet, "set_id", pk=set_id)
    if filters.split not in ("train", "dev", "test", "all"):
        raise InvalidInputError(f"split must be train, dev, test or all, got {filters.split!r}", field="split")
    return board_record(leaderboard(eval_set, filters.split))
