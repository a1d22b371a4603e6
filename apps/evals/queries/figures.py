"""Figures the pages chart: per-split pass rates and the overfit gap over time, trend series.

Each function reads the runs and returns the values and chart series (:mod:`apps.evals.charts.lines`
lays them out); the views only pick the parameters and render.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db.models import Case, QuerySet, Value, When

from apps.evals.charts.histograms import Histogram, histogram
from apps.evals.charts.lines import Point, Series, points
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, EvalSet
from apps.evals.queries.runs import NEWEST_FIRST
from apps.evals.queries.target_cache import used_cache
from evalcore.stats import mean_interval, newcombe_independent_interval, wilson_interval
from evalcore.types import SPLITS

LIVE_STATUSES = (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING)
"""An eval run in one of these is still going: its figures are not final."""


def finished_runs(eval_set: EvalSet | None = None) -> QuerySet[EvalRun]:
    """Started eval runs no longer live (finished, failed, interrupted), optionally of one set."""
    runs = EvalRun.objects.filter(started__isnull=False).exclude(status__in=LIVE_STATUSES)
    return runs if eval_set is None else runs.filter(eval_set=eval_set)


def latest_target_variant(eval_set: EvalSet) -> tuple[str, str] | None:
    """``(target_id, variant)`` of the set's latest finished eval run, ``None`` when none."""
    row = finished_runs(eval_set).order_by(NEWEST_FIRST, "-pk").values_list("target_id", "variant").first()
    return None if row is None else (str(row[0]), str(row[1]))


def latest_finished_set() -> EvalSet | None:
    """The set of the latest finished eval run, else the first set (``None``: no set at all)."""
    latest = finished_runs().order_by(NEWEST_FIRST, "-pk").values_list("eval_set_id", flat=True).first()
    return EvalSet.objects.filter(pk=latest).first() if latest else EvalSet.objects.first()


def split_value(eval_run: EvalRun, split: str) -> float | None:
    """A run's pass rate (0..1) on one split, from its report (a run on ``all`` covers every split)."""
    group = ((eval_run.summary or {}).get("splits") or {}).get(split)
    if group and group.get("n"):
        value = group.get("pass_rate")
        return None if value is None else float(value)
    if eval_run.split == split and eval_run.n_done:
        return eval_run.n_passed / eval_run.n_done
    return None


def split_size(eval_run: EvalRun, split: str) -> int:
    """How many cases :func:`split_value` is a rate over (0 when none)."""
    group = ((eval_run.summary or {}).get("splits") or {}).get(split)
    if group and group.get("n"):
        return int(group["n"])
    return eval_run.n_done if eval_run.split == split else 0


def split_coverage(eval_run: EvalRun, split: str) -> tuple[int, int]:
    """``(k, N)`` of a run's pass rate on one split: ``k`` cases judged (passed or failed),
    ``N`` cases in the split's figure (errored and unscored ones count in N, never as passes)."""
    group = ((eval_run.summary or {}).get("splits") or {}).get(split)
    if group and group.get("n"):
        n = int(group["n"])
        judged = n - int(group.get("errored") or 0) - int(group.get("unscored") or 0)
        return max(judged, 0), n
    n = split_size(eval_run, split)
    return n, n


def split_point(eval_run: EvalRun, split: str, value: float) -> Point:
    """A split chart point: the run's pass rate on ``split`` with its 95% Wilson interval
    (:func:`evalcore.stats.wilson_interval` over the split's N cases) and coverage ``n = k/N``
    in its label; no interval when N is unknown."""
    judged, n = split_coverage(eval_run, split)
    band = wilson_interval(min(n, max(0, round(value * n))), n) if n else None
    low, high = band if band else (None, None)
    label = f"{split} {value * 100:.1f}% ({eval_run.pk})"
    when = eval_run.started or datetime.now(UTC)
    return Point(when, value, label, low=low, high=high, coverage=f"n = {judged}/{n}")


def gap_interval(train: float, n_train: int, test: float, n_test: int) -> tuple[float, float] | None:
    """95% interval of ``train - test`` for two independent proportions (the two splits hold
    different cases): Newcombe's hybrid score interval (:func:`evalcore.stats.newcombe_independent_interval`),
    never of zero width, unlike the Wald interval at 100% vs 100%; ``None`` without sizes."""
    if n_train <= 0 or n_test <= 0:
        return None
    return newcombe_independent_interval(round(train * n_train), n_train, round(test * n_test), n_test)


def overfit_gap(train: float | None, test: float | None) -> float | None:
    """Train pass rate minus test pass rate (0..1 scale; positive: better on train), or ``None``."""
    return None if train is None or test is None else train - test


@dataclass(slots=True)
class SplitsFigures:
    """Per-split pass rates of one target/variant's eval runs on a set, oldest first.

    Attributes:
        rows: One dict per run: ``run`` and each split's pass rate (``None`` when the run has
            none), ``gap`` (:func:`overfit_gap` of that run's own train and test values).
        lines: One series per split that has values (pass rate over time).
        gap: The overfit read over time: at each run that moved train or test, the latest
            known train value minus the latest known test value.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    lines: list[Series] = field(default_factory=list)
    gap: Series = field(default_factory=lambda: Series("train − test", []))


def splits_figures(eval_set: EvalSet, target_id: str, variant: str, limit: int = 500) -> SplitsFigures:
    """Train/dev/test side by side across a target/variant's finished eval runs (oldest first)."""
    runs = finished_runs(eval_set).filter(target_id=target_id, variant=variant).order_by("started")[:limit]
    lines = {s: Series(s, []) for s in SPLITS}
    out = SplitsFigures()
    latest: dict[str, float] = {}
    sizes: dict[str, int] = {}
    for eval_run in runs:
        when = eval_run.started
        if when is None:  # excluded by finished_runs; for the type checker
            continue
        values = {s: split_value(eval_run, s) for s in SPLITS}
        out.rows.append({"run": eval_run, **values, "gap": overfit_gap(values["train"], values["test"])})
        for split, value in values.items():
            if value is not None:
                lines[split].points.append(split_point(eval_run, split, value))
                latest[split] = value
                sizes[split] = split_size(eval_run, split)
        if "train" in latest and "test" in latest and (values["train"] is not None or values["test"] is not None):
            delta = latest["train"] - latest["test"]
            band = gap_interval(latest["train"], sizes["train"], latest["test"], sizes["test"])
            low, high = band if band else (None, None)
            out.gap.points.append(Point(when, delta, f"gap {points(delta)} points ({eval_run.pk})", low=low, high=high))
    out.lines = [s for s in lines.values() if s.points]
    return out


def _case_level_passes(eval_run: EvalRun) -> tuple[int, int]:
    """``(passes, n)`` for a run's pass-rate interval with the distinct cases as n: a run of
    ``--repeat K`` holds K results per case, which are not independent cases (Miller 2024,
    arXiv:2411.00640), so n is ``ceil(n_done / K)`` and the passes the same share of it."""
    repeat = (eval_run.config or {}).get("repeat") if isinstance(eval_run.config, dict) else None
    done, passed = eval_run.n_done, eval_run.n_passed
    if not isinstance(repeat, int) or repeat <= 1 or done <= 0:
        return passed, done
    cases = max(1, math.ceil(done / repeat))
    return min(cases, round(passed / done * cases)), cases


def _trend_interval(
    eval_run: EvalRun, scorer: str, value: float, metrics: dict[str, Any]
) -> tuple[float | None, float | None]:
    """95% band of a trend point: Wilson for the pass rate; for a scorer's mean the interval its
    report stored (Wilson for a pass/fail score, mean ± 1.96 standard errors otherwise), none
    below :data:`evalcore.stats.MIN_INTERVAL_CASES` values ("too few cases", no zero-width band)."""
    if scorer == "pass_rate":
        found = wilson_interval(*_case_level_passes(eval_run))
        return found if found else (None, None)
    metric = metrics.get(scorer) or {}
    if "interval_method" in metric:
        return metric.get("low"), metric.get("high")
    # a report stored before intervals: its standard error, from the minimum n on
    band = mean_interval(value, metric.get("stderr"), int(metric.get("n") or 0))
    return band.low, band.high


def trend_series(eval_set: EvalSet, scorer: str, split: str = "", limit: int = 2000) -> tuple[list[Series], list[str]]:
    """One series per target/variant: ``scorer``'s mean (or ``pass_rate``) per finished run.

    Args:
        eval_set: The set.
        scorer: A score name, or ``pass_rate``.
        split: Only runs on this split (``""``: every run).
        limit: Oldest runs read at most.

    Returns:
        The series (values 0..1) and every scorer name seen, ``pass_rate`` first.
    """
    runs = finished_runs(eval_set)
    if split:
        runs = runs.filter(split=split)
    by_variant: dict[str, Series] = {}
    names: set[str] = set()
    for eval_run in runs.order_by("started")[:limit]:
        when = eval_run.started
        if when is None:  # excluded by finished_runs; for the type checker
            continue
        metrics = (eval_run.summary or {}).get("metrics") or {}
        names.update(metrics)
        value = eval_run.pass_rate if scorer == "pass_rate" else (metrics.get(scorer) or {}).get("mean")
        if value is None:
            continue
        label = f"{eval_run.target_id}/{eval_run.variant or '-'}"
        series = by_variant.setdefault(label, Series(label, []))
        low, high = _trend_interval(eval_run, scorer, float(value), metrics)
        judged = eval_run.n_done - eval_run.n_errored - eval_run.n_unscored
        coverage = f"n = {max(judged, 0)}/{eval_run.n_total or eval_run.n_done}"
        text = f"{label}: {float(value) * 100:.1f}% — run {eval_run.pk}"
        series.points.append(Point(when, float(value), text, low=low, high=high, coverage=coverage))
    return list(by_variant.values()), ["pass_rate", *sorted(names)]


def run_distributions(eval_run: EvalRun) -> list[Histogram]:
    """Histograms of a run's per-case mean score (0..1), latency (ms) and tokens (in + out),
    each with p50 / p95 (:func:`apps.evals.charts.histograms.histogram`). One query over the results."""
    # a case answered from the target cache made no target call: its time is a lookup's, left out
    # (read only for a run that used the cache: the JSON is not parsed for the others)
    hit = When(run__metadata__target_cache__hit=True, then=Value(True))
    cached = Case(hit, default=Value(False)) if used_cache(eval_run.config) else Value(False)
    rows = (
        EvalResult.objects.filter(eval_run=eval_run)
        .annotate(cached=cached)
        .values_list("score", "run__elapsed_ms", "run__tokens_in", "run__tokens_out", "cached")
    )
    scores: list[float | None] = []
    latencies: list[float | None] = []
    tokens: list[float | None] = []
    n_cached = 0
    for score, elapsed_ms, tokens_in, tokens_out, hit in rows.iterator(chunk_size=5000):
        scores.append(score)
        latencies.append(None if hit else elapsed_ms)
        n_cached += int(bool(hit))
        tokens.append(None if tokens_in is None and tokens_out is None else float((tokens_in or 0) + (tokens_out or 0)))
    latency_title = "latency (ms)" + (f"; {n_cached} cached case(s) left out" if n_cached else "")
    return [
        histogram(scores, title="score (mean of numeric scores)", unit="%", value_range=(0.0, 1.0)),
        histogram(latencies, title=latency_title, unit=" ms"),
        histogram(tokens, title="tokens (in + out)"),
    ]
