"""A read model is declared once: the API's ``XOut`` schemas take their fields from the dataclasses
the pages and the CLI read (:func:`apps.evals.api.read_models.fields_of`)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from ninja import Schema
from pydantic import Field

from apps.evals.api import review_schemas, rule_schemas, schemas, slice_schemas, status
from apps.evals.api.read_models import fields_of
from apps.evals.queries import compare, reviews, rules
from apps.evals.worker.rq import QueueWorkerState
from apps.evals.worker.status import QueueRow, RunState, SiteStatus, SupervisorState, WorkerState
from evalcore.judge.agreement import Agreement, Confusion
from evalcore.rules.aggregate import RuleAggregate
from evalcore.slices import SliceRow
from evalcore.stats import ConfidenceInterval, PairedCounts, Verdict

PAIRS = [
    (RunState, status.RunStateOut),
    (WorkerState, status.WorkerOut),
    (SupervisorState, status.SupervisorOut),
    (QueueRow, status.QueueOut),
    (QueueWorkerState, status.QueueWorkerOut),
    (SiteStatus, status.StatusOut),
    (PairedCounts, schemas.PairedCountsOut),
    (ConfidenceInterval, schemas.IntervalOut),
    (Verdict, schemas.VerdictOut),
    (compare.ScorerDelta, schemas.ScorerDeltaOut),
    (compare.CompareRow, schemas.CompareRowOut),
    (Confusion, review_schemas.ConfusionOut),
    (reviews.Disagreement, review_schemas.DisagreementOut),
    (reviews.AxisAgreement, review_schemas.AxisAgreementOut),
    (RuleAggregate, rule_schemas.RuleAggregateOut),
    (SliceRow, slice_schemas.SliceOut),
    (reviews.PeopleAgreement, review_schemas.PeopleAgreementOut),
]

# read models the API shows under other names or flattened: the fields it leaves out
PARTIAL = [
    (rules.RuleFlipGroup, rule_schemas.RuleFlipGroupOut, {"cases"}),
    (reviews.ScorerAgreement, review_schemas.ScorerAgreementOut, {"figures"}),
    (compare.CompareView, schemas.CompareOut, {"run_a", "run_b", "interval", "rows", "num_pages", "cases_in_both"}),
]


@pytest.mark.parametrize(("model", "schema"), PAIRS, ids=[schema.__name__ for _, schema in PAIRS])
def test_every_field_of_the_read_model_is_in_its_schema_and_required(model, schema):
    names = {f.name for f in dataclasses.fields(model)}
    assert names <= set(schema.model_fields)
    assert all(schema.model_fields[name].is_required() for name in names)


@pytest.mark.parametrize(("model", "schema", "left_out"), PARTIAL, ids=[schema.__name__ for _, schema, _ in PARTIAL])
def test_a_schema_that_shows_a_read_model_otherwise_holds_every_other_field(model, schema, left_out):
    names = {f.name for f in dataclasses.fields(model)}
    assert names - left_out <= set(schema.model_fields)
    assert not left_out & set(schema.model_fields)


def test_the_schema_keeps_its_name_docstring_and_nested_schemas():
    schema = status.WorkerOut
    assert schema.__name__ == "WorkerOut"
    assert schema.__doc__.startswith("A task worker")
    assert schema.model_fields["runs"].annotation == list[status.RunStateOut]
    assert schema.model_fields["stopped"].annotation == datetime | None


def test_a_description_given_is_the_fields():
    assert schemas.IntervalOut.model_fields["resamples"].description.startswith("bootstrap resamples")


@dataclasses.dataclass
class _Inner:
    x: int


@dataclasses.dataclass
class _Outer:
    when: datetime
    inner: _Inner | None
    many: list[_Inner] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(i.x for i in self.many)


@fields_of(_Inner)
class _InnerOut(Schema):
    pass


@fields_of(_Outer, nested={_Inner: _InnerOut}, describe={"when": "the moment"})
class _OuterOut(Schema):
    """An outer thing."""

    total: int = Field(description="computed")


def test_a_derived_schema_reads_a_dataclass_with_its_nested_read_models_and_properties():
    when = datetime(2026, 1, 2, tzinfo=UTC)
    out = _OuterOut.from_orm(_Outer(when, _Inner(1), [_Inner(2), _Inner(3)]))
    assert out.dict() == {"total": 5, "when": when, "inner": {"x": 1}, "many": [{"x": 2}, {"x": 3}]}
    assert _OuterOut.model_fields["when"].description == "the moment"


def test_naming_a_field_the_dataclass_lacks_is_an_error():
    with pytest.raises(TypeError, match="_Inner has no field y"):
        fields_of(_Inner, describe={"y": "nothing"})(Schema)
    with pytest.raises(TypeError, match="_Inner has no field z"):
        fields_of(_Inner, exclude={"z"})(Schema)


def test_a_scorer_agreement_shows_its_figures_flattened_under_their_own_names():
    figures = Agreement(n=4, accuracy=0.75, cohen_kappa=0.5, confusion=Confusion(tp=2, fp=1, fn=0, tn=1))
    out = review_schemas.ScorerAgreementOut.from_orm(reviews.ScorerAgreement("verdict", figures)).dict()
    assert out == {
        "name": "verdict",
        "n": 4,
        "accuracy": 0.75,
        "cohen_kappa": 0.5,
        "confusion": {"tp": 2, "fp": 1, "fn": 0, "tn": 1},
        "disagreements": [],
    }
