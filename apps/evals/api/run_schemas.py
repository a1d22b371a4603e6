"""Schemas of the run-edit routes: ``PATCH`` and ``DELETE /api/eval/runs/{id}``."""

from __future__ import annotations

from ninja import Schema
from pydantic import Field


class RunEditIn(Schema):
    """What a member may change on a run; fields left out stay as they are."""

    name: str | None = Field(None, max_length=200, description="the new name; blank: the made one again")
    notes: str | None = Field(None, max_length=10_000)
    pinned: bool | None = Field(None, description="pin as the baseline of its set and target (unpins the other)")


class RunDeletedOut(Schema):
    id: str
    results: int = Field(description="results deleted, with their reviews")
    traces: int = Field(description="traces deleted (those no other run's results use)")
