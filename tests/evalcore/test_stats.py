"""Paired statistics against hand-computed values."""

from __future__ import annotations

import math
import random

import pytest

from evalcore.stats import (
    PairedCounts,
    bootstrap_mean_delta,
    bootstrap_pass_rate_delta,
    mcnemar_exact,
    verdict,
)


def test_mcnemar_exact_hand_computed():
    # b=10, c=2: 2 * (C(12,0) + C(12,1) + C(12,2)) / 2**12 = 2 * 79 / 4096
    assert mcnemar_exact(10, 2) == pytest.approx(158 / 4096)
    assert mcnemar_exact(2, 10) == mcnemar_exact(10, 2)
    # b=5, c=0: 2 / 2**5
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)
    # balanced or no discordant pairs: p = 1
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 0) == 1.0


def test_mcnemar_large_counts_match_exact_integer_arithmetic():
    def exact(b: int, c: int) -> float:
        n, k = b + c, min(b, c)
        return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)

    for b, c in [(600, 520), (1500, 1420), (2100, 2000)]:
        assert mcnemar_exact(b, c) == pytest.approx(exact(b, c), rel=1e-9)
    assert mcnemar_exact(22000, 25000) < 1e-20  # fast even with 47,000 discordant pairs


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_paired_counts_rates_and_delta():
    counts = PairedCounts(both=50, a_only=5, b_only=15, neither=30)
    assert counts.n == 100
    assert counts.pass_rate_a == pytest.approx(0.55)
    assert counts.pass_rate_b == pytest.approx(0.65)
    assert counts.delta == pytest.approx(0.10)


def test_pass_rate_bootstrap_is_deterministic_and_covers_the_delta():
    counts = PairedCounts(both=500, a_only=40, b_only=90, neither=370)
    first = bootstrap_pass_rate_delta(counts)
    again = bootstrap_pass_rate_delta(counts)
    assert first == again
    assert first.low < 0.05 < first.high and first.excludes_zero
    assert first.resamples == 2000 and first.n == 1000
    # the normal-theory half width of a paired difference: sqrt((b + c) - (c - b)^2 / n) / n * 1.96
    half = 1.96 * math.sqrt((40 + 90) - (90 - 40) ** 2 / 1000) / 1000
    assert first.high - first.low == pytest.approx(2 * half, rel=0.15)
    other_seed = bootstrap_pass_rate_delta(counts, seed=7)
    assert other_seed != first


def test_pass_rate_bootstrap_matches_resampling_pairs():
    # Resampling pairs directly gives the same interval (within Monte Carlo error).
    counts = PairedCounts(both=30, a_only=4, b_only=12, neither=14)
    pairs = [(1, 1)] * 30 + [(1, 0)] * 4 + [(0, 1)] * 12 + [(0, 0)] * 14
    rng = random.Random(3)
    deltas = sorted(sum(b - a for a, b in (pairs[rng.randrange(60)] for _ in range(60))) / 60 for _ in range(4000))
    smart = bootstrap_pass_rate_delta(counts, resamples=4000)
    assert smart.low == pytest.approx(deltas[100], abs=0.02)
    assert smart.high == pytest.approx(deltas[3899], abs=0.02)


def test_pass_rate_bootstrap_without_pairs_or_flips():
    assert bootstrap_pass_rate_delta(PairedCounts(0, 0, 0, 0)) is None
    # no case flipped: the resamples cannot vary, so Newcombe's interval stands in (never [0, 0])
    same = bootstrap_pass_rate_delta(PairedCounts(10, 0, 0, 5))
    assert same.method == "newcombe" and same.low < 0.0 < same.high


def test_mean_delta_bootstrap_contains_true_delta_and_is_seeded():
    rng = random.Random(11)
    diffs = [rng.gauss(0.08, 0.2) for _ in range(3000)]  # many distinct values: 0.001 grid
    ci = bootstrap_mean_delta(diffs)
    assert ci == bootstrap_mean_delta(diffs)
    assert ci.low < 0.08 < ci.high
    assert ci.estimate == pytest.approx(sum(diffs) / len(diffs))
    stderr = 0.2 / math.sqrt(3000)
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * stderr, rel=0.15)


def test_mean_delta_bootstrap_few_values_is_exact_form():
    diffs = [1.0] * 20 + [0.0] * 70 + [-1.0] * 10
    ci = bootstrap_mean_delta(diffs)
    assert ci.estimate == pytest.approx(0.1)
    assert ci.low < 0.1 < ci.high
    assert bootstrap_mean_delta([]) is None
    with pytest.raises(ValueError):
        bootstrap_mean_delta(diffs, confidence=1.5)


def test_verdicts():
    better = PairedCounts(both=500, a_only=10, b_only=60, neither=430)
    reading = verdict(better, bootstrap_pass_rate_delta(better))
    assert reading.outcome == "b_better" and reading.significant
    assert reading.text.startswith("B is better than A: p<0.001, CI of delta [+")
    assert "points excludes 0" in reading.text

    worse = PairedCounts(both=500, a_only=60, b_only=10, neither=430)
    assert verdict(worse, bootstrap_pass_rate_delta(worse)).outcome == "a_better"

    tie = PairedCounts(both=50, a_only=6, b_only=8, neither=36)
    reading = verdict(tie, bootstrap_pass_rate_delta(tie))
    assert reading.outcome == "no_difference" and "no significant difference" in reading.text
    assert "p=0.791" in reading.text

    assert (
        verdict(PairedCounts(13, 0, 0, 2), bootstrap_pass_rate_delta(PairedCounts(13, 0, 0, 2))).outcome
        == "no_difference"
    )
    # below the minimum n there is no interval and no verdict (see tests/evalcore/test_small_n.py)
    assert verdict(PairedCounts(3, 0, 0, 2), bootstrap_pass_rate_delta(PairedCounts(3, 0, 0, 2))).outcome == (
        "too_few_cases"
    )
    assert verdict(PairedCounts(0, 0, 0, 0), None).outcome == "no_pairs"


def test_seeded_bootstraps_give_the_figures_they_gave_before_numpy_was_required():
    """Figures recorded before the pure-Python fallback was dropped: a stored comparison reads the same."""
    few = bootstrap_mean_delta([0.0, 1.0, 0.5, -0.25, 1.0, 0.0, 0.75] * 5)
    assert (few.low, few.high, few.n) == (0.2714285714285714, 0.5857142857142857, 35)
    many = bootstrap_mean_delta([i / 1000 for i in range(300)], resamples=500, seed=3)
    assert (many.low, many.high) == (0.14022, 0.15786)
    paired = bootstrap_pass_rate_delta(PairedCounts(10, 4, 9, 7))
    assert (paired.low, paired.high) == (-0.06666666666666667, 0.4)


def test_wilson_interval_matches_published_values():
    from evalcore.stats import wilson_interval

    # Newcombe 1998 (Statistics in Medicine 17), table I: 0/10 and 5/10, method 3 (Wilson)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(11, 10)
