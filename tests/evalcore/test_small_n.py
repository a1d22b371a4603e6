"""Figures at tiny n (issue 23, "figures that claim certainty they do not have"): a pass rate's
interval is Wilson's at every n, never of zero width at 0/n or n/n; a bootstrap interval, a
standard error and a verdict only from ``MIN_INTERVAL_CASES`` cases on, "too few cases" below."""

from __future__ import annotations

import math

import pytest

from evalcore.report import ReportBuilder
from evalcore.stats import (
    MIN_INTERVAL_CASES,
    PairedCounts,
    bootstrap_mean_delta,
    bootstrap_pass_rate_delta,
    mean_interval,
    metric_interval,
    newcombe_paired_interval,
    proportion_interval,
    too_few_cases,
    verdict,
    wilson_interval,
)
from evalcore.types import Case, CaseResult, RunRecord, Score


def wilson_by_hand(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (0, 2), (1, 2), (2, 2), (0, 10), (10, 10)])
def test_wilson_at_tiny_n_is_never_of_zero_width(k, n):
    low, high = wilson_interval(k, n)
    assert (low, high) == pytest.approx(wilson_by_hand(k, n), abs=1e-12)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert high - low > 0.2  # at most 10 cases: wide, never a point
    figure = proportion_interval(k, n)
    assert (figure.low, figure.high, figure.method, figure.reason) == (low, high, "wilson", None)


def test_wilson_published_bounds_at_n_1_and_2():
    # Brown, Cai & DasGupta 2001 / Wilson 1927: 1/1 -> [0.2065, 1], 2/2 -> [0.3424, 1], 0/2 -> [0, 0.6576]
    assert wilson_interval(1, 1) == pytest.approx((0.2065, 1.0), abs=1e-4)
    assert wilson_interval(2, 2) == pytest.approx((0.3424, 1.0), abs=1e-4)
    assert wilson_interval(0, 2) == pytest.approx((0.0, 0.6576), abs=1e-4)


def test_no_cases_has_no_interval_and_says_so():
    assert wilson_interval(0, 0) is None
    assert proportion_interval(0, 0).reason == "no cases"
    assert too_few_cases(0) == "no cases"
    assert metric_interval(0, None, None, binary=True).low is None


@pytest.mark.parametrize("n", [1, 2, MIN_INTERVAL_CASES - 1])
def test_a_mean_score_below_the_minimum_has_no_interval(n):
    figure = mean_interval(1.0, 0.0, n)
    assert (figure.low, figure.high) == (None, None)
    assert figure.reason == f"too few cases (n={n}; an interval needs at least {MIN_INTERVAL_CASES})"
    assert too_few_cases(MIN_INTERVAL_CASES) is None


def test_a_mean_score_from_the_minimum_on():
    figure = mean_interval(0.5, 0.1, MIN_INTERVAL_CASES)
    assert figure.method == "normal"
    assert (figure.low, figure.high) == pytest.approx((0.5 - 0.196, 0.5 + 0.196), abs=1e-3)
    assert mean_interval(0.98, 0.05, 40).high == 1.0  # kept in 0..1
    # a zero stderr is no certainty: the Wilson bound of the share of such values, never zero width
    equal = mean_interval(0.5, 0.0, 30)
    assert equal.method == "wilson_bound" and equal.low < 0.5 < equal.high and equal.reason is None


@pytest.mark.parametrize("n", [1, 2, MIN_INTERVAL_CASES - 1])
def test_bootstraps_and_verdicts_below_the_minimum(n):
    every_case_regressed = PairedCounts(both=0, a_only=n, b_only=0, neither=0)
    assert bootstrap_pass_rate_delta(every_case_regressed) is None
    assert bootstrap_mean_delta([-1.0] * n) is None
    reading = verdict(every_case_regressed, None)
    assert reading.outcome == "too_few_cases" and not reading.significant
    assert reading.text.startswith("too few cases to compare")
    assert "-100.0" not in reading.text


def test_at_the_minimum_every_case_flipping_is_not_a_point_interval():
    n = MIN_INTERVAL_CASES
    interval = bootstrap_pass_rate_delta(PairedCounts(0, n, 0, 0))
    assert interval.method == "newcombe" and interval.low == -1.0 < interval.high < 0.0
    assert bootstrap_pass_rate_delta(PairedCounts(0, 0, n, 0)).high == 1.0
    assert verdict(PairedCounts(0, n, 0, 0), interval).outcome == "a_better"  # p = 0.002 and CI excludes 0


def test_newcombe_paired_interval_properties():
    # no flips: centred on 0, of some width; one regression at n = 1: wide and including 0
    same = newcombe_paired_interval(PairedCounts(10, 0, 0, 5))
    assert same.low == pytest.approx(-same.high) and same.high > 0.05
    one = newcombe_paired_interval(PairedCounts(0, 1, 0, 0))
    assert one.low == -1.0 and one.high > 0.0
    assert newcombe_paired_interval(PairedCounts(0, 0, 0, 0)) is None
    # a table with every margin filled: contains the delta, inside -1..1
    mixed = newcombe_paired_interval(PairedCounts(30, 4, 12, 14))
    assert mixed.estimate == pytest.approx(8 / 60)
    assert -1.0 < mixed.low < mixed.estimate < mixed.high < 1.0


def _result(case_id: str, value: bool | float) -> CaseResult:
    passed = value if isinstance(value, bool) else None
    return CaseResult(
        case=Case(id=case_id, input="x", expected="x"),
        run=RunRecord(case_id=case_id, run_id=case_id, trace_id=case_id, output="x"),
        scores=[Score("s", value, passed=passed)],
    )


def test_a_report_of_two_cases_has_no_zero_stderr():
    builder = ReportBuilder("r")
    for i in range(2):
        builder.add(_result(f"c{i}", True))
    metric = builder.build().metrics["s"]
    assert metric.mean == 1.0 and metric.stderr is None
    assert metric.binary and metric.interval_method == "wilson"
    assert (metric.low, metric.high) == pytest.approx((0.3424, 1.0), abs=1e-4)

    numbers = ReportBuilder("r")
    for i in range(2):
        numbers.add(_result(f"c{i}", 0.5))
    metric = numbers.build().metrics["s"]
    assert not metric.binary and metric.stderr is None and metric.low is None
    assert metric.interval_reason.startswith("too few cases (n=2")


def test_newcombe_independent_interval_matches_the_published_table():
    """Newcombe 1998 (Statistics in Medicine 17(8)), table II, method 10 (the train-test gap band)."""
    from evalcore.stats import newcombe_independent_interval

    assert newcombe_independent_interval(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    assert newcombe_independent_interval(9, 10, 3, 10) == pytest.approx((0.1705, 0.8090), abs=1e-4)
    assert newcombe_independent_interval(6, 7, 2, 5) == pytest.approx((-0.0658, 0.7629), abs=1e-4)
    assert newcombe_independent_interval(5, 56, 0, 29) == pytest.approx((-0.0381, 0.1926), abs=1e-4)
    # 100% vs 100% on 2 cases each: Wald says 0 ± 0, this never has zero width
    low, high = newcombe_independent_interval(2, 2, 2, 2)
    assert low < 0.0 < high
    assert newcombe_independent_interval(0, 0, 1, 1) is None


def test_every_difference_equal_gets_a_bound_not_a_point():
    """20 cases that all moved by -1: the bootstrap would say [-1, -1]."""
    from evalcore.stats import constant_sample_bounds

    interval = bootstrap_mean_delta([-1.0] * 20)
    assert interval.method == "wilson_bound" and interval.resamples == 0
    share = wilson_interval(20, 20)[0]  # at least this share of cases moves by -1
    assert (interval.low, interval.high) == pytest.approx((-1.0, -share + (1 - share)))
    assert interval.excludes_zero  # 20 of 20 is evidence, and the interval says so
    unmoved = bootstrap_mean_delta([0.0] * 20)
    assert unmoved.low < 0.0 < unmoved.high
    assert constant_sample_bounds(1.0, 2, 0.0, 1.0) == pytest.approx((wilson_interval(2, 2)[0], 1.0))
    with pytest.raises(ValueError):
        constant_sample_bounds(0.5, 0, 0.0, 1.0)
