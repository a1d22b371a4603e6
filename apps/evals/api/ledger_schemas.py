"""Schemas of the ledger routes: a run's invocations, their summary, a set's flakiness report."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field


class InvocationFilterIn(Schema):
    """Filters of a run's invocations."""

    status: str | None = Field(None, description="queued, running, done, errored or skipped")
    scorer: str | None = Field(None, description="a scorer's name, e.g. rubric_judge")


class InvocationOut(Schema):
    """One scorer or judge invocation (a ledger row)."""

    id: int
    kind: str
    scorer: str
    judge_model: str
    case_id: str
    repeat_index: int | None
    trace_id: str
    status: str
    reason: str
    latency_ms: float | None
    tokens_in: int | None
    tokens_out: int | None
    calls: int | None
    cost_usd: float | None = Field(
        None, description="null: priced per case by the price table (see the run's judge cost)"
    )
    created: datetime
    finished: datetime | None


class ReasonCountOut(Schema):
    status: str
    reason: str
    n: int


class ScorerLedgerOut(Schema):
    scorer: str
    kind: str
    judge_models: list[str]
    total: int
    done: int
    by_status: dict[str, int]
    reasons: list[ReasonCountOut]
    calls: int | None
    tokens_in: int | None
    tokens_out: int | None


class EstimateOut(Schema):
    value: float
    lo: float | None
    hi: float | None


class RunLedgerOut(Schema):
    """A run's ledger per scorer; ``n_results`` is N of each scorer's coverage ``done / N``; the
    judge's cost per judged case with its 95% interval and coverage ``n_judge_priced / n_judge``."""

    eval_run_id: str
    n_results: int
    scorers: list[ScorerLedgerOut]
    judge_cost: EstimateOut | None
    n_judge: int
    n_judge_priced: int


class FlakinessIn(Schema):
    judge: str = Field("", description="only the runs this judge model graded ('' = every run)")


class FlipRateOut(Schema):
    score: str
    flaky: int
    n: int
    rate: float | None
    low: float | None
    high: float | None
    by_source: dict[str, int]


class FlakyCaseOut(Schema):
    case_id: str
    scores: list[str]
    sources: list[str]
    eval_run_ids: list[str]


class FlakinessOut(Schema):
    """A set's flip rates (Wilson 95% intervals) and flaky cases; coverage ``covered / cases``."""

    eval_set_id: int
    judge_model: str
    runs: int
    groups: int
    cases: int
    covered: int
    rates: list[FlipRateOut]
    flaky_cases: list[FlakyCaseOut]
    n_flaky: int


def as_record(value: Any) -> Any:
    """A dataclass tree as plain values for the schemas above, with the ``done`` property of a
    scorer's ledger filled in (``asdict`` reads fields only)."""
    if is_dataclass(value) and not isinstance(value, type):
        record = {f.name: as_record(getattr(value, f.name)) for f in fields(value)}
        if hasattr(value, "done"):
            record["done"] = value.done
        return record
    if isinstance(value, list):
        return [as_record(v) for v in value]
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return dict(value._asdict())
    return value
