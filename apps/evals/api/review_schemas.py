"""Request and response schemas of the human-review routes of the evals API (issue 13).

``GET/POST /api/eval/runs/{id}/cases/{case}/reviews`` read and write reviews
(:class:`ReviewIn`, :class:`ReviewOut`); ``GET /api/eval/runs/{id}/reviews/agreement`` answers
:class:`PeopleAgreementOut` (judge and scorers vs people, :mod:`apps.evals.queries.reviews`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field

from apps.evals.api.read_models import fields_of
from apps.evals.queries.reviews import AxisAgreement, Disagreement, PeopleAgreement, ScorerAgreement
from evalcore.judge.agreement import Confusion


class ReviewIn(Schema):
    """A reviewer's grade; posting again edits the caller's own review (history kept). A verdict,
    axis scores and a comment are each optional, but not all three: a comment alone or axis scores
    alone are a review (it counts in no verdict agreement figure)."""

    verdict: str | None = Field(default=None, description="pass, fail or unsure; null or absent for none")
    axis_scores: dict[str, Any] | None = Field(
        default=None,
        description="0..5 per rubric axis (accuracy, completeness, grounding, hazard_avoidance, calibration)",
    )
    comment: str | None = Field(default=None, description="free text, at most 10,000 characters")
    repeat: int = Field(default=0, ge=0, description="which repeat of the case (0 unless the run repeats cases)")


class ReviewOut(Schema):
    id: int
    run_id: str
    case_id: str
    repeat_index: int
    reviewer: str
    verdict: str | None = Field(description="pass, fail or unsure; null for a review without a verdict")
    axis_scores: dict[str, int]
    comment: str
    created: datetime
    updated: datetime
    revisions: int = Field(description="earlier states kept by edits")


class ReviewListOut(Schema):
    run_id: str
    case_id: str
    repeat_index: int
    items: list[ReviewOut]


@fields_of(
    Confusion,
    describe={
        "tp": "scorer pass, people pass",
        "fp": "scorer pass, people fail (lenient)",
        "fn": "scorer fail, people pass (harsh)",
        "tn": "scorer fail, people fail",
    },
)
class ConfusionOut(Schema):
    pass


@fields_of(Disagreement)
class DisagreementOut(Schema):
    pass


@fields_of(
    ScorerAgreement,
    nested={Disagreement: DisagreementOut},
    exclude={"figures"},
    describe={"name": "a score name, or 'verdict' for the case's overall verdict"},
)
class ScorerAgreementOut(Schema):
    # the fields of ScorerAgreement.figures (evalcore.judge.agreement.Agreement), flattened
    n: int = Field(alias="figures.n")
    accuracy: float = Field(
        alias="figures.accuracy", description="share of results where scorer and people agree, 0..1"
    )
    cohen_kappa: float = Field(alias="figures.cohen_kappa", description="chance-corrected agreement, -1..1")
    confusion: ConfusionOut = Field(alias="figures.confusion")


@fields_of(
    AxisAgreement,
    describe={
        "mean_abs_diff": "mean |judge - person| in axis points (0..5)",
        "within_one": "share of pairs at most one point apart, 0..1",
    },
)
class AxisAgreementOut(Schema):
    pass


@fields_of(
    PeopleAgreement,
    nested={ScorerAgreement: ScorerAgreementOut, AxisAgreement: AxisAgreementOut},
    describe={
        "labelled": "results with a human label (majority of pass/fail verdicts)",
        "alpha": "Krippendorff's alpha (nominal) among reviewers, None when undefined",
        "multi_rated": "results graded by two or more reviewers",
    },
)
class PeopleAgreementOut(Schema):
    # the run and its review progress (apps.evals.queries.reviews.ReviewProgress) beside it
    run_id: str
    reviewed: int = Field(description="results with at least one review")
    total: int = Field(description="results in the run")
