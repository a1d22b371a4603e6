"""The alert tests of evalcore.alerts against values worked out by hand or by textbook formulas."""

from __future__ import annotations

import math
import random

import pytest

from evalcore.alerts import compare_windows, min_sample_size, rank_test, sustained, two_proportion_test


def test_two_proportion_z_matches_the_pooled_formula():
    # 80/100 vs 60/100: pooled 0.7, z = -0.2 / sqrt(0.21 * 0.02) = -3.086
    result = two_proportion_test(80, 100, 60, 100, direction="drop")
    assert result.statistic == pytest.approx(-3.0861, abs=1e-4)
    assert result.p_value == pytest.approx(0.001014, abs=2e-5)
    assert result.effect == pytest.approx(-0.2)
    assert two_proportion_test(80, 100, 60, 100, direction="rise").p_value == pytest.approx(1 - 0.001014, abs=2e-5)
    assert two_proportion_test(80, 100, 60, 100, direction="either").p_value == pytest.approx(0.002028, abs=4e-5)
    assert two_proportion_test(10, 10, 10, 10).p_value == 0.5  # no spread: no evidence either way
    with pytest.raises(ValueError, match="11 passed of 10"):
        two_proportion_test(11, 10, 1, 10)


def test_rank_test_with_ties_matches_mann_whitney():
    # baseline [1,2,3], recent [4,5,6]: U(recent) = 9 of 9 pairs; sigma^2 = 9 * 7 / 12 = 5.25
    result = rank_test([0.1, 0.2, 0.3], [0.4, 0.5, 0.6], direction="rise")
    assert result.statistic == pytest.approx((9 - 4.5 - 0.5) / math.sqrt(5.25))
    # all tied: no evidence
    assert rank_test([0.5] * 5, [0.5] * 5).p_value == 0.5
    # ties reduce the variance: (N+1) - sum(t^3 - t) / (N (N-1)) with one tie group of 4 among 6
    tied = rank_test([0.5, 0.5, 0.1], [0.5, 0.5, 0.9], direction="either")
    variance = 9 / 12 * (7 - (64 - 4) / 30)
    assert tied.statistic == pytest.approx((7 - 4.5 - 0.5) / math.sqrt(variance))  # U = 2 + 4 × ½ + 3
    with pytest.raises(ValueError, match="both samples"):
        rank_test([], [0.1])


def test_min_sample_size_follows_fleiss():
    # 0.8 -> 0.7 one-sided at alpha 0.05, power 0.8: about 230 per group
    assert 220 <= min_sample_size(0.8, -0.1) <= 240
    assert min_sample_size(0.8, -0.3) < min_sample_size(0.8, -0.1)
    with pytest.raises(ValueError, match="not a rate change"):
        min_sample_size(0.95, 0.1)


def test_compare_windows_needs_size_significance_and_effect():
    base = [True] * 90 + [False] * 10
    small = compare_windows(base, [False] * 5, min_n=30)
    assert not small.fires and small.p_value is None and "too few" in small.reason
    drop = compare_windows(base, [True] * 60 + [False] * 40, min_n=30, min_effect=0.1)
    assert drop.fires and drop.test == "two_proportion" and drop.effect == pytest.approx(-0.3)
    # significant with 10,000 traces, but smaller than the stated effect: no alert
    tiny = compare_windows([True] * 9000 + [False] * 1000, [True] * 8800 + [False] * 1200, min_effect=0.05)
    assert tiny.significant and not tiny.large_enough and not tiny.fires
    # a rise does not fire a drop alert
    assert not compare_windows([True] * 50 + [False] * 50, [True] * 100, min_n=30).fires
    # numbers: the rank test
    rng = random.Random(3)
    scores = compare_windows([rng.uniform(0.6, 1) for _ in range(50)], [rng.uniform(0.2, 0.6) for _ in range(50)])
    assert scores.test == "rank" and scores.fires


def test_noise_alone_rarely_fires():
    rng = random.Random(5)
    fired = 0
    for _ in range(200):
        base = [rng.random() < 0.8 for _ in range(100)]
        recent = [rng.random() < 0.8 for _ in range(100)]
        fired += compare_windows(base, recent, alpha=0.01, min_effect=0.05).fires
    assert fired <= 6  # alpha 0.01 over 200 tries: about 2 expected


def test_sustained():
    assert sustained([False, True, True, True], 3)
    assert not sustained([True, True, False], 2)
    assert not sustained([True], 2)
    with pytest.raises(ValueError):
        sustained([True], 0)
