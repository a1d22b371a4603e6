"""The ledger routes: a run's scorer / judge invocations and their summary, a set's flakiness.

No ``from __future__ import annotations`` here: ninja's ``paginate`` wrapper reads the route's
annotations at import time (a string ``Query[...]`` is left undefined).
"""

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from ninja.pagination import paginate

from apps.evals.api.common import ERRORS, READ_ERRORS, get_or_404, require_view
from apps.evals.api.ledger_schemas import (
    FlakinessIn,
    FlakinessOut,
    InvocationFilterIn,
    InvocationOut,
    RunLedgerOut,
    as_record,
)
from apps.evals.api.pagination import Pages
from apps.evals.models import EvalRun, EvalSet, InvocationStatus
from apps.evals.queries.flakiness import flakiness
from apps.evals.queries.ledger import run_invocations, run_ledger
from evalcore.errors import InvalidInputError

router = Router(tags=["eval"])


@router.get(
    "/runs/{run_id}/ledger",
    response={200: list[InvocationOut], **ERRORS},
    summary="A run's scorer and judge invocations: status, reason, latency, tokens (paginated)",
    operation_id="apps_evals_api_ledger_list_invocations",
)
@paginate(Pages)
def list_invocations(request: HttpRequest, run_id: str, filters: Query[InvocationFilterIn]) -> Any:
    require_view(request)
    eval_run = get_or_404(EvalRun, "run_id", pk=run_id)
    if filters.status and filters.status not in InvocationStatus.values:
        raise InvalidInputError(
            f"status must be one of {', '.join(InvocationStatus.values)}, got {filters.status!r}", field="status"
        )
    return run_invocations(eval_run, status=filters.status, scorer=filters.scorer)


@router.get(
    "/runs/{run_id}/ledger/summary",
    response={200: RunLedgerOut, **READ_ERRORS},
    summary="A run's ledger per scorer (by status and reason, coverage) and the judge's cost",
    operation_id="apps_evals_api_ledger_summary",
)
def ledger_summary(request: HttpRequest, run_id: str) -> Any:
    require_view(request)
    return as_record(run_ledger(get_or_404(EvalRun, "run_id", pk=run_id)))


@router.get(
    "/sets/{set_id}/flakiness",
    response={200: FlakinessOut, **READ_ERRORS},
    summary="A set's flaky verdicts: flip rates per score and axis across repeats, samples and reruns",
    operation_id="apps_evals_api_ledger_flakiness",
)
def set_flakiness(request: HttpRequest, set_id: int, filters: Query[FlakinessIn]) -> Any:
    require_view(request)
    eval_set = get_or_404(EvalSet, "set_id", pk=set_id)
    return as_record(flakiness(eval_set, judge_model=filters.judge.strip()))
