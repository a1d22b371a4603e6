"""From the judge's sampled answers to scores: the vote, the thresholds, the six scores or six errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalcore.judge.parsing import AXES, MAX_AXIS_SCORE, JudgeVerdict
from evalcore.judge.verdict import Thresholds, majority
from evalcore.types import Score

JUDGE_SCORE = "rubric_judge"
"""Name of the verdict score; each axis is ``rubric_judge.<axis>``."""


@dataclass(slots=True)
class JudgeUsage:
    """What judging one case spent: calls, tokens in / out, cache hits, wall time (ms)."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_hits: int = 0
    ms: float = 0.0

    def as_metadata(self) -> dict[str, int | float]:
        """The ``judge_*`` metadata keys of the verdict score."""
        return {
            "judge_calls": self.calls,
            "judge_tokens_in": self.tokens_in,
            "judge_tokens_out": self.tokens_out,
            "judge_cache_hits": self.cache_hits,
            # the judge ledger's latency (apps.evals.results.ledger)
            "judge_ms": round(self.ms, 3),
        }


@dataclass(slots=True)
class SampleOutcome:
    """One sample's outcome: a parsed answer, or the last error after every attempt."""

    index: int
    verdict: JudgeVerdict | None = None
    kind: str | None = None
    detail: str | None = None
    raw: str | None = None
    attempts: int = 0
    cached: bool = False


def judge_scores(
    outcomes: list[SampleOutcome], base: dict[str, Any], usage: JudgeUsage, thresholds: Thresholds, samples: int
) -> list[Score]:
    """Vote, apply the thresholds, and build the six scores (or six judge errors).

    Args:
        outcomes: One per sample, in sample order.
        base: Metadata every score carries (judge model, prompt version, ...).
        usage: Calls, tokens and cache hits spent on the case.
        thresholds: Per-axis minimums (0..5) deciding the verdict.
        samples: How many samples were asked for (more than one: each is listed).
    """
    good = [o.verdict for o in outcomes if o.verdict is not None]
    failed = [o for o in outcomes if o.verdict is None]
    meta: dict[str, Any] = {**base, **usage.as_metadata(), "attempts": sum(o.attempts for o in outcomes)}
    if samples > 1:
        meta["samples"] = [sample_record(o, thresholds) for o in outcomes]
    if not good:
        last = failed[-1]
        meta.update(kind=last.kind, raw=last.raw)
        what = "model error" if last.kind in ("model_error", "timeout") else "unreadable answer"
        return judge_failures(
            str(last.kind), f"judge {what} after {last.attempts} attempt(s): {last.kind}: {last.detail}", meta
        )
    vote = majority(good)
    scores = vote.verdict.scores
    passed = thresholds.passes(scores)
    meta.update(
        scores=dict(scores),
        thresholds=dict(thresholds.minimums),
        failing_axes=thresholds.failing_axes(scores),
        judge_pass=vote.verdict.judge_pass,
        unstable=vote.unstable,
        samples_used=vote.used,
        samples_failed=len(failed),
    )
    if vote.unstable:
        meta["disagreeing_axes"] = vote.disagreeing_axes
    results = [Score(JUDGE_SCORE, passed, passed=passed, explanation=thresholds.explain(scores), metadata=meta)]
    for axis in AXES:
        minimum = thresholds.minimums[axis]
        results.append(
            Score(
                f"{JUDGE_SCORE}.{axis}",
                scores[axis] / MAX_AXIS_SCORE,
                passed=scores[axis] >= minimum,
                explanation=vote.verdict.reasons.get(axis) or None,
                metadata={"score": scores[axis], "min": minimum},
            )
        )
    return results


def sample_record(outcome: SampleOutcome, thresholds: Thresholds) -> dict[str, Any]:
    """One sample as listed in the verdict's ``samples`` metadata."""
    if outcome.verdict is None:
        return {"index": outcome.index, "error": outcome.detail, "kind": outcome.kind, "raw": outcome.raw}
    return {
        "index": outcome.index,
        "scores": dict(outcome.verdict.scores),
        "pass": thresholds.passes(outcome.verdict.scores),
        "judge_pass": outcome.verdict.judge_pass,
        "cached": outcome.cached,
    }


def judge_failures(kind: str, message: str, metadata: dict[str, Any]) -> list[Score]:
    """The same judge error on the verdict and every axis (raw text only on the verdict)."""
    verdict_meta = {**metadata, "kind": kind}
    axis_meta = {k: v for k, v in verdict_meta.items() if k not in ("raw", "samples")}
    return [
        Score.failure(JUDGE_SCORE, message, **verdict_meta),
        *(Score.failure(f"{JUDGE_SCORE}.{axis}", message, **axis_meta) for axis in AXES),
    ]
