"""The compare routes of the evals API (mounted at ``/api/eval/`` by ``evalsite.api``):
``GET /compare`` (two runs aligned per case), ``GET /compare/rules`` (per-rule flips) and
``GET /compare/slices`` (where B changed); ``GET /compare-many`` (k runs at once: the documented
successor of ``/compare`` for more than two runs), ``/compare-many/cases`` and
``/compare-many/export``. Viewers read.

Neither loads a whole run's results: the queries page the aligned cases. Domain errors
(``CompareError``: 400) are mapped once, in ``evalsite.api``. The operation ids are the ones
these routes had in ``api/routes.py`` before it was split per area (issue 24).
"""

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from apps.evals.api.common import ERRORS, get_or_404, require_view
from apps.evals.api.exports import streamed
from apps.evals.api.pagination import Pages
from apps.evals.api.rule_schemas import RuleCompareIn, RuleFlipsOut
from apps.evals.api.schemas import CompareIn, CompareOut
from apps.evals.api.slice_schemas import SlicesOut
from apps.evals.exports.downloads import many_download
from apps.evals.models import EvalRun
from apps.evals.queries.compare import compare_runs, scorer_deltas
from apps.evals.queries.compare_many import (
    ManyView,
    case_table,
    compare_many_runs,
    comparison_payload,
    load_runs,
    many_scorer_deltas,
    many_slices,
    pareto_rows,
    parse_run_ids,
)
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
    if params.page > view.num_pages:  # past the end: an empty page, as every list of the API
        view.rows, view.page = [], params.page
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


class CompareManyIn(Schema):
    runs: str = Field(min_length=1, max_length=800, description="run ids, comma-separated, in order (2..20)")
    baseline: str | None = Field(
        None, max_length=32, description="the baseline (one of runs); default the set's pinned one, else the first"
    )
    scorers: bool = Field(False, description="add per-scorer deltas against the baseline (reads every score)")
    slices: bool = Field(False, description="add each run's slices against the baseline")
    pareto: bool = Field(False, description="add the quality x cost x latency view (reads every trace's timing)")


class CompareManyOut(Schema):
    """k runs of a set compared at once (the successor of ``GET /compare`` for more than two runs;
    ``GET /compare`` keeps its two-run shape). Built by
    :func:`apps.evals.queries.compare_many.comparison_payload`, the shape ``evalsite compare --json`` prints."""

    set: str
    split: str
    baseline: str
    baseline_chosen: str = Field(description="given, pinned (the set's pinned baseline) or first")
    n_cases: int = Field(description="distinct cases every run holds (the paired n)")
    n_pairs: int
    repeated: bool
    reason: str | None = Field(description="why no interval or call is made (too few cases), else null")
    runs: list[dict[str, Any]] = Field(description="each run with its coverage n = compared/total")
    ranking: list[dict[str, Any]] = Field(description="best first: pass rate, 95% CI, 95% rank interval, vs the best")
    best_group: list[str] = Field(description="runs no Holm-corrected paired test tells from the best")
    pairs: list[dict[str, Any]] = Field(description="each run (b) against the baseline (a), Holm-corrected over them")
    flips: list[dict[str, Any]] = Field(description="each ordered pair: cases passed by one, failed by the other")
    scorers: list[dict[str, Any]] | None = None
    slices: list[dict[str, Any]] | None = None
    pareto: list[dict[str, Any]] | None = None


def _many_view(request: HttpRequest, runs: str, baseline: str | None) -> ManyView:
    require_view(request)
    return compare_many_runs(load_runs(parse_run_ids(runs)), baseline or None)  # InvalidInputError: 400


@router.get(
    "/compare-many",
    response={200: CompareManyOut, **ERRORS},
    summary="Compare 2..20 runs of a set: ranking with intervals, corrected verdicts against a baseline, flip matrix",
)
def compare_many(request: HttpRequest, params: Query[CompareManyIn]) -> Any:
    view = _many_view(request, params.runs, params.baseline)
    return comparison_payload(
        view,
        scorers=many_scorer_deltas(view) if params.scorers else None,
        slices=many_slices(view) if params.slices else None,
        pareto=pareto_rows(view) if params.pareto else None,
    )


@router.get(
    "/compare-many/cases", response={200: dict[str, Any], **ERRORS}, summary="A page of the N-way per-case table"
)
def compare_many_case_page(
    request: HttpRequest,
    runs: str,
    baseline: str | None = None,
    page: int = 1,
    page_size: int = 50,
    sort: str = "split",
    only: str = "all",
    q: str = "",
) -> Any:
    view = _many_view(request, runs, baseline)
    found = case_table(view.runs, page=page, page_size=page_size, sort=sort, only=only, q=q[:300])
    past_end = page > found.num_pages  # an empty page, as every list of the API
    return {
        "runs": [run.pk for run in view.runs],
        "items": [
            {"case_id": r.case_id, "repeat": r.repeat_index, "n_passed": r.n_passed, "statuses": r.statuses}
            for r in ([] if past_end else found.rows)
        ],
        "page": page if past_end else found.page,
        "page_size": found.page_size,
        "total": found.total,
        "pages": found.num_pages,
    }


@router.get("/compare-many/export", response=ERRORS, summary="Export an N-way comparison (JSONL, CSV, Parquet)")
def export_compare_many(request: HttpRequest, runs: str, baseline: str | None = None, format: str = "jsonl") -> Any:
    view = _many_view(request, runs, baseline)
    return streamed(request, many_download(view, format))
