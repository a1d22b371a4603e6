"""The compare routes of the evals API (mounted at ``/api/eval/`` by ``evalsite.api``):
``GET /compare`` (two runs aligned per case), ``GET /compare/rules`` (per-rule flips) and
``GET /compare/slices`` (where B changed). Viewers read.

Neither loads a whole run's results: the queries page the aligned cases. Domain errors
(``CompareError``: 400) are mapped once, in ``evalsite.api``. The operation ids are the ones
these routes had in ``api/routes.py`` before it was split per area (issue 24).
"""

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from apps.evals.api.common import ERRORS, get_or_404, require_view
from apps.evals.api.pagination import Pages
from apps.evals.api.rule_schemas import RuleCompareIn, RuleFlipsOut
from apps.evals.api.schemas import CompareIn, CompareOut
from apps.evals.api.slice_schemas import SlicesOut
from apps.evals.models import EvalRun
from apps.evals.queries.compare import compare_runs, scorer_deltas
from apps.evals.queries.rules import compare_rules
from apps.evals.queries.slices import comparison_slices

router = Router(tags=["eval"])


@router.get(
    "/compare/rules",
    response={200: RuleFlipsOut, **ERRORS},
    summary="Per-rule flips between two runs (e.g. honoured → rule_absent), counted, and a page of them",
    operation_id="apps_evals_api_routes_compare_rule_flips",
)
def compare_rule_flips(request: HttpRequest, params: Query[RuleCompareIn]) -> Any:
    run_a, run_b = _two_runs(request, params.a, params.b)
    found = compare_rules(run_a, run_b)  # CompareError: 400
    page = Pages.page_of(found.flips, params.page, params.page_size, total=len(found.flips))
    return {"a": run_a.pk, "b": run_b.pk, "uses_rules": found.uses_rules, "groups": found.groups, **page}


@router.get(
    "/compare",
    response={200: CompareOut, **ERRORS},
    summary="Two runs aligned per case (paginated)",
    operation_id="apps_evals_api_routes_compare",
)
def compare(request: HttpRequest, params: Query[CompareIn]) -> Any:
    run_a, run_b = _two_runs(request, params.a, params.b)
    view = compare_runs(run_a, run_b, page=params.page, page_size=params.page_size, only=params.only)
    view.scorer_deltas = scorer_deltas(run_a, run_b) if params.scorers else None
    return view


@router.get(
    "/compare/slices",
    response={200: SlicesOut, **ERRORS},
    summary="Where did B change: the comparison by tag, split and metadata field, Holm-corrected, by contribution",
    operation_id="apps_evals_api_routes_compare_by_slice",
)
def compare_by_slice(request: HttpRequest, a: str, b: str) -> Any:
    run_a, run_b = _two_runs(request, a, b)
    return {"a": run_a.pk, "b": run_b.pk, "items": comparison_slices(run_a, run_b)}  # CompareError: 400


def _two_runs(request: HttpRequest, a: str, b: str) -> tuple[EvalRun, EvalRun]:
    """Runs ``a`` and ``b`` (set and author joined), once the caller may read runs.

    Raises:
        ApiError: 403, the caller has no viewer role.
        NotFoundError: No run ``a`` or ``b`` (naming the parameter).
    """
    require_view(request)
    runs = EvalRun.objects.select_related("eval_set", "created_by")
    return get_or_404(runs, "a", pk=a), get_or_404(runs, "b", pk=b)
