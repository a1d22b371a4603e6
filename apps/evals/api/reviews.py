"""The human-review routes of the evals API (issue 13 §1), mounted beside ``apps.evals.api.runs``:
``GET/POST /api/eval/runs/{id}/cases/{case}/reviews`` and ``GET /api/eval/runs/{id}/reviews/agreement``.

``{case}`` is the case id percent-encoded with nothing kept (``urllib.parse.quote(case_id,
safe="")``): ids with ``/``, ``?``, ``#``, ``%``, spaces or newlines reach their result
(:mod:`apps.core.converters`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.http import HttpRequest
from ninja import Router
from ninja.responses import Status

from apps.core import access
from apps.core.converters import CASE_ID_PARAM
from apps.evals.api.common import ERRORS, READ_ERRORS, get_or_404, require, require_view
from apps.evals.api.review_schemas import PeopleAgreementOut, ReviewIn, ReviewListOut, ReviewOut
from apps.evals.models import EvalRun
from apps.evals.queries.reviews import judge_vs_people, result_reviews, review_progress
from apps.evals.runs.reviews import find_result, save_review

router = Router(tags=["reviews"])

CASE_REVIEWS = "/runs/{run_id}/cases/" + CASE_ID_PARAM + "/reviews"


def _review_out(review: Any) -> dict[str, Any]:
    return {
        "id": review.pk,
        "run_id": review.eval_run_id,
        "case_id": review.case_id,
        "repeat_index": review.result.repeat_index,
        "reviewer": review.reviewer.get_username(),
        "verdict": review.verdict or None,
        "axis_scores": review.axis_scores or {},
        "comment": review.comment,
        "created": review.created,
        "updated": review.updated,
        "revisions": getattr(review, "n_revisions", None) or review.revisions.count(),
    }


@router.get(
    CASE_REVIEWS,
    response={200: ReviewListOut, **READ_ERRORS},
    summary="People's reviews of one case of a run (viewers read)",
)
def list_case_reviews(request: HttpRequest, run_id: str, case_id: str, repeat: int = 0) -> Any:
    require_view(request)
    result = find_result(run_id, case_id, repeat)
    items = [_review_out(r) for r in result_reviews(result)]
    return {"run_id": run_id, "case_id": case_id, "repeat_index": repeat, "items": items}


@router.post(
    CASE_REVIEWS,
    response={200: ReviewOut, 201: ReviewOut, **ERRORS},
    summary="Review one case of a run, or edit your review (members; 201 when created)",
)
def post_case_review(request: HttpRequest, run_id: str, case_id: str, data: ReviewIn) -> Any:
    user = require(request, access.can_review, "review results")
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
    require_view(request)
    eval_run = get_or_404(EvalRun, "run_id", pk=run_id)
    found = judge_vs_people(eval_run)
    progress = review_progress(eval_run)
    figures = {f.name: getattr(found, f.name) for f in dataclasses.fields(found)}
    return {"run_id": eval_run.pk, "reviewed": progress.reviewed, "total": progress.total, **figures}
