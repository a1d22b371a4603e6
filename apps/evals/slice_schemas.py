"""Response schema of ``GET /api/eval/compare/slices`` (:mod:`apps.evals.queries.slices`)."""

from __future__ import annotations

from ninja import Schema
from pydantic import Field

from apps.evals.schemas import IntervalOut, PairedCountsOut


class SliceOut(Schema):
    """One slice of a comparison (:class:`evalcore.slices.SliceRow`)."""

    dimension: str = Field(description="tag, split or metadata.<field>")
    value: str
    label: str
    sentence: str = Field(description="e.g. 'B lost 14.0 points on tag=multi-hop (42 cases)'")
    counts: PairedCountsOut
    interval: IntervalOut | None
    p_value: float = Field(description="McNemar exact")
    p_holm: float = Field(description="p_value corrected over every slice (Holm)")
    significant: bool
    contribution: float = Field(description="share of the overall pass-rate change, -1..1")


class SlicesOut(Schema):
    a: str
    b: str
    items: list[SliceOut]
