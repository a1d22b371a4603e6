"""The pass/fail rule over per-axis scores, and the majority vote over repeated judge samples.

The verdict is computed here from the integer scores alone, never taken from the judge's own
``"pass"`` field, so a stored pass and its scores can never contradict each other (promptfoo's
judges can return ``pass: true`` with a failing score).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evalcore.judge.parsing import AXES, MAX_AXIS_SCORE, JudgeVerdict


@dataclass(slots=True, frozen=True)
class Thresholds:
    """Per-axis minimum integer scores (0..5); a case passes when every axis meets its minimum.

    Attributes:
        minimums: Axis name -> the lowest passing score. Axes not listed have minimum 0.
    """

    minimums: Mapping[str, int]

    @classmethod
    def build(
        cls,
        *,
        min_axis_score: int = 3,
        min_accuracy: int = 4,
        axis_minimums: Mapping[str, int] | None = None,
        axes: Sequence[str] = AXES,
    ) -> Thresholds:
        """The thresholds from the scorer's options.

        Args:
            min_axis_score: Default minimum of every axis (default 3 of 5).
            min_accuracy: Minimum of ``accuracy`` (default 4 of 5); the stricter of this and
                ``min_axis_score`` applies.
            axis_minimums: Per-axis overrides, applied last (they may loosen or tighten).
            axes: The axes in play.

        Raises:
            ValueError: A minimum outside 0..5, or an override naming an unknown axis.
        """
        for label, value in (("min_axis_score", min_axis_score), ("min_accuracy", min_accuracy)):
            _check_minimum(label, value)
        minimums = {axis: min_axis_score for axis in axes}
        if "accuracy" in minimums:
            minimums["accuracy"] = max(min_axis_score, min_accuracy)
        for axis, value in (axis_minimums or {}).items():
            if axis not in minimums:
                raise ValueError(f"unknown rubric axis {axis!r} (axes: {', '.join(axes)})")
            minimums[axis] = value
        for axis, value in minimums.items():
            _check_minimum(f"minimum for {axis!r}", value)
        return cls(minimums)

    def failing_axes(self, scores: Mapping[str, int]) -> list[str]:
        """Axes (in threshold order) whose score is below its minimum."""
        return [axis for axis, minimum in self.minimums.items() if scores[axis] < minimum]

    def passes(self, scores: Mapping[str, int]) -> bool:
        """The verdict: True exactly when no axis is below its minimum."""
        return not self.failing_axes(scores)

    def explain(self, scores: Mapping[str, int]) -> str:
        """One line saying why the verdict is what it is, e.g. ``"fail: accuracy 2 < 4"``."""
        failing = self.failing_axes(scores)
        if not failing:
            return "pass: every axis meets its minimum"
        return "fail: " + "; ".join(f"{axis} {scores[axis]} < {self.minimums[axis]}" for axis in failing)


def _check_minimum(label: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AXIS_SCORE:
        raise ValueError(f"{label} must be an integer in 0..{MAX_AXIS_SCORE}, got {value!r}")


def majority_score(values: Sequence[int]) -> int:
    """The most frequent value; a tie goes to the lowest tied value (the conservative reading).

    Why a vote and not the median: the scores are ordinal labels the judge picked, and a vote
    returns one it actually gave. The downward tie-break means two judges saying 3 and 5 give 3,
    never a pass that no sample supported on its own.

    Raises:
        ValueError: On an empty sequence.
    """
    if not values:
        raise ValueError("majority of no values")
    counts = Counter(values)
    top = max(counts.values())
    return min(value for value, count in counts.items() if count == top)


@dataclass(slots=True)
class Majority:
    """The per-axis majority of several parsed judge samples.

    Attributes:
        verdict: The majority scores, with the reason of the first sample that gave each.
        unstable: True when any axis score (hence possibly the verdict) differs across samples.
        disagreeing_axes: The axes whose scores differed.
        used: How many samples voted (errored samples are missing, not votes).
    """

    verdict: JudgeVerdict
    unstable: bool
    disagreeing_axes: list[str] = field(default_factory=list)
    used: int = 0


def majority(samples: Sequence[JudgeVerdict], axes: Sequence[str] = AXES) -> Majority:
    """Combine samples by :func:`majority_score` per axis.

    Raises:
        ValueError: When ``samples`` is empty (the caller records a judge error instead).
    """
    if not samples:
        raise ValueError("majority of no judge samples")
    scores: dict[str, int] = {}
    reasons: dict[str, str] = {}
    disagreeing: list[str] = []
    for axis in axes:
        values = [sample.scores[axis] for sample in samples]
        scores[axis] = majority_score(values)
        reasons[axis] = next(s.reasons.get(axis, "") for s in samples if s.scores[axis] == scores[axis])
        if len(set(values)) > 1:
            disagreeing.append(axis)
    judge_passes = {s.judge_pass for s in samples}
    judge_pass = judge_passes.pop() if len(judge_passes) == 1 else None
    return Majority(JudgeVerdict(scores, reasons, judge_pass), bool(disagreeing), disagreeing, len(samples))
