"""Schemas of ``GET /api/eval/sets/{id}/leaderboard?split=``: the latest finished run per (target,
variant) with its figures (:mod:`apps.evals.queries.leaderboard`)."""

from __future__ import annotations

from datetime import datetime

from ninja import Schema
from pydantic import Field


class IntervalOut(Schema):
    """A 95% interval, or why there is none."""

    low: float | None = None
    high: float | None = None
    method: str | None = Field(None, description="wilson, normal, wilson_bound, or null")
    reason: str | None = Field(None, description="why there is no interval (e.g. too few cases)")


class EstimateOut(Schema):
    """A figure with its 95% interval (``low`` / ``high`` null: too few cases for that bound)."""

    value: float
    low: float | None = None
    high: float | None = None


class ScoreCellOut(Schema):
    name: str
    mean: float | None = None
    interval: IntervalOut
    n: int
    cases: int
    coverage: str = Field(description="n = cases with a value / cases of the run")


class LatencyOut(Schema):
    kind: str = Field(description="p50 (with p95, from the cost rows) or mean (cases that called the target)")
    value: float = Field(description="milliseconds")
    low: float | None = None
    high: float | None = None
    p95: EstimateOut | None = None
    coverage: str = Field(description="n = cases timed / cases of the run")
    cached_excluded: int = Field(description="cases answered from the target cache, left out")


class LeaderRowOut(Schema):
    eval_run_id: str
    name: str
    target_id: str
    variant: str
    model: str
    finished: datetime | None = None
    set_version: int | None = Field(None, description="the set version's number the run ran against")
    stale: bool = Field(description="ran on an older set version than the current one (not ranked)")
    repeat: int
    n_total: int
    n_done: int
    n_passed: int
    n_errored: int
    n_unscored: int
    n_cached: int = Field(description="cases answered from the target response cache")
    pass_rate: float | None = Field(None, description="n_passed / n_done (unscored never counts as passed)")
    pass_rate_interval: IntervalOut
    coverage: str
    scores: list[ScoreCellOut]
    cost_per_case_usd: EstimateOut | None = None
    cost_coverage: str
    n_tokens_estimated: int
    latency_ms: LatencyOut | None = None


class LeaderboardOut(Schema):
    set_id: int
    set_name: str
    split: str
    current_version: int | None = None
    splits: list[str] = Field(description="splits with a finished run")
    score_names: list[str] = Field(description="the main scores shown per row")
    rows: list[LeaderRowOut] = Field(description="runs on the current set version, best pass rate first")
    stale: list[LeaderRowOut] = Field(description="runs on an older set version, newest first (not ranked)")


class LeaderboardIn(Schema):
    split: str = Field("dev", description="train, dev, test or all")
