"""Reads cached while the runs they read do not change (comparisons and per-rule figures re-read
on every page of a big run would cost a second each)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from django.core.cache import cache

from apps.evals.models import EvalRun

CACHE_S = 600
"""How long a cached read is kept at the most (seconds)."""


def while_unchanged[T](name: str, runs: Sequence[EvalRun], compute: Callable[[], T]) -> T:
    """``compute()``, cached under ``name`` and each run's id, cases done and status, so a run that
    moves on is read afresh (and nothing is kept longer than :data:`CACHE_S`).

    Args:
        name: What is read, with a version to bump when its shape changes (``scorer-deltas.v4``).
        runs: The runs it reads.
        compute: The read itself; its answer must not be ``None`` (``None`` means "not cached").
    """
    key = f"evals.{name}:" + ":".join(f"{run.pk}:{run.n_done}:{run.status}" for run in runs)
    if len(key) > 200:  # many runs (an N-way comparison): memcached refuses keys past 250 characters
        key = f"evals.{name}:sha256:" + hashlib.sha256(key.encode()).hexdigest()
    found: T | None = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, CACHE_S)
    return found
