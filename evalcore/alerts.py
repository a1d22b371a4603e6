"""Alerts that test the change: a recent window of online scores against a baseline window.

An alert fires only when three things hold at once: both windows hold at least ``min_n``
scored traces, the change is significant at level ``alpha`` by a test that fits the score, and
the change is at least ``min_effect`` in the watched direction. With ``consecutive = k`` it must
hold for ``k`` windows in a row (:func:`sustained`), so a single noisy window never pages anyone.

The tests (both one-sided for ``drop`` / ``rise``, two-sided for ``either``):

- a pass/fail score: the pooled two-proportion z-test (:func:`two_proportion_test`; Agresti,
  *Categorical Data Analysis*, 3rd ed. 2013, §3.1.3); effect = recent pass rate − baseline pass rate;
- a number in 0..1: the Mann–Whitney U rank test, normal approximation with tie and continuity
  corrections (:func:`rank_test`; Mann & Whitney 1947, ties as in Lehmann, *Nonparametrics*
  1975, §1.4); effect = recent mean − baseline mean.

No Django here: the portal's worker (``apps.online``) reads the windows and calls
:func:`compare_windows`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

Direction = Literal["drop", "rise", "either"]
"""Which change an alert watches: a fall of the score, a rise, or either."""

TestName = Literal["two_proportion", "rank"]
"""The test used: ``two_proportion`` for pass/fail values, ``rank`` (Mann–Whitney U) for numbers."""

_NORMAL = NormalDist()


@dataclass(frozen=True, slots=True)
class TestResult:
    """One test of a recent sample against a baseline sample.

    Attributes:
        test: The test's name (:data:`TestName`).
        statistic: The z statistic (positive: the recent sample is higher).
        p_value: The p-value for the alert's direction, in 0..1.
        effect: Recent minus baseline (pass rate points or mean score), in -1..1.
    """

    test: str
    statistic: float
    p_value: float
    effect: float


@dataclass(frozen=True, slots=True)
class WindowComparison:
    """The verdict on one recent window against its baseline.

    Attributes:
        test: The test used (:data:`TestName`).
        n_baseline, n_recent: Scored values in each window.
        baseline_value, recent_value: Pass rate or mean of each window (``None`` when empty).
        effect: ``recent_value - baseline_value`` (``None`` when a window is empty).
        p_value: The test's p-value, ``None`` when it was not run (too few values).
        significant: ``p_value < alpha``.
        large_enough: The effect reaches ``min_effect`` in the watched direction.
        fires: ``significant and large_enough`` (and both windows reach ``min_n``).
        reason: Why it does not fire, in a sentence (``""`` when it fires).
    """

    test: str
    n_baseline: int
    n_recent: int
    baseline_value: float | None
    recent_value: float | None
    effect: float | None
    p_value: float | None
    significant: bool
    large_enough: bool
    fires: bool
    reason: str


def _one_sided(z: float, direction: Direction) -> float:
    """The p-value of ``z`` (positive: recent higher) for ``direction``."""
    if direction == "drop":
        return _NORMAL.cdf(z)
    if direction == "rise":
        return 1.0 - _NORMAL.cdf(z)
    return min(1.0, 2.0 * (1.0 - _NORMAL.cdf(abs(z))))


def two_proportion_test(
    passed_baseline: int, n_baseline: int, passed_recent: int, n_recent: int, *, direction: Direction = "drop"
) -> TestResult:
    """The pooled two-proportion z-test of ``passed_recent / n_recent`` against the baseline's.

    ``z = (p2 - p1) / sqrt(p (1 - p) (1/n1 + 1/n2))`` with ``p`` the pooled pass rate
    (Agresti 2013, §3.1.3). When every value is equal in both windows (``p`` is 0 or 1) there is
    no evidence of a change: ``z = 0``.

    Raises:
        ValueError: A count outside ``0..n`` or a window with ``n < 1``.
    """
    for k, n in ((passed_baseline, n_baseline), (passed_recent, n_recent)):
        if n < 1 or not 0 <= k <= n:
            raise ValueError(f"two_proportion_test: {k} passed of {n} is not a sample (need 0 <= passed <= n, n >= 1)")
    p1, p2 = passed_baseline / n_baseline, passed_recent / n_recent
    pooled = (passed_baseline + passed_recent) / (n_baseline + n_recent)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / n_baseline + 1 / n_recent))
    z = 0.0 if spread == 0 else (p2 - p1) / spread
    return TestResult("two_proportion", z, _one_sided(z, direction), p2 - p1)


def rank_test(baseline: Sequence[float], recent: Sequence[float], *, direction: Direction = "drop") -> TestResult:
    """The Mann–Whitney U test of ``recent`` against ``baseline`` (normal approximation).

    ``U`` counts the (baseline, recent) pairs where the recent value is higher (ties count ½);
    ``z = (U - n1 n2 / 2 ∓ ½) / σ`` with ``σ² = n1 n2 / 12 · ((N + 1) - Σ(t³ - t) / (N (N - 1)))``
    (tie correction, ``t`` the size of each tie group; Lehmann 1975 §1.4). The continuity
    correction moves ``U`` half a step toward its mean. All values tied: ``z = 0``.

    Raises:
        ValueError: An empty sample.
    """
    n1, n2 = len(baseline), len(recent)
    if n1 < 1 or n2 < 1:
        raise ValueError(f"rank_test: both samples need values (baseline {n1}, recent {n2})")
    pooled = sorted([(float(v), 0) for v in baseline] + [(float(v), 1) for v in recent])
    total = n1 + n2
    rank_sum_recent = 0.0
    ties = 0.0
    i = 0
    while i < total:
        j = i
        while j + 1 < total and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        mid_rank = (i + j) / 2 + 1  # ranks are 1-based; a tie group shares its mean rank
        group = j - i + 1
        ties += group**3 - group
        rank_sum_recent += mid_rank * sum(1 for k in range(i, j + 1) if pooled[k][1] == 1)
        i = j + 1
    u_recent = rank_sum_recent - n2 * (n2 + 1) / 2
    mean_u = n1 * n2 / 2
    variance = n1 * n2 / 12 * ((total + 1) - ties / (total * (total - 1))) if total > 1 else 0.0
    effect = sum(recent) / n2 - sum(baseline) / n1
    if variance <= 0:
        return TestResult("rank", 0.0, _one_sided(0.0, direction), effect)
    shift = u_recent - mean_u
    corrected = math.copysign(max(0.0, abs(shift) - 0.5), shift)
    z = corrected / math.sqrt(variance)
    return TestResult("rank", z, _one_sided(z, direction), effect)


def min_sample_size(baseline_rate: float, effect: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Traces per window a one-sided two-proportion test needs to see a change of ``effect``
    from ``baseline_rate`` with probability ``power`` (Fleiss, Levin & Paik 2003, eq. 4.14,
    without the continuity correction).

    Raises:
        ValueError: ``baseline_rate`` outside 0..1, ``effect`` 0 or moving the rate out of 0..1,
            ``alpha`` or ``power`` outside (0, 1).
    """
    p2 = baseline_rate + effect
    if not 0 <= baseline_rate <= 1 or effect == 0 or not 0 <= p2 <= 1:
        raise ValueError(f"min_sample_size: rate {baseline_rate} changed by {effect} is not a rate change")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"min_sample_size: alpha {alpha} and power {power} must be in (0, 1)")
    p1 = baseline_rate
    mean = (p1 + p2) / 2
    z_a, z_b = _NORMAL.inv_cdf(1 - alpha), _NORMAL.inv_cdf(power)
    root = z_a * math.sqrt(2 * mean * (1 - mean)) + z_b * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    return max(1, math.ceil(root**2 / effect**2))


def _toward(effect: float, min_effect: float, direction: Direction) -> bool:
    if direction == "drop":
        return effect <= -min_effect
    if direction == "rise":
        return effect >= min_effect
    return abs(effect) >= min_effect


def compare_windows(
    baseline: Sequence[bool | float],
    recent: Sequence[bool | float],
    *,
    alpha: float = 0.05,
    min_effect: float = 0.05,
    min_n: int = 30,
    direction: Direction = "drop",
) -> WindowComparison:
    """Test a recent window's values against the baseline's and say whether an alert fires.

    Values that are all ``bool`` are pass/fail (:func:`two_proportion_test`); otherwise numbers
    in 0..1 (:func:`rank_test`). Errored and unscored traces must be left out by the caller:
    they are not values.

    Raises:
        ValueError: ``alpha`` outside (0, 1), ``min_effect`` below 0 or ``min_n`` below 1.
    """
    if not 0 < alpha < 1 or min_effect < 0 or min_n < 1:
        raise ValueError(f"compare_windows: alpha {alpha} in (0, 1), min_effect {min_effect} >= 0, min_n {min_n} >= 1")
    binary = all(isinstance(v, bool) for v in [*baseline, *recent])
    test: str = "two_proportion" if binary else "rank"
    n1, n2 = len(baseline), len(recent)
    base_value = sum(float(v) for v in baseline) / n1 if n1 else None
    recent_value = sum(float(v) for v in recent) / n2 if n2 else None
    effect = recent_value - base_value if base_value is not None and recent_value is not None else None
    if n1 < min_n or n2 < min_n:
        reason = f"too few scored traces (baseline n={n1}, recent n={n2}; the alert needs {min_n} in each)"
        return WindowComparison(test, n1, n2, base_value, recent_value, effect, None, False, False, False, reason)
    if binary:
        result = two_proportion_test(sum(map(bool, baseline)), n1, sum(map(bool, recent)), n2, direction=direction)
    else:
        result = rank_test([float(v) for v in baseline], [float(v) for v in recent], direction=direction)
    significant = result.p_value < alpha
    large = _toward(result.effect, min_effect, direction)
    if significant and large:
        reason = ""
    elif not significant:
        reason = f"not significant (p={result.p_value:.3g} >= alpha {alpha:g})"
    else:
        reason = f"significant, smaller than the stated effect ({result.effect:+.3f}; needs {min_effect:g} {direction})"
    return WindowComparison(
        result.test, n1, n2, base_value, recent_value, result.effect, result.p_value, significant, large,
        significant and large, reason,
    )  # fmt: skip


def sustained(fires: Sequence[bool], consecutive: int) -> bool:
    """Whether the last ``consecutive`` windows all fire (``fires`` oldest first).

    Raises:
        ValueError: ``consecutive`` below 1.
    """
    if consecutive < 1:
        raise ValueError(f"sustained: consecutive must be >= 1, got {consecutive}")
    return len(fires) >= consecutive and all(fires[-consecutive:])
