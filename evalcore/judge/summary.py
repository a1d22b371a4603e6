"""Run-level figures about the judge: its calls and tokens, unstable cases, and ``n=9/10`` labels.

The judge's usage lives on each verdict score's metadata (``judge_calls``, ``judge_tokens_in``,
``judge_tokens_out``, ``judge_cache_hits``), apart from the target's tokens on the run record, so
a run summary can report what the judge cost separately from what the target cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.report import MetricSummary
from evalcore.serial import from_record
from evalcore.types import CaseResult, Score


def format_n(metric: MetricSummary) -> str:
    """``"n=9/10"``: cases with a value over cases attempted (judge errors make the difference)."""
    return f"n={metric.n}/{metric.total}"


def iter_scores(results: Iterable[CaseResult | dict[str, Any]], name: str = JUDGE_SCORE) -> Iterator[Score]:
    """The scores called ``name`` in each result.

    Args:
        results: Case results, or stored result dicts with a ``"scores"`` list of score dicts.
        name: The score name to pick (the verdict by default).
    """
    for result in results:
        if isinstance(result, CaseResult):
            scores: Iterable[Any] = result.scores
        else:
            scores = result.get("scores") or []
        for score in scores:
            if isinstance(score, dict):
                score = from_record(Score, score)
            if score.name == name:
                yield score


def count_unstable(results: Iterable[CaseResult | dict[str, Any]], name: str = JUDGE_SCORE) -> int:
    """How many verdicts were flagged ``unstable`` (samples disagreed on some axis)."""
    return sum(1 for score in iter_scores(results, name) if score.metadata.get("unstable") is True)


def judge_usage(results: Iterable[CaseResult | dict[str, Any]], name: str = JUDGE_SCORE) -> dict[str, int]:
    """The judge's totals over a run.

    Returns:
        ``{"calls", "tokens_in", "tokens_out", "cache_hits", "verdicts", "errors"}``: model calls
        made (retries and format fallbacks included), prompt and completion tokens, samples served
        from the cache, verdicts given and judge errors recorded.
    """
    totals = {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cache_hits": 0, "verdicts": 0, "errors": 0}
    for score in iter_scores(results, name):
        meta = score.metadata
        totals["calls"] += int(meta.get("judge_calls") or 0)
        totals["tokens_in"] += int(meta.get("judge_tokens_in") or 0)
        totals["tokens_out"] += int(meta.get("judge_tokens_out") or 0)
        totals["cache_hits"] += int(meta.get("judge_cache_hits") or 0)
        totals["errors" if score.error is not None else "verdicts"] += 1
    return totals
