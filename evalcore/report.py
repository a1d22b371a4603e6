"""Aggregates (metrics) over per-case scores, built incrementally in O(1) memory per metric.

A score's value type decides its aggregation: bool -> pass rate (as a mean of 0/1), number ->
mean in 0..1, str -> label counts. Means carry their standard error, the sample standard
deviation over sqrt(n) (Welford's online algorithm: Welford 1962, Technometrics 4(3)), and a
95% interval: Wilson's for a pass/fail score at every n (Wilson 1927; Brown, Cai & DasGupta
2001), mean ± 1.96 standard errors for other scores from
:data:`evalcore.stats.MIN_INTERVAL_CASES` cases on. Below that neither a standard error nor an
interval is given, and ``interval_reason`` says why ("too few cases"):
:func:`evalcore.stats.metric_interval`.
Repeats: a case run several times is one case, not several (the case is the unit of inference;
Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640). With repeats the interval's n is the
number of distinct cases with a value (counted in O(repeats) memory as the most values any one
repeat index gave): Wilson's interval of the pass share over that n, and for other scores a
standard error widened by ``sqrt(values / cases)``, the design effect of repeats that agree
completely (Kish 1965, "Survey Sampling", intra-class correlation 1), so never narrower than the
cases allow; below :data:`evalcore.stats.MIN_INTERVAL_CASES` distinct cases, no standard error.
Scorer errors are left out of a metric's n and counted apart. Every metric carries its coverage
``n=k/N``: ``k`` cases with a value, ``N`` every case of the group (the run, or one split),
including cases whose target errored and so were never scored.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from evalcore.stats import MIN_INTERVAL_CASES, FigureInterval, metric_interval
from evalcore.types import SPLITS, CaseResult, CaseStatus, Score, case_outcome


@dataclass(slots=True)
class RunningMean:
    """Welford's online mean and variance.

    Attributes:
        n: Number of values added.
        mean: Their mean (0.0 when n == 0).
    """

    n: int = 0
    mean: float = 0.0
    _m2: float = 0.0

    def add(self, value: float) -> None:
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self._m2 += delta * (value - self.mean)

    @property
    def stderr(self) -> float | None:
        """Standard error of the mean, sqrt(s^2 / n) with the n-1 sample variance; None if n < 2."""
        if self.n < 2:
            return None
        return math.sqrt(max(self._m2, 0.0) / (self.n - 1) / self.n)


@dataclass(slots=True)
class MetricSummary:
    """The aggregate of one score name.

    Attributes:
        name: Score name.
        n: Cases with a value for it (scorer errors excluded): the ``k`` of ``n=k/N``.
        total: Cases for which it was attempted (``n`` + ``errors``).
        errors: Cases where the scorer failed.
        cases: Every case of the group (run or split), target errors included: the ``N`` of
            ``n=k/N``. ``n < cases`` means the mean leaves cases out.
        mean: Mean value in 0..1 (bools as 0/1), or ``None`` for label-only scores.
        stderr: Standard error of the mean, ``None`` below
            :data:`~evalcore.stats.MIN_INTERVAL_CASES` values (two equal values would give 0).
        passed: Cases whose score had verdict pass.
        labels: Counts of string values.
        binary: Every value was a bool: ``mean`` is a pass rate.
        low, high: The mean's 95% interval (Wilson for a binary score, else mean ± 1.96
            standard errors), ``None`` when there is none.
        interval_method: ``wilson``, ``normal`` or ``None``.
        interval_reason: Why there is no interval (``"too few cases (n=2; …)"``), else ``None``.
    """

    name: str
    n: int
    total: int
    errors: int
    mean: float | None
    stderr: float | None
    passed: int
    labels: dict[str, int]
    cases: int = 0
    binary: bool = False
    low: float | None = None
    high: float | None = None
    interval_method: str | None = None
    interval_reason: str | None = None

    @property
    def coverage(self) -> str:
        """``"k/N"``: cases with a value over every case of the group."""
        return f"{self.n}/{self.cases}"

    @property
    def complete(self) -> bool:
        """True when the metric has a value for every case of the group."""
        return self.n >= self.cases

    @property
    def partial(self) -> bool:
        """The metric leaves some cases of the group out (scorer or target errors): ``n=k/N`` matters."""
        return not self.complete

    @property
    def missing(self) -> int:
        """Cases of the group without a value for this score (``N - k``)."""
        return max(self.cases - self.n, 0)

    @property
    def not_attempted(self) -> int:
        """Cases the scorer never ran on (their target errored), as opposed to scorer errors."""
        return max(self.missing - self.errors, 0)

    @property
    def interval(self) -> FigureInterval:
        """The mean's 95% interval (``low``, ``high``, ``interval_method``, ``interval_reason``) as one value."""
        return FigureInterval(self.low, self.high, self.interval_method, self.interval_reason)


@dataclass(slots=True)
class _MetricAccumulator:
    values: RunningMean = field(default_factory=RunningMean)
    non_bool: int = 0
    errors: int = 0
    passed: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    by_repeat: Counter[int] = field(default_factory=Counter)

    def summary(self, name: str, cases: int) -> MetricSummary:
        n = self.values.n + sum(self.labels.values())
        mean = self.values.mean if self.values.n else None
        # distinct cases with a value: each case gives at most one value per repeat index
        distinct = min(self.values.n, max(self.by_repeat.values(), default=0)) or self.values.n
        stderr = self.values.stderr if distinct >= MIN_INTERVAL_CASES else None
        if stderr is not None and distinct < self.values.n:
            stderr *= math.sqrt(self.values.n / distinct)  # repeats are not independent cases
        binary = self.values.n > 0 and self.non_bool == 0
        interval = metric_interval(distinct, mean, stderr, binary=binary)
        return MetricSummary(
            name=name,
            n=n,
            total=n + self.errors,
            errors=self.errors,
            mean=mean,
            stderr=stderr,
            passed=self.passed,
            labels=dict(self.labels),
            cases=cases,
            binary=binary,
            low=interval.low,
            high=interval.high,
            interval_method=interval.method,
            interval_reason=interval.reason if mean is not None else None,
        )


@dataclass(slots=True)
class GroupSummary:
    """Counts and metrics of one group of cases (the whole run, or one split).

    Attributes:
        n: Cases (every status, unscored included).
        passed, failed, errored, unscored: Case outcomes (``errored`` is never a verdict;
            ``unscored`` cases had none).
        pass_rate: ``passed / n`` (0.0 when n == 0): unscored cases count against it.
        metrics: Per score name.
    """

    n: int
    passed: int
    failed: int
    errored: int
    pass_rate: float
    metrics: dict[str, MetricSummary]
    unscored: int = 0


class _GroupAccumulator:
    __slots__ = ("counts", "metrics")

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.metrics: dict[str, _MetricAccumulator] = {}

    def add(self, status: str, scores: list[Score], repeat_index: int = 0) -> None:
        self.counts[status] += 1
        for score in scores:
            acc = self.metrics.get(score.name)
            if acc is None:
                acc = self.metrics[score.name] = _MetricAccumulator()
            if score.error is not None:
                acc.errors += 1
                continue
            if score.passed:
                acc.passed += 1
            if isinstance(score.value, str):
                acc.labels[score.value] += 1
            elif score.value is not None:
                acc.values.add(float(score.value))
                acc.by_repeat[repeat_index] += 1
                if not isinstance(score.value, bool):
                    acc.non_bool += 1

    def summary(self) -> GroupSummary:
        n = sum(self.counts.values())
        passed = self.counts[CaseStatus.PASSED.value]
        return GroupSummary(
            n=n,
            passed=passed,
            failed=self.counts[CaseStatus.FAILED.value],
            errored=self.counts[CaseStatus.ERRORED.value],
            unscored=self.counts[CaseStatus.UNSCORED.value],
            pass_rate=passed / n if n else 0.0,
            metrics={name: acc.summary(name, n) for name, acc in sorted(self.metrics.items())},
        )


@dataclass(slots=True)
class EvalReport:
    """The aggregate of an eval run.

    Attributes:
        eval_run_id: The eval run's id.
        n, passed, failed, errored, unscored, pass_rate: Over all cases (and repeats);
            ``pass_rate`` is ``passed / n``, so unscored cases never help it.
        metrics: Per score name: mean, standard error, coverage ``n`` / ``cases``, errors.
        splits: The same per split (``train`` / ``dev`` / ``test`` / ``unsplit``), only those present.
        target_errors: Cases whose target raised, timed out or returned nothing usable.
        scorer_errors: Scorer failures (one per failing scorer per case, however many scores it emits).
        tokens_in, tokens_out: Summed over the target's runs.
        elapsed_s: Wall time of the whole eval run in seconds.
    """

    eval_run_id: str
    n: int
    passed: int
    failed: int
    errored: int
    pass_rate: float
    metrics: dict[str, MetricSummary]
    splits: dict[str, GroupSummary]
    target_errors: int = 0
    scorer_errors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    elapsed_s: float = 0.0
    unscored: int = 0

    def metric_mean(self, name: str) -> float | None:
        """The mean of one score name, or ``None`` if absent."""
        metric = self.metrics.get(name)
        return metric.mean if metric else None


class ReportBuilder:
    """Accumulates :class:`CaseResult` objects into an :class:`EvalReport` without keeping them."""

    def __init__(self, eval_run_id: str) -> None:
        self.eval_run_id = eval_run_id
        self._all = _GroupAccumulator()
        self._splits: dict[str, _GroupAccumulator] = {}
        self.target_errors = 0
        self.scorer_errors = 0
        self.tokens_in = 0
        self.tokens_out = 0

    def add(self, result: CaseResult) -> None:
        """Fold one case result in."""
        run = result.run
        scores = result.scores
        status = case_outcome(target_errored=run.error is not None, scores=scores).status  # a str
        self._all.add(status, scores, run.repeat_index)
        split = result.case.split or "unsplit"
        acc = self._splits.get(split)
        if acc is None:
            acc = self._splits[split] = _GroupAccumulator()
        acc.add(status, scores, run.repeat_index)
        if run.error is not None:
            self.target_errors += 1
        # a scorer emitting several scores (the judge's axes) fails once, not once per score
        errored = [s for s in scores if s.error is not None]
        if errored:
            self.scorer_errors += len({s.name.split(".")[0] for s in errored})
        self.tokens_in += run.tokens_in or 0
        self.tokens_out += run.tokens_out or 0

    def build(self, elapsed_s: float = 0.0) -> EvalReport:
        """The report so far (may be called repeatedly, e.g. for live progress)."""
        total = self._all.summary()
        order = {name: i for i, name in enumerate((*SPLITS, "unsplit"))}
        splits = {
            name: acc.summary() for name, acc in sorted(self._splits.items(), key=lambda kv: order.get(kv[0], 99))
        }
        return EvalReport(
            eval_run_id=self.eval_run_id,
            n=total.n,
            passed=total.passed,
            failed=total.failed,
            errored=total.errored,
            unscored=total.unscored,
            pass_rate=total.pass_rate,
            metrics=total.metrics,
            splits=splits,
            target_errors=self.target_errors,
            scorer_errors=self.scorer_errors,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            elapsed_s=elapsed_s,
        )
