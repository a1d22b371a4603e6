"""Response schemas of the rule-adherence routes of the evals API (issue 15).

``GET /api/eval/runs/{id}/rules`` answers :class:`RunRulesOut` (per-rule aggregates of a run);
``GET /api/eval/compare/rules`` answers :class:`RuleFlipsOut` (per-rule flips between two runs,
counted per rule and change, and one page of the flips with the results they link). Read
directly from :mod:`apps.evals.queries.rules` objects, as :mod:`apps.evals.api.schemas` does.
"""

from __future__ import annotations

from ninja import Schema
from pydantic import Field

from apps.evals.api.pagination import PageIn
from apps.evals.api.read_models import fields_of
from apps.evals.queries.rules import RuleFlipGroup, RuleFlipRow
from evalcore.rules.aggregate import RuleAggregate


@fields_of(
    RuleAggregate,
    describe={
        "cases": "cases whose rule_adherence score lists the rule (N)",
        "decided": "cases with a decided outcome (k): unjudged and judge errors are not",
        "counts": "cases per outcome, every outcome listed",
        "dropped": "cases where the rule was in the first turns' requests, then dropped",
    },
)
class RuleAggregateOut(Schema):
    """One rule across a run (:class:`evalcore.rules.RuleAggregate`); rates are 0..1 shares of
    the decided cases, ``None`` when none is decided."""

    coverage: str = Field(description="k/N")  # a property of RuleAggregate


class RunRulesOut(Schema):
    run_id: str
    uses_rules: bool = Field(description="the run was scored with rule_adherence")
    rules: list[RuleAggregateOut]


class RuleCompareIn(PageIn):
    a: str = Field(min_length=1, max_length=32)
    b: str = Field(min_length=1, max_length=32)


@fields_of(RuleFlipGroup, exclude={"cases"})
class RuleFlipGroupOut(Schema):
    label: str = Field(description='"before → after", e.g. "honoured → rule_absent"')  # a property


class RuleFlipOut(Schema):
    case_id: str
    repeat_index: int
    rule_id: str
    before: str
    after: str
    a_seq: int = Field(description="the case's result in run A (its seq, as in the run's results)")
    b_seq: int = Field(description="the case's result in run B")

    @staticmethod
    def resolve_case_id(flip: RuleFlipRow) -> str:
        return flip.case.case_id

    @staticmethod
    def resolve_repeat_index(flip: RuleFlipRow) -> int:
        return flip.case.repeat_index

    @staticmethod
    def resolve_a_seq(flip: RuleFlipRow) -> int:
        return flip.case.a_result_id

    @staticmethod
    def resolve_b_seq(flip: RuleFlipRow) -> int:
        return flip.case.b_result_id


class RuleFlipsOut(Schema):
    """Per-rule flips between run A (baseline) and run B over the cases both hold."""

    a: str
    b: str
    uses_rules: bool = Field(description="either run was scored with rule_adherence")
    groups: list[RuleFlipGroupOut] = Field(description="per rule and change, the rule's commonest change first")
    items: list[RuleFlipOut]
    page: int
    page_size: int
    total: int
    pages: int
