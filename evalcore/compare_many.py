"""Comparing k >= 2 runs of one set at once (a bake-off): paired tests against a baseline, a
ranking with intervals, the groups no test can tell from the best, a flip matrix, and which
variants sit on the quality x cost x latency Pareto front.

**Input: outcome patterns.** Every statistic here is paired over the cases all k runs hold, and a
case enters only through its vector of per-variant outcomes (its pass share in each run: 0 or 1
with one repeat per case). Resampling cases with replacement only changes how often each
*distinct* vector is drawn, so the data are :class:`OutcomePattern` rows (a vector and how many
cases have it; at most 2^k of them with one repeat) and a resample is one multinomial draw over
them, whatever the number of cases (the same idea as :func:`evalcore.stats.bootstrap_mean_delta`).
The Django side builds the patterns with one SQL ``GROUP BY``.

**Pairs.** Each candidate against the baseline gets the A/B page's own reading
(:func:`pair_reading`): McNemar's exact test and the paired bootstrap of the pass-rate delta
(:func:`evalcore.stats.bootstrap_pass_rate_delta`, :func:`evalcore.stats.verdict`); with repeats,
the sign test over cases and the case-level bootstrap (:func:`evalcore.stats.case_level_pass_delta`).
The k - 1 p-values form one family, corrected with Holm's step-down method
(:func:`evalcore.slices.holm`; Holm 1979); a pair's difference is called only when its corrected p
is below alpha *and* its interval excludes 0.

**Ranking.** Variants are ordered by pass rate; each rate has its 95% interval (Wilson 1927 with
one repeat per case, valid at every n; with repeats the percentile interval of the joint
case-level bootstrap, from :data:`~evalcore.stats.MIN_INTERVAL_CASES` cases on), and each variant
its 95% rank interval: the 2.5th and 97.5th percentiles of its rank over 2,000 joint paired
bootstrap resamples (seeded: the same runs give the same ranks; rank = 1 + variants strictly
better in the resample). A variant is **indistinguishable from the best** unless its paired test
against the top variant, Holm-corrected over the k - 1 tests against the top, calls it worse
(corrected p < alpha and the interval excludes 0). Below the minimum n nothing is called, so
every variant is in the top group ("too few cases").

**Pareto.** :func:`pareto_marks` marks each variant on the front or dominated (another is at least
as good on every axis it and the other both have and better on one), and a dominated variant as
*clearly* dominated when on some axis the dominating variant's whole interval is better than its
whole interval (intervals apart), else dominated "by the estimates only".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from evalcore.slices import holm
from evalcore.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    ConfidenceInterval,
    FigureInterval,
    PairedCounts,
    Verdict,
    bootstrap_pass_rate_delta,
    case_level_pass_delta,
    mcnemar_exact,
    proportion_interval,
    too_few_cases,
    verdict,
)

__all__ = [
    "MAX_VARIANTS",
    "Axis",
    "ManyComparison",
    "OutcomePattern",
    "PairReading",
    "ParetoMark",
    "ParetoPoint",
    "RankEntry",
    "compare_many",
    "flip_matrix",
    "pair_reading",
    "pareto_marks",
]

MAX_VARIANTS = 20
"""Most runs one comparison takes (the SQL joins one copy of the results per run)."""


@dataclass(frozen=True, slots=True)
class OutcomePattern:
    """Cases sharing one vector of per-variant outcomes.

    Attributes:
        values: One value per variant, in the comparison's order: the case's pass share in that
            run (0 or 1 with one repeat; k/r with r repeats), 0..1.
        cases: Distinct cases with this vector (>= 1).
        repeats: (case, repeat) pairs per such case (1 without repeats).
    """

    values: tuple[float, ...]
    cases: int
    repeats: int = 1


@dataclass(frozen=True, slots=True)
class PairReading:
    """One variant against another (A the reference, B the candidate), as the A/B page reads it.

    Attributes:
        a, b: Indices of the two variants.
        counts: The 2x2 pass/fail table over (case, repeat) pairs; with repeats the sign table over
            cases (``a_only``: cases whose pass share fell).
        interval: 95% paired bootstrap interval of B's pass rate minus A's (0..1 units), ``None``
            below :data:`~evalcore.stats.MIN_INTERVAL_CASES` cases.
        verdict: The A/B page's uncorrected plain-language reading.
        p_value: The uncorrected two-sided p (McNemar exact, or the sign test over cases).
        p_holm: ``p_value`` Holm-corrected over its family.
        significant: ``p_holm < alpha`` and the interval excludes 0.
        text: The corrected reading in one sentence.
        delta: B's pass rate minus A's over the shared cases (mean pass-share change with
            repeats), -1..1; ``None`` without cases.
    """

    a: int
    b: int
    delta: float | None
    counts: PairedCounts
    interval: ConfidenceInterval | None
    verdict: Verdict
    p_value: float
    p_holm: float = 1.0
    significant: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class RankEntry:
    """One variant's place in the ranking.

    Attributes:
        variant: Its index in the comparison's order.
        pass_rate: Pass rate over the cases every run holds (mean pass share with repeats), 0..1.
        interval: Its 95% interval (see the module docstring), or why there is none.
        rank_low, rank_high: 95% interval of its rank (1 = best) over the joint bootstrap;
            ``None`` below the minimum n.
        to_best: The paired reading of this variant against the top one (``None`` for the top).
        tied_with_best: No corrected test tells it from the top variant.
    """

    variant: int
    pass_rate: float
    interval: FigureInterval
    rank_low: int | None
    rank_high: int | None
    to_best: PairReading | None
    tied_with_best: bool


@dataclass(frozen=True, slots=True)
class ManyComparison:
    """k runs compared on the cases all of them hold.

    Attributes:
        k: Variants compared.
        baseline: Index of the baseline.
        n_cases: Distinct cases every run holds (the paired n).
        n_pairs: (case, repeat) pairs every run holds (``n_cases`` without repeats).
        repeated: Some case has more than one repeat (the case is then the unit).
        ranking: Best first.
        pairs: Each candidate against the baseline, in the comparison's order (baseline left out),
            Holm-corrected over these k - 1 tests.
        flips: ``flips[i][j]``: cases variant i passed and j failed (with repeats: cases whose pass
            share is higher in i than in j); 0 on the diagonal.
        reason: Why no interval or call is made (``"too few cases (n=4; ...)"``), else ``None``.
    """

    k: int
    baseline: int
    n_cases: int
    n_pairs: int
    repeated: bool
    ranking: list[RankEntry]
    pairs: list[PairReading]
    flips: list[list[int]]
    reason: str | None

    @property
    def best_group(self) -> list[int]:
        """Indices of the variants indistinguishable from the best (the best included)."""
        return [entry.variant for entry in self.ranking if entry.tied_with_best]


def _check_patterns(patterns: Sequence[OutcomePattern]) -> int:
    if not patterns:
        return 0
    k = len(patterns[0].values)
    for index, pattern in enumerate(patterns):
        if len(pattern.values) != k:
            raise ValueError(f"patterns[{index}].values has {len(pattern.values)} values, expected {k}")
        if pattern.cases < 1 or pattern.repeats < 1:
            raise ValueError(f"patterns[{index}]: cases and repeats must be >= 1")
        if any(not 0.0 <= v <= 1.0 for v in pattern.values):
            raise ValueError(f"patterns[{index}].values must lie in 0..1")
    return k


def _paired_counts(patterns: Sequence[OutcomePattern], a: int, b: int) -> PairedCounts:
    """The 2x2 table of A vs B over (case, repeat) pairs (one repeat per case)."""
    both = a_only = b_only = neither = 0
    for p in patterns:
        pass_a, pass_b = p.values[a] >= 0.5, p.values[b] >= 0.5
        if pass_a and pass_b:
            both += p.cases
        elif pass_a:
            a_only += p.cases
        elif pass_b:
            b_only += p.cases
        else:
            neither += p.cases
    return PairedCounts(both=both, a_only=a_only, b_only=b_only, neither=neither)


def pair_reading(
    patterns: Sequence[OutcomePattern],
    a: int,
    b: int,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> PairReading:
    """Variant ``b`` against variant ``a`` read as the A/B page reads two runs (uncorrected:
    ``p_holm`` is ``p_value`` until a family corrects it).

    One repeat per case: McNemar's exact test and the paired bootstrap over the 2x2 table
    (:func:`evalcore.stats.bootstrap_pass_rate_delta`). With repeats: the sign test over cases and
    the case-level bootstrap of pass shares (:func:`evalcore.stats.case_level_pass_delta`).

    Raises:
        ValueError: Malformed patterns.
    """
    _check_patterns(patterns)
    if any(p.repeats > 1 for p in patterns):
        shares = [(p.values[a], p.values[b]) for p in patterns for _ in range(p.cases)]
        counts, interval = case_level_pass_delta(shares, resamples=resamples, seed=seed)
        reading = verdict(counts, interval, per_case=True)
    else:
        counts = _paired_counts(patterns, a, b)
        interval = bootstrap_pass_rate_delta(counts, resamples=resamples, seed=seed)
        reading = verdict(counts, interval)
    p_value = mcnemar_exact(counts.a_only, counts.b_only)
    n_cases = sum(p.cases for p in patterns)
    delta = math.fsum((p.values[b] - p.values[a]) * p.cases for p in patterns) / n_cases if n_cases else None
    return PairReading(
        a,
        b,
        delta,
        counts,
        interval,
        reading,
        p_value,
        p_holm=p_value,
        significant=reading.significant,
        text=reading.text,
    )


def _corrected(readings: list[PairReading], alpha: float, family: str) -> list[PairReading]:
    """The readings with Holm-corrected p-values over the family and the corrected sentence."""
    adjusted = holm([r.p_value for r in readings])
    out = []
    for reading, p_holm in zip(readings, adjusted, strict=True):
        significant = reading.interval is not None and p_holm < alpha and reading.interval.excludes_zero
        text = reading.verdict.text
        if reading.verdict.significant and not significant:
            text = (
                f"not significant after correcting for {len(readings)} {family} (Holm p={p_holm:.3g}); "
                f"uncorrected: {reading.verdict.text}"
            )
        elif significant:
            text = f"{reading.verdict.text} (Holm p={p_holm:.3g} over {len(readings)} {family})"
        out.append(
            PairReading(
                reading.a,
                reading.b,
                reading.delta,
                reading.counts,
                reading.interval,
                reading.verdict,
                reading.p_value,
                p_holm=p_holm,
                significant=significant,
                text=text,
            )
        )
    return out


def flip_matrix(patterns: Sequence[OutcomePattern], *, variants: int | None = None) -> list[list[int]]:
    """``m[i][j]``: cases variant i passed and variant j failed (with repeats: cases whose pass share
    is higher in i than in j). O(patterns x k^2). ``variants``: k when ``patterns`` is empty.

    Raises:
        ValueError: Malformed patterns.
    """
    k = _check_patterns(patterns) or (variants or 0)
    matrix = [[0] * k for _ in range(k)]
    for p in patterns:
        for i in range(k):
            for j in range(k):
                if p.values[i] > p.values[j]:
                    matrix[i][j] += p.cases
    return matrix


def _rates(patterns: Sequence[OutcomePattern], n_cases: int, k: int) -> list[float]:
    return [math.fsum(p.values[i] * p.cases for p in patterns) / n_cases for i in range(k)] if n_cases else [0.0] * k


def compare_many(
    patterns: Sequence[OutcomePattern],
    *,
    baseline: int = 0,
    variants: int | None = None,
    alpha: float = 0.05,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> ManyComparison:
    """Compare k variants given the outcome patterns of the cases they all hold.

    Cost: O(resamples x patterns x k) for the joint bootstrap plus k - 1 + k - 1 paired readings
    (each O(resamples)), whatever the number of cases.

    Args:
        patterns: The cases' outcome vectors (see :class:`OutcomePattern`), all of length k.
        baseline: Index of the baseline variant.
        variants: k, needed only when ``patterns`` is empty (no case in every run): every run is
            then listed with no cases, no interval and no call.
        alpha: Significance level of every corrected call.
        resamples: Bootstrap resamples (ranks, and each paired interval).
        seed: Seed of every draw; the same inputs give the same figures.

    Returns:
        The comparison (see :class:`ManyComparison`).

    Raises:
        ValueError: Malformed patterns, fewer than 2 variants or more than :data:`MAX_VARIANTS`,
            or a baseline index outside 0..k-1.
    """
    import numpy as np  # imported on use: a run that never compares never loads it

    k = _check_patterns(patterns) or (variants or 0)
    if variants is not None and k != variants:
        raise ValueError(f"patterns hold {k} variants, variants says {variants}")
    if k and not 2 <= k <= MAX_VARIANTS:
        raise ValueError(f"compare 2..{MAX_VARIANTS} variants, got {k}")
    if k and not 0 <= baseline < k:
        raise ValueError(f"baseline index {baseline} outside 0..{k - 1}")
    if not k:
        return ManyComparison(0, baseline, 0, 0, False, [], [], [], "no cases")
    n_cases = sum(p.cases for p in patterns)
    n_pairs = sum(p.cases * p.repeats for p in patterns)
    repeated = n_pairs > n_cases
    reason = too_few_cases(n_cases)
    rates = _rates(patterns, n_cases, k)

    pairs = [pair_reading(patterns, baseline, i, resamples=resamples, seed=seed) for i in range(k) if i != baseline]
    pairs = _corrected(pairs, alpha, "comparisons with the baseline")

    # joint paired bootstrap: one multinomial draw of n cases over the distinct patterns per resample
    rank_bounds: list[tuple[int | None, int | None]] = [(None, None)] * k
    rate_bounds: list[tuple[float, float] | None] = [None] * k
    if reason is None:
        values = np.asarray([p.values for p in patterns], dtype=float)
        weights = np.asarray([p.cases / n_cases for p in patterns], dtype=float)
        draws = np.random.default_rng(seed).multinomial(n_cases, weights, size=resamples)
        resampled = draws @ values / n_cases  # resamples x k
        # rank = 1 + variants strictly better in that resample (ties share the better rank)
        ranks = 1 + (resampled[:, None, :] > resampled[:, :, None]).sum(axis=2)
        for i in range(k):
            low, high = np.percentile(ranks[:, i], [2.5, 97.5], method="inverted_cdf")
            rank_bounds[i] = (int(low), int(high))
            if repeated:
                lo, hi = np.percentile(resampled[:, i], [2.5, 97.5], method="inverted_cdf")
                rate_bounds[i] = (float(lo), float(hi))

    order = sorted(range(k), key=lambda i: (-rates[i], i))
    best = order[0]
    to_best = {
        r.a: r
        for r in _corrected(
            [pair_reading(patterns, i, best, resamples=resamples, seed=seed) for i in order[1:]],
            alpha,
            "comparisons with the best",
        )
    }
    ranking = []
    for i in order:
        if repeated:
            bounds = rate_bounds[i]
            interval = (
                FigureInterval(bounds[0], bounds[1], "bootstrap", None)
                if bounds is not None
                else FigureInterval(None, None, None, reason)
            )
        else:
            interval = proportion_interval(round(rates[i] * n_cases), n_cases)
        reading = to_best.get(i)
        # the reading holds this variant as A and the best as B: a corrected call means "worse than the best"
        tied = reading is None or not reading.significant
        ranking.append(RankEntry(i, rates[i], interval, rank_bounds[i][0], rank_bounds[i][1], reading, tied))
    flips = flip_matrix(patterns, variants=k)
    return ManyComparison(k, baseline, n_cases, n_pairs, repeated, ranking, pairs, flips, reason)


@dataclass(frozen=True, slots=True)
class Axis:
    """One figure of a variant on one axis of the Pareto view, with its 95% interval.

    Attributes:
        value: The estimate.
        low, high: The interval's bounds (``None`` when there is none: then only the estimate counts).
    """

    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """One variant in the quality x cost x latency view.

    Attributes:
        quality: Pass rate (higher is better).
        cost: Cost per case (lower is better), ``None`` when unknown.
        latency: Latency per case (lower is better), ``None`` when unknown.
    """

    quality: Axis
    cost: Axis | None = None
    latency: Axis | None = None


@dataclass(frozen=True, slots=True)
class ParetoMark:
    """Where one variant stands in the Pareto view.

    Attributes:
        on_front: No other variant dominates it.
        dominated_by: Indices of the variants that dominate it (by the estimates).
        clearly: Some dominating variant is better on some axis with the two intervals apart
            (``False`` on the front, and when every domination rests on the estimates only).
        axes: The axes compared (those every variant has), e.g. ``("quality", "latency")``.
    """

    on_front: bool
    dominated_by: tuple[int, ...]
    clearly: bool
    axes: tuple[str, ...]


def _better(x: Axis, y: Axis, higher_is_better: bool) -> int:
    """1 when x's estimate is better than y's, -1 when worse, 0 when equal."""
    if x.value == y.value:
        return 0
    return 1 if (x.value > y.value) == higher_is_better else -1


def _apart(x: Axis, y: Axis, higher_is_better: bool) -> bool:
    """x's whole interval is better than y's whole interval."""
    if None in (x.low, x.high, y.low, y.high):
        return False
    assert x.low is not None and x.high is not None and y.low is not None and y.high is not None
    return x.low > y.high if higher_is_better else x.high < y.low


def pareto_marks(points: Sequence[ParetoPoint]) -> list[ParetoMark]:
    """Mark each point on the Pareto front or dominated (see the module docstring).

    Only the axes every point has are compared (quality always; cost and latency when all points
    have them), so a missing figure never makes a variant look better or worse.

    Returns:
        One mark per point, in the input order.
    """
    axes = ["quality"]
    for name in ("cost", "latency"):
        if points and all(getattr(p, name) is not None for p in points):
            axes.append(name)
    higher = {"quality": True, "cost": False, "latency": False}
    marks = []
    for j, pj in enumerate(points):
        dominators = []
        clearly = False
        for i, pi in enumerate(points):
            if i == j:
                continue
            signs = [_better(getattr(pi, a), getattr(pj, a), higher[a]) for a in axes]
            if all(s >= 0 for s in signs) and any(s > 0 for s in signs):
                dominators.append(i)
                if any(_apart(getattr(pi, a), getattr(pj, a), higher[a]) for a in axes):
                    clearly = True
        marks.append(ParetoMark(not dominators, tuple(dominators), clearly, tuple(axes)))
    return marks
