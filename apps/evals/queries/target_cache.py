"""How many of a run's cases were answered from the target response cache (``--cache-target``):
the CLI's summary line, the ``--json`` report and the run page say it.

A case's run row marks it: ``metadata["target_cache"]["hit"]`` (:mod:`evalcore.target_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Q

from apps.evals.models import EvalResult, EvalRun
from apps.traces.models import Run

SUMMARY_KEY = "target_cache"
"""The key of a finished run's ``summary`` holding :func:`run_cache_figures` (stored when the run
ends: :func:`apps.evals.runs.target_cache.store_cache_figures`), so no page scans its results."""


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


def used_cache(config: Any) -> bool:
    """Whether a run's stored config says it read the target cache for some of its cases
    (``cache_target``, or ``cache_target_used``: a resume with ``--no-cache`` of a run that had it)."""
    return isinstance(config, dict) and bool(config.get("cache_target") or config.get("cache_target_used"))


def cache_counts(eval_run_id: str) -> CacheCounts:
    """The target cache's part in the run ``eval_run_id``: one query for a run that never used the
    cache (its config says so: nothing is counted), else one more over its results.

    The CLI's summary line, the ``--json`` report and the run page read it once a run ends.
    """
    found = EvalRun.objects.filter(pk=eval_run_id).values_list("config", "n_done").first()
    if found is None:
        return CacheCounts(hits=0, skipped=0, n=0)
    if not used_cache(found[0]):
        return CacheCounts(hits=0, skipped=0, n=int(found[1] or 0))
    row = EvalResult.objects.filter(eval_run_id=eval_run_id).aggregate(
        n=Count("id"),
        hits=Count("id", filter=Q(run__metadata__target_cache__hit=True)),
        skipped=Count("id", filter=Q(run__metadata__target_cache__skipped="conversation")),
    )
    return CacheCounts(hits=int(row["hits"] or 0), skipped=int(row["skipped"] or 0), n=int(row["n"] or 0))


def _hit_sql() -> str:
    """SQL that is 1 when the run row ``t`` was answered from the target cache, else 0 (a row
    without the mark included: ``NOT (NULL = true)`` would drop it)."""
    if connection.vendor == "postgresql":
        return "CASE WHEN (t.metadata -> 'target_cache' ->> 'hit') = 'true' THEN 1 ELSE 0 END"
    # instr first: a row whose text lacks the key (every row of a run without the cache) is never
    # parsed; JSON text always spells an ASCII key as it is
    return (
        "CASE WHEN instr(t.metadata, 'target_cache') > 0 "
        "AND json_extract(t.metadata, '$.target_cache.hit') = 1 THEN 1 ELSE 0 END"
    )


def run_cache_figures(ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per run of ``ids``: ``cached`` (cases answered from the target cache), and ``n_ms`` /
    ``sum_ms`` / ``sum_sq`` (count, sum and sum of squares of the wall time, ms, of the cases that
    called the target: a cached case's time is a lookup's). One grouped SQL aggregate over the
    runs' results, each row's cache mark read once. A run without results is left out."""
    if not ids:
        return {}
    placeholders = ", ".join(["%s"] * len(ids))
    sql = f"""
        SELECT eval_run_id, SUM(h), SUM(CASE WHEN h = 0 AND ms IS NOT NULL THEN 1 ELSE 0 END),
               SUM(CASE WHEN h = 0 THEN ms END), SUM(CASE WHEN h = 0 THEN ms * ms END)
        FROM (SELECT r.eval_run_id AS eval_run_id, t.elapsed_ms AS ms, {_hit_sql()} AS h
              FROM {EvalResult._meta.db_table} r JOIN {Run._meta.db_table} t ON t.id = r.run_id
              WHERE r.eval_run_id IN ({placeholders})) AS cases
        GROUP BY eval_run_id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        rows = cursor.fetchall()
    return {
        run_id: {"cached": int(hits or 0), "n_ms": int(n or 0), "sum_ms": total, "sum_sq": squares}
        for run_id, hits, n, total, squares in rows
    }


def stored_cache_figures(eval_run: EvalRun) -> dict[str, Any] | None:
    """The figures :func:`run_cache_figures` gave when the run ended (``summary["target_cache"]``),
    or ``None`` (a run without ``--cache-target``, stored before, or not ended)."""
    block = (eval_run.summary or {}).get(SUMMARY_KEY) if isinstance(eval_run.summary, dict) else None
    return block if isinstance(block, dict) and "cached" in block else None
