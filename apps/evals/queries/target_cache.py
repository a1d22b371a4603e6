"""How many of a run's cases were answered from the target response cache (``--cache-target``):
the CLI's summary line, the ``--json`` report and the run page say it.

A case's run row marks it: ``metadata["target_cache"]["hit"]`` (:mod:`evalcore.target_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

from apps.evals.models import EvalResult


@dataclass(frozen=True, slots=True)
class CacheCounts:
    """The target cache's part in one run."""

    hits: int
    """Cases answered from the cache (no target call; their latency is left out of latency figures)."""
    skipped: int
    """Conversation cases played turn by turn, which are never cached (the target was called)."""
    n: int
    """Cases stored (results)."""

    def record(self) -> dict[str, Any]:
        """The JSON form (``--json``'s ``target_cache`` block)."""
        return {"cached": self.hits, "skipped_conversations": self.skipped, "n": self.n}

    def sentence(self) -> str | None:
        """``12 of 40 case(s) answered from the target cache (no target call; left out of latency)``, or
        ``None`` when the cache played no part."""
        if not self.hits and not self.skipped:
            return None
        bits = []
        if self.hits:
            bits.append(
                f"{self.hits} of {self.n} case(s) answered from the target cache "
                "(no target call; their latency is left out of p50/p95)"
            )
        if self.skipped:
            bits.append(f"{self.skipped} conversation case(s) not cached (a conversation is never cached)")
        return "; ".join(bits)


def cache_counts(eval_run_id: str) -> CacheCounts:
    """The target cache's part in the run ``eval_run_id`` (one query)."""
    row = EvalResult.objects.filter(eval_run_id=eval_run_id).aggregate(
        n=Count("id"),
        hits=Count("id", filter=Q(run__metadata__target_cache__hit=True)),
        skipped=Count("id", filter=Q(run__metadata__target_cache__skipped="conversation")),
    )
    return CacheCounts(hits=int(row["hits"] or 0), skipped=int(row["skipped"] or 0), n=int(row["n"] or 0))
