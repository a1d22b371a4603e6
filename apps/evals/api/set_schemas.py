"""Schemas of ``GET /api/eval/sets``: a page of sets, each with its cases per split
(:func:`apps.evals.queries.set_listing`), and the list's filter."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field

from evalcore.types import SPLITS


class SplitCountsOut(Schema):
    train: int = 0
    dev: int = 0
    test: int = 0


class EvalSetOut(Schema):
    """A set with its cases per split (from :func:`~apps.evals.queries.set_listing`'s counts)."""

    id: int
    name: str
    description: str
    source_path: str
    n_cases: int
    splits: SplitCountsOut
    split_aliases: dict[str, str] = Field(
        default_factory=dict, description="the file's split names mapped at the last import ({file name: split})"
    )
    created: datetime
    updated: datetime

    @staticmethod
    def resolve_splits(obj: Any) -> dict[str, int]:
        return {split: getattr(obj, f"n_{split}") for split in SPLITS}

    @staticmethod
    def resolve_n_cases(obj: Any) -> int:
        return sum(getattr(obj, f"n_{split}") for split in SPLITS)

    @staticmethod
    def resolve_split_aliases(obj: Any) -> dict[str, str]:
        return obj.split_aliases or {}


class SetFilterIn(Schema):
    name: str | None = Field(None, description="only the set of this name")


class CaseHistoryOut(Schema):
    """One result of a case in one run (``GET /sets/{id}/cases/{case_id}/history``), newest run
    first (:func:`apps.evals.queries.case_history.case_history`)."""

    run_id: str = Field(description="the eval run's hex id")
    run_name: str = Field(description="the run's human name")
    repeat_index: int
    status: str = Field(description="passed / failed / errored / unscored (unscored is never a pass)")
    passed: bool
    score: float | None = Field(description="the mean of the numeric scores; null when none")
    scores: list[dict[str, Any]]
    target_id: str
    variant: str
    split: str
    set_version: int | None = Field(description="the set version the run ran against; null when not recorded")
    started: datetime | None

    @staticmethod
    def resolve_run_name(result: Any) -> str:
        return str(result.eval_run.name)

    @staticmethod
    def resolve_target_id(result: Any) -> str:
        return str(result.eval_run.target_id)

    @staticmethod
    def resolve_variant(result: Any) -> str:
        return str(result.eval_run.variant)

    @staticmethod
    def resolve_split(result: Any) -> str:
        return str(result.split or result.eval_run.split)

    @staticmethod
    def resolve_set_version(result: Any) -> int | None:
        version = result.eval_run.set_version
        return None if version is None else int(version.number)

    @staticmethod
    def resolve_started(result: Any) -> datetime | None:
        started: datetime | None = result.eval_run.started
        return started

    @staticmethod
    def resolve_run_id(result: Any) -> str:
        return str(result.eval_run_id)
