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
