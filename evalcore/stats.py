"""Paired statistics for comparing two eval runs case by case (A = baseline, B = candidate).

* :func:`mcnemar_exact` — McNemar's test on the discordant pairs of a paired pass/fail outcome,
  in its exact form: a two-sided binomial test of ``b`` successes in ``b + c`` trials with
  p = 0.5 (McNemar 1947, "Note on the sampling error of the difference between correlated
  proportions or percentages", Psychometrika 12(2)); :func:`mcnemar_worse_p` is its one-sided
  form, the p-value of "the candidate is worse" that the baseline gate ``worse_p`` reads.
* :func:`bootstrap_pass_rate_delta` and :func:`bootstrap_mean_delta` — paired bootstrap
  confidence intervals, percentile method (Efron & Tibshirani 1993, "An Introduction to the
  Bootstrap", ch. 13), 2,000 resamples with a fixed seed so a page shows the same interval on
  every load.

* :func:`wilson_interval` and :func:`proportion_interval` — the Wilson score interval of one pass
  rate (Wilson 1927), valid at every n and never of zero width, even at 0/n or n/n (Brown, Cai
  & DasGupta 2001, "Interval estimation for a binomial proportion", Statistical Science 16(2),
  recommend it over the Wald interval ``p ± z·sqrt(p(1-p)/n)``, which is ``1.000 ± 0.000`` at
  2/2); :func:`newcombe_paired_interval`, the paired difference of two such rates built from
  them (Newcombe 1998), where a bootstrap has nothing to resample.
* :func:`mean_interval` — mean ± z standard errors of a non-binary score, given only from
  :data:`MIN_INTERVAL_CASES` cases on.

Small n. A bootstrap interval (and a standard error) rests on the sample standing for its
population, which a handful of cases cannot: one case that flipped resamples to ``[-100, -100]``
every time, and two equal scores have a standard error of 0. Below :data:`MIN_INTERVAL_CASES`
cases no such interval is given: the functions return ``None`` and :func:`too_few_cases` gives
the reason the tables, pages, API and PR summary show ("too few cases"); a verdict on so few
cases never calls a difference (:func:`verdict`).

Repeats. A case run several times (``--repeat``) is still one case: its repeats share the
case's difficulty and are not independent draws. The unit of inference is the case (cluster or
"case-level" resampling; Miller 2024, "Adding Error Bars to Evals: A Statistical Approach to
Language Model Evaluations", arXiv:2411.00640, sections 2 and 3 on clustered questions and on
resampling answers): every minimum-n rule counts distinct cases, never (case, repeat) pairs, and
with repeats each case's repeats are first averaged (its pass share, its mean score) and the
paired tests and intervals run on those per-case values (:func:`case_level_pass_delta`). With one
repeat per case the per-case values are the outcomes themselves and every figure is unchanged.

Resampling n pairs with replacement only changes how many times each *distinct* pair is drawn,
so a resample is one multinomial draw over the distinct values. For pass/fail pairs there are
four cells (both pass, A only, B only, neither), which makes the pass-rate interval O(resamples)
whatever n is. Mean deltas use the same idea over the distinct per-case differences.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "MIN_INTERVAL_CASES",
    "TOO_FEW_CASES",
    "ConfidenceInterval",
    "FigureInterval",
    "PairedCounts",
    "Verdict",
    "bootstrap_mean_delta",
    "bootstrap_pass_rate_delta",
    "case_level_pass_delta",
    "constant_sample_bounds",
    "mcnemar_exact",
    "mcnemar_worse_p",
    "mean_interval",
    "metric_interval",
    "newcombe_independent_interval",
    "newcombe_paired_interval",
    "proportion_interval",
    "too_few_cases",
    "verdict",
    "wilson_interval",
]

DEFAULT_RESAMPLES = 2000
"""Bootstrap resamples (Efron & Tibshirani 1993 suggest >= 1,000 for percentile intervals)."""

DEFAULT_SEED = 20240101
"""Fixed seed: the same two runs always get the same interval."""

MIN_INTERVAL_CASES = 10
"""Fewest distinct cases (never (case, repeat) pairs) for an interval that rests on the sample
standing for its population: a bootstrap interval of a delta, a mean's standard error. Below
it there is no such interval ("too few cases"), and no verdict calls a difference. Wilson
intervals of a pass rate need no minimum, but their n is distinct cases too."""

TOO_FEW_CASES = "too few cases"
"""The words every surface shows in place of an interval below :data:`MIN_INTERVAL_CASES`."""

Z_95 = 1.959963984540054
"""The standard normal's 97.5% quantile: two-sided 95% intervals."""

_MAX_EXACT_DISTINCT = 256
"""Above this many distinct differences, values are rounded to a 0.001 grid (see bootstrap_mean_delta)."""


@dataclass(frozen=True, slots=True)
class PairedCounts:
    """The 2x2 table of paired pass/fail outcomes over cases present in both runs.

    Attributes:
        both: Passed in A and in B.
        a_only: Passed in A, not in B (a regression, "pass -> fail"); McNemar's ``b``.
        b_only: Passed in B, not in A (an improvement, "fail -> pass"); McNemar's ``c``.
        neither: Passed in neither.
    """

    both: int
    a_only: int
    b_only: int
    neither: int

    @property
    def n(self) -> int:
        """Number of pairs."""
        return self.both + self.a_only + self.b_only + self.neither

    @property
    def pass_rate_a(self) -> float | None:
        """A's pass rate over the pairs (0..1), ``None`` when there are none."""
        return (self.both + self.a_only) / self.n if self.n else None

    @property
    def pass_rate_b(self) -> float | None:
        """B's pass rate over the pairs (0..1), ``None`` when there are none."""
        return (self.both + self.b_only) / self.n if self.n else None

    @property
    def delta(self) -> float | None:
        """B's pass rate minus A's (-1..1), ``None`` when there are no pairs."""
        return (self.b_only - self.a_only) / self.n if self.n else None


@dataclass(frozen=True, slots=True)
class ConfidenceInterval:
    """An interval of a delta (B minus A), in the delta's own unit (0..1 scale).

    Attributes:
        estimate: The observed delta.
        low, high: Bounds (percentiles of the resampled deltas for a bootstrap).
        confidence: Coverage, e.g. 0.95.
        resamples: Bootstrap resamples drawn (0 for a closed-form interval).
        n: Pairs the delta is computed over.
        method: ``bootstrap`` (paired percentile bootstrap), ``newcombe`` (Newcombe 1998's
            hybrid score interval, :func:`newcombe_paired_interval`) or ``wilson_bound`` (every
            difference equal: :func:`constant_sample_bounds`).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int
    n: int
    method: str = "bootstrap"

    @property
    def excludes_zero(self) -> bool:
        """True when 0 lies outside [low, high]."""
        return self.low > 0 or self.high < 0


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for ``b`` and ``c`` discordant pairs.

    ``p = min(1, 2 * sum_{k <= min(b, c)} C(b + c, k) * 0.5 ** (b + c))`` (McNemar 1947, exact
    binomial form). With no discordant pairs the p-value is 1.

    Args:
        b: Pairs passing in A only.
        c: Pairs passing in B only.

    Returns:
        The p-value in 0..1.

    Raises:
        ValueError: A negative count.
    """
    if b < 0 or c < 0:
        raise ValueError("counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * _binomial_lower_tail(n, min(b, c)))


def mcnemar_worse_p(b: int, c: int) -> float:
    """One-sided exact McNemar p-value that B is worse than A: ``P(X >= b)`` for
    ``X ~ Binomial(b + c, 0.5)``, the chance of at least ``b`` regressions among the ``b + c``
    flips if a flip were equally likely either way (the exact binomial form of McNemar 1947,
    one tail). Small when regressions outnumber improvements by more than chance; 1 with no
    flips, and at least 0.5 whenever ``b <= c``.

    Args:
        b: Pairs passing in A only (regressions, pass -> fail).
        c: Pairs passing in B only (improvements, fail -> pass).

    Returns:
        The p-value in 0..1.

    Raises:
        ValueError: A negative count.
    """
    if b < 0 or c < 0:
        raise ValueError("counts must be >= 0")
    n = b + c
    if n == 0 or b == 0:
        return 1.0
    if b > c:  # P(X >= b) = P(X <= c) by symmetry, c below the mode
        return min(1.0, _binomial_lower_tail(n, c))
    # b <= c: 1 - P(X <= b - 1), with b - 1 below the mode
    return min(1.0, max(0.0, 1.0 - _binomial_lower_tail(n, b - 1)))


def _binomial_lower_tail(n: int, k: int) -> float:
    """``P(X <= k)`` for ``X ~ Binomial(n, 0.5)``, ``k <= n / 2``."""
    if n <= 1000:
        # Exact integer arithmetic while the numbers stay small.
        tail = sum(math.comb(n, i) for i in range(k + 1))
        return float(tail / 2**n)
    # Large n: sum the same terms in log space from i = k downwards; they shrink at least
    # geometrically below the mode, so the loop stops after a few hundred terms at most and
    # big-integer binomials (seconds for 50,000 discordant pairs) are never formed.
    log_half_n = n * math.log(2.0)
    lg_n = math.lgamma(n + 1)
    total = 0.0
    for i in range(k, -1, -1):
        term = math.exp(lg_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) - log_half_n)
        total += term
        if term < total * 1e-17:
            break
    return total


def _percentile_interval(deltas: list[float], estimate: float, confidence: float, n: int) -> ConfidenceInterval:
    deltas.sort()
    alpha = (1.0 - confidence) / 2.0
    count = len(deltas)
    lo_index = min(count - 1, max(0, math.floor(alpha * count)))
    hi_index = min(count - 1, max(0, math.ceil((1.0 - alpha) * count) - 1))
    return ConfidenceInterval(estimate, deltas[lo_index], deltas[hi_index], confidence, count, n)


def _check(resamples: int, confidence: float) -> None:
    if resamples < 1:
        raise ValueError("resamples must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")


def bootstrap_pass_rate_delta(
    counts: PairedCounts,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    min_n: int = MIN_INTERVAL_CASES,
) -> ConfidenceInterval | None:
    """Paired bootstrap interval of B's pass rate minus A's.

    Only from ``min_n`` pairs on (:data:`MIN_INTERVAL_CASES`): below, ``None`` (too few cases).
    When the resamples cannot vary (no case flipped, or every case flipped the same way) the
    percentile interval would have no width; Newcombe's paired score interval
    (:func:`newcombe_paired_interval`) is given instead.

    Each resample draws n pairs with replacement, i.e. a multinomial over the four cells; only
    the two discordant cells move the delta, drawn as ``x ~ Bin(n, p_a_only)`` then
    ``y ~ Bin(n - x, p_b_only / (1 - p_a_only))``, and the delta is ``(y - x) / n``. Cost is
    O(resamples), independent of n (percentile method, Efron & Tibshirani 1993).

    Args:
        counts: The 2x2 table.
        resamples: Number of resamples.
        seed: Seed of ``random.Random``; the same inputs give the same interval.
        confidence: Coverage in (0, 1).
        min_n: Fewest pairs for an interval.

    Returns:
        The interval on the 0..1 scale, or ``None`` below ``min_n`` pairs (none at 0).

    Raises:
        ValueError: Bad ``resamples`` or ``confidence``.
    """
    _check(resamples, confidence)
    n = counts.n
    if n == 0 or n < min_n:
        return None
    rng = random.Random(seed)
    p_b = counts.a_only / n
    rest = 1.0 - p_b
    p_c = min(1.0, counts.b_only / n / rest) if rest > 0 else 0.0
    deltas: list[float] = []
    for _ in range(resamples):
        x = rng.binomialvariate(n, p_b) if 0 < p_b < 1 else round(n * p_b)
        left = n - x
        y = rng.binomialvariate(left, p_c) if 0 < p_c < 1 and left > 0 else round(left * p_c)
        deltas.append((y - x) / n)
    interval = _percentile_interval(deltas, counts.delta or 0.0, confidence, n)
    if interval.low == interval.high:
        return newcombe_paired_interval(counts, confidence=confidence)
    return interval


def bootstrap_mean_delta(
    differences: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    min_n: int = MIN_INTERVAL_CASES,
) -> ConfidenceInterval | None:
    """Paired bootstrap interval of a mean per-case difference (B's score minus A's), from
    ``min_n`` pairs on (:data:`MIN_INTERVAL_CASES`; below, ``None``: too few cases).

    A resample of n differences is a multinomial draw over the distinct values, so its mean is
    ``sum(count_v * v) / n``. Scores are usually few-valued (booleans, k/n fractions), which
    makes this exact and cheap. With more than 256 distinct values the differences are first
    rounded to a 0.001 grid (at most 2,001 values for scores in 0..1), which moves any mean by
    at most 0.0005. The draws come from numpy's multinomial (``default_rng(seed)``).

    When every difference is the same value the resamples cannot vary; the interval is then
    :func:`constant_sample_bounds` over -1..1 (``method="wilson_bound"``), never of zero width.

    Args:
        differences: One value per pair (B minus A), finite, in -1..1.
        resamples: Number of resamples.
        seed: Fixed seed; the same inputs give the same interval.
        confidence: Coverage in (0, 1).
        min_n: Fewest pairs for an interval.

    Returns:
        The interval, or ``None`` below ``min_n`` differences (none at 0).

    Raises:
        ValueError: Bad ``resamples`` or ``confidence``.
    """
    import numpy as np  # imported on use: a run that never compares never loads it (~40 ms, ~10 MB)

    _check(resamples, confidence)
    n = len(differences)
    if n == 0 or n < min_n:
        return None
    estimate = math.fsum(differences) / n
    counter = Counter(differences)
    if len(counter) > _MAX_EXACT_DISTINCT:
        counter = Counter(round(v, 3) for v in differences)
    values = list(counter)
    weights = [counter[v] / n for v in values]
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, np.asarray(weights), size=resamples)
    means = draws @ np.asarray(values, dtype=float) / n
    deltas = [float(m) for m in means]
    interval = _percentile_interval(deltas, estimate, confidence, n)
    if interval.low == interval.high and len(counter) == 1:
        # every difference equal: resampling cannot vary, so bound the mean instead (scores in 0..1)
        low, high = constant_sample_bounds(estimate, n, min(-1.0, estimate), max(1.0, estimate), confidence=confidence)
        return ConfidenceInterval(estimate, low, high, confidence, 0, n, method="wilson_bound")
    return interval


def case_level_pass_delta(
    shares: Sequence[tuple[float, float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    min_n: int = MIN_INTERVAL_CASES,
) -> tuple[PairedCounts, ConfidenceInterval | None]:
    """The paired pass-rate comparison of runs that repeat cases, with the case as the unit.

    ``shares`` holds one ``(pass share in A, pass share in B)`` per distinct case (the share of
    the case's repeats that passed). The test is the exact sign test on the per-case differences
    (Dixon & Mood 1946, "The statistical sign test", JASA 41(236); ties left out), returned as a
    :class:`PairedCounts` over *cases* (``a_only``: cases whose share fell, ``b_only``: rose,
    ``both``: unchanged) so that :func:`verdict` reads it as it reads McNemar's table (with one
    repeat per case the two coincide). The interval is the paired bootstrap of the mean per-case
    difference (:func:`bootstrap_mean_delta`), i.e. a cluster bootstrap that resamples cases with
    all their repeats (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640). Below
    ``min_n`` distinct cases: no interval.

    Returns:
        ``(sign table over cases, interval or None)``.
    """
    differences = [b - a for a, b in shares]
    fell = sum(1 for d in differences if d < 0)
    rose = sum(1 for d in differences if d > 0)
    counts = PairedCounts(both=len(differences) - fell - rose, a_only=fell, b_only=rose, neither=0)
    interval = bootstrap_mean_delta(differences, resamples=resamples, seed=seed, confidence=confidence, min_n=min_n)
    return counts, interval


@dataclass(frozen=True, slots=True)
class Verdict:
    """A plain-language reading of a comparison.

    Attributes:
        outcome: ``"b_better"``, ``"a_better"``, ``"no_difference"``, ``"inconclusive"``,
            ``"too_few_cases"`` (fewer than :data:`MIN_INTERVAL_CASES` pairs) or ``"no_pairs"``.
        text: One sentence for the page, e.g. "B is better than A: p=0.003, CI of delta
            [+2.1, +7.9] points excludes 0".
        p_value: McNemar exact p.
        significant: p < alpha and the interval excludes 0.
    """

    outcome: str
    text: str
    p_value: float
    significant: bool


def _points(value: float) -> str:
    return f"{value * 100:+.1f}"


def verdict(
    counts: PairedCounts, interval: ConfidenceInterval | None, *, alpha: float = 0.05, per_case: bool = False
) -> Verdict:
    """Read the McNemar test and the pass-rate interval together.

    A difference is called only when both agree: p < ``alpha`` and the interval excludes 0.
    When they disagree (possible near the threshold) the reading is "inconclusive". Below
    :data:`MIN_INTERVAL_CASES` pairs (no interval) nothing is called: "too few cases".

    Args:
        counts: The 2x2 table.
        interval: The bootstrap interval of the pass-rate delta (B minus A); ``None`` below
            the minimum n.
        alpha: Significance level.
        per_case: ``counts`` is the sign table over cases of :func:`case_level_pass_delta` (runs
            with repeats): the "too few cases" text then counts cases whose pass share fell / rose.

    Returns:
        The verdict.
    """
    p = mcnemar_exact(counts.a_only, counts.b_only)
    if counts.n == 0:
        return Verdict("no_pairs", "no cases in common: nothing to compare", p, False)
    if interval is None:
        flips = (
            f"pass share fell on {counts.a_only}, rose on {counts.b_only}"
            if per_case
            else f"{counts.a_only} pass → fail, {counts.b_only} fail → pass"
        )
        return Verdict(
            "too_few_cases",
            f"{TOO_FEW_CASES} to compare: {counts.n} in common ({flips}); "
            f"no interval or verdict below {MIN_INTERVAL_CASES}",
            p,
            False,
        )
    ci = f"CI of delta [{_points(interval.low)}, {_points(interval.high)}] points"
    p_text = f"p={p:.3g}" if p >= 0.001 else "p<0.001"
    if counts.a_only + counts.b_only == 0:
        return Verdict(
            "no_difference",
            f"no significant difference in pass rate: no case flipped between A and B ({counts.n} cases)",
            p,
            False,
        )
    if p < alpha and interval.excludes_zero:
        better = "b_better" if interval.low > 0 else "a_better"
        head = "B is better than A" if better == "b_better" else "B is worse than A"
        return Verdict(better, f"{head}: {p_text}, {ci} excludes 0", p, True)
    if p >= alpha and not interval.excludes_zero:
        return Verdict("no_difference", f"no significant difference in pass rate: {p_text}, {ci} includes 0", p, False)
    return Verdict(
        "inconclusive",
        f"inconclusive: {p_text} but {ci} {'excludes' if interval.excludes_zero else 'includes'} 0",
        p,
        False,
    )


def wilson_interval(successes: int, n: int, *, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson score interval of a proportion ``successes / n`` (Wilson 1927, "Probable inference,
    the law of succession, and statistical inference", JASA 22(158)); 95% by default.

    ``(centre +- half) / (1 + z^2/n)`` with ``centre = p + z^2/(2n)`` and
    ``half = z * sqrt(p(1-p)/n + z^2/(4n^2))``. Unlike the Wald interval it stays inside 0..1 and
    is not empty at p = 0 or 1, and its coverage stays near 95% down to n = 1 (Brown, Cai &
    DasGupta 2001, "Interval estimation for a binomial proportion", Statistical Science 16(2)):
    1/1 gives about ``[0.207, 1]``, 2/2 ``[0.342, 1]``, 0/2 ``[0, 0.658]``.

    Returns:
        ``(low, high)`` in 0..1, or ``None`` when ``n`` is 0.

    Raises:
        ValueError: ``successes`` outside 0..n.
    """
    if n == 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..{n}, got {successes}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # at 0/n and n/n the bound is exactly 0 or 1 (rounding would leave 0.9999999999999999)
    low = 0.0 if successes == 0 else max(0.0, (centre - half) / denominator)
    high = 1.0 if successes == n else min(1.0, (centre + half) / denominator)
    return low, high


def newcombe_paired_interval(counts: PairedCounts, *, confidence: float = 0.95) -> ConfidenceInterval | None:
    """Newcombe's hybrid score interval of a paired difference of proportions, B's pass rate minus
    A's (Newcombe 1998, "Improved confidence intervals for the difference between binomial
    proportions based on paired data", Statistics in Medicine 17(22), method 10).

    With ``p1`` = B's rate and its Wilson interval ``(l1, u1)``, ``p2`` = A's and ``(l2, u2)``,
    ``phi`` the correlation of the 2x2 table (0 when a margin is empty)::

        low  = d - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)
        high = d + sqrt((u1 - p1)^2 - 2 phi (u1 - p1)(p2 - l2) + (p2 - l2)^2)

    Valid at every n and never of zero width (the Wilson bounds never are), so it stands in where
    a paired bootstrap cannot vary.

    Returns:
        The interval (``method="newcombe"``, ``resamples=0``), or ``None`` without pairs.

    Raises:
        ValueError: ``confidence`` outside (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    n = counts.n
    if n == 0:
        return None
    z = _normal_quantile(1.0 - (1.0 - confidence) / 2.0)
    passed_b, passed_a = counts.both + counts.b_only, counts.both + counts.a_only
    p1, p2 = passed_b / n, passed_a / n
    l1, u1 = wilson_interval(passed_b, n, z=z) or (0.0, 1.0)
    l2, u2 = wilson_interval(passed_a, n, z=z) or (0.0, 1.0)
    margins = passed_b * (n - passed_b) * passed_a * (n - passed_a)
    # rows are B's outcome, columns A's: e = both, f = B only, g = A only, h = neither
    phi = (counts.both * counts.neither - counts.b_only * counts.a_only) / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return ConfidenceInterval(d, max(-1.0, low), min(1.0, high), confidence, 0, n, method="newcombe")


def newcombe_independent_interval(successes_1: int, n_1: int, successes_2: int, n_2: int) -> tuple[float, float] | None:
    """95% interval of ``p1 - p2`` for two independent proportions (two splits of a run hold
    different cases): Newcombe's hybrid score interval from the two Wilson intervals (Newcombe
    1998, "Interval estimation for the difference between independent proportions: comparison
    of eleven methods", Statistics in Medicine 17(8), method 10)::

        low  = d - sqrt((p1 - l1)^2 + (u2 - p2)^2)
        high = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)

    Unlike the Wald interval it is never of zero width (at 2/2 vs 2/2 the Wald interval is
    ``0 ± 0``).

    Returns:
        ``(low, high)`` in -1..1, or ``None`` when either group is empty.

    Raises:
        ValueError: A count outside 0..n.
    """
    first, second = wilson_interval(successes_1, n_1), wilson_interval(successes_2, n_2)
    if first is None or second is None:
        return None
    p1, p2 = successes_1 / n_1, successes_2 / n_2
    (l1, u1), (l2, u2) = first, second
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


def _normal_quantile(q: float) -> float:
    """The standard normal quantile (``statistics.NormalDist``; 1.95996... at 0.975)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)


def constant_sample_bounds(
    value: float, n: int, lowest: float, highest: float, *, confidence: float = 0.95
) -> tuple[float, float]:
    """95% bounds of a mean when all ``n`` observed values equal ``value`` and every value lies in
    ``lowest..highest`` (scores in 0..1, their differences in -1..1).

    The share ``q`` of the population equal to ``value`` is at least the Wilson lower bound ``l``
    of ``n`` successes in ``n`` (Wilson 1927); the rest may lie anywhere in the range, so the mean
    lies in ``[l·value + (1-l)·lowest, l·value + (1-l)·highest]``. Conservative, valid at every n,
    and never of zero width: 20 cases that all moved by -1 give ``[-1, -0.68]``, not ``[-1, -1]``.

    Raises:
        ValueError: ``n`` < 1 or ``value`` outside the range.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    if not lowest <= value <= highest:
        raise ValueError(f"value {value} outside {lowest}..{highest}")
    z = _normal_quantile(1.0 - (1.0 - confidence) / 2.0)
    share, _ = wilson_interval(n, n, z=z) or (0.0, 1.0)
    return share * value + (1 - share) * lowest, share * value + (1 - share) * highest


def too_few_cases(n: int, *, minimum: int = MIN_INTERVAL_CASES) -> str | None:
    """Why a figure of ``n`` cases has no interval, or ``None`` when it may have one.

    Returns:
        ``"no cases"`` at 0, ``"too few cases (n=2; an interval needs at least 10)"`` below
        ``minimum``, else ``None``.
    """
    if n <= 0:
        return "no cases"
    if n < minimum:
        return f"{TOO_FEW_CASES} (n={n}; an interval needs at least {minimum})"
    return None


@dataclass(frozen=True, slots=True)
class FigureInterval:
    """A 95% interval of one figure of one run (a pass rate or a mean score), or why it has none.

    Attributes:
        low, high: Bounds in 0..1 (``None`` when there is no interval).
        method: ``wilson`` (a pass rate: :func:`wilson_interval`), ``normal`` (a mean ± 1.96
            standard errors, kept in 0..1), ``wilson_bound`` (every value equal:
            :func:`constant_sample_bounds`) or ``None``.
        reason: Why there is no interval (``"too few cases (n=2; …)"``), ``None`` when there is one.
    """

    low: float | None
    high: float | None
    method: str | None
    reason: str | None


def proportion_interval(successes: int, n: int) -> FigureInterval:
    """The Wilson 95% interval of ``successes / n`` (Wilson 1927; Brown, Cai & DasGupta 2001):
    given at every n from 1, never of zero width. At n = 0: no interval, reason ``"no cases"``.

    Raises:
        ValueError: ``successes`` outside 0..n.
    """
    bounds = wilson_interval(successes, n)
    if bounds is None:
        return FigureInterval(None, None, None, "no cases")
    return FigureInterval(bounds[0], bounds[1], "wilson", None)


def mean_interval(mean: float | None, stderr: float | None, n: int) -> FigureInterval:
    """A mean score's 95% interval, ``mean ± 1.96 · stderr`` kept in 0..1 (the normal
    approximation), from :data:`MIN_INTERVAL_CASES` cases on; below, ``"too few cases"``.

    A standard error of 0 (every value equal) is not a certainty about the next cases: the
    interval is then :func:`constant_sample_bounds` (``method="wilson_bound"``).
    """
    reason = too_few_cases(n)
    if reason is not None or mean is None:
        return FigureInterval(None, None, None, reason or "no values")
    if stderr is None:
        return FigureInterval(None, None, None, "no standard error")
    if stderr <= 0.0:
        low, high = constant_sample_bounds(mean, n, min(0.0, mean), max(1.0, mean))
        return FigureInterval(low, high, "wilson_bound", None)
    return FigureInterval(max(0.0, mean - Z_95 * stderr), min(1.0, mean + Z_95 * stderr), "normal", None)


def metric_interval(n: int, mean: float | None, stderr: float | None, *, binary: bool) -> FigureInterval:
    """The interval a run's aggregate of one score shows: Wilson for a pass/fail score (``binary``:
    every value a bool, ``mean`` the share of true), else :func:`mean_interval`."""
    if mean is None:
        return FigureInterval(None, None, None, "no values" if n else "no cases")
    if binary:
        return proportion_interval(min(n, max(0, round(mean * n))), n)
    return mean_interval(mean, stderr, n)
