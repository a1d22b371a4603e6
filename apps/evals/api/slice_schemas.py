"""Response schema of ``GET /api/eval/compare/slices`` (:mod:`apps.evals.queries.slices`)."""

from __future__ import annotations

from ninja import Schema
from pydantic import Field

from apps.evals.api.read_models import fields_of
from apps.evals.api.schemas import IntervalOut, PairedCountsOut
from evalcore.slices import SliceRow
from evalcore.stats import TOO_FEW_CASES, ConfidenceInterval, PairedCounts, too_few_cases


@fields_of(
    SliceRow,
    nested={PairedCounts: PairedCountsOut, ConfidenceInterval: IntervalOut},
    describe={
        "dimension": "tag, split or metadata.<field>",
        "p_value": "McNemar exact",
        "p_holm": "p_value corrected over every slice (Holm)",
        "contribution": "share of the overall pass-rate change, -1..1",
    },
)
class SliceOut(Schema):
    """One slice of a comparison (:class:`evalcore.slices.SliceRow`)."""

    # properties of SliceRow, and a reason computed here
    label: str
    sentence: str = Field(description="e.g. 'B lost 14.0 points on tag=multi-hop (42 cases)'")
    interval_reason: str | None = Field(description="why interval is null (too few cases in the slice), else null")

    @staticmethod
    def resolve_interval_reason(row: SliceRow) -> str | None:
        return None if row.interval is not None else too_few_cases(row.n_cases) or TOO_FEW_CASES


class SlicesOut(Schema):
    a: str
    b: str
    items: list[SliceOut]
