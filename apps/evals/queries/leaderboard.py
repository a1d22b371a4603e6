"""A leaderboard per set and split (issue 27): the latest finished run of each (target, variant), its
pass rate and main scores with 95% intervals and coverage, cost and latency per case, its model
and the set version it ran against.

Which runs: for the set and split, every run that finished over the whole split (a run of chosen
cases only, such as a one-case re-run, is not a contender), the latest one per (target, variant)
by finish time; picked in one query (a window function ranks each pair's runs). A run made on an
older version of the set than the current one is kept, marked ``stale`` and listed after the
current ones, never ranked among them: its cases were not the same.

Figures:

- pass rate: ``n_passed / n_done`` (unscored and errored cases count, never as passed), its Wilson
  95% interval over the cases (:func:`evalcore.stats.proportion_interval`); with repeats, over
  each case's pass share (cases are the unit: :func:`evalcore.stats.mean_interval`);
- main scores: the run's stored per-scorer means and intervals (the run page's figures), with
  their own coverage;
- cost and latency per case: :func:`apps.evals.queries.costs.cost_latency` (mean cost per case with
  its t-interval; p50 / p95 wall time with order-statistic intervals, cases answered from the
  target cache never timed). A run with no cost rows gets the mean wall time of the cases that
  called the target instead (a t-interval,
  :func:`evalcore.costs.mean_t_interval`): figures stored on the run when it ended
  (:func:`apps.evals.runs.target_cache.store_cache_figures`), else one grouped query over the
  results of the runs that lack them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Avg, Case, F, FloatField, When, Window
from django.db.models.functions import RowNumber

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, EvalSet, ResultStatus, SetVersion
from apps.evals.queries.cached import while_unchanged
from apps.evals.queries.costs import Estimate, RunCostLatency, cost_latency
from apps.evals.queries.target_cache import run_cache_figures, stored_cache_figures, used_cache
from evalcore.costs import mean_t_interval
from evalcore.stats import FigureInterval, mean_interval, metric_interval, proportion_interval

MAIN_SCORES = 4
"""Scores shown per row at most: the ones most runs of the board have, then by name."""


@dataclass(frozen=True, slots=True)
class ScoreCell:
    """One score of one run: its mean with a 95% interval and coverage ``n = n/cases``."""

    name: str
    mean: float | None
    interval: FigureInterval
    n: int
    cases: int


@dataclass(frozen=True, slots=True)
class Latency:
    """Latency per case (ms) of one run.

    Attributes:
        kind: ``p50`` (with ``p95``: from the cost rows) or ``mean`` (the fallback: the mean wall
            time of the cases that called the target).
        value, low, high: The figure and its 95% interval (``None`` bounds: too few cases).
        p95: The 95th percentile with its interval (``kind == "p50"`` only).
        n: Cases timed (cached cases are never timed).
        cases: Cases of the run.
    """

    kind: str
    value: float
    low: float | None
    high: float | None
    n: int
    cases: int
    p95: Estimate | None = None


@dataclass(slots=True)
class LeaderRow:
    """One (target, variant): its latest finished run of the split and that run's figures."""

    eval_run_id: str
    name: str
    target_id: str
    variant: str
    model: str
    finished: datetime | None
    set_version: int | None
    """The set version's number the run ran against (``None``: recorded before versions)."""
    stale: bool
    """Ran against another version of the set than the current one (its cases differ)."""
    n_total: int
    n_done: int
    n_passed: int
    n_errored: int
    n_unscored: int
    pass_rate: float | None
    pass_interval: FigureInterval
    scores: list[ScoreCell] = field(default_factory=list)
    cost: Estimate | None = None
    """Mean USD per case (target + judge + simulated user) with its t-interval; ``None``: not priced."""
    n_priced: int = 0
    tokens_estimated: int = 0
    """Cases whose target tokens were estimated (the endpoint reported none)."""
    latency: Latency | None = None
    n_cached: int = 0
    """Cases answered from the target cache (no call; left out of latency)."""
    repeat: int = 1

    @property
    def coverage(self) -> str:
        """``n = done/total`` of the pass rate."""
        return f"n = {self.n_done}/{self.n_total or self.n_done}"

    @property
    def label(self) -> str:
        """``target / variant`` (or the target alone)."""
        return f"{self.target_id} / {self.variant}" if self.variant else self.target_id


@dataclass(slots=True)
class Leaderboard:
    """The board of one set and split."""

    eval_set: EvalSet
    split: str
    current_version: int | None
    rows: list[LeaderRow]
    """Runs on the current set version, best pass rate first."""
    stale: list[LeaderRow]
    """Runs on an older set version, newest first (not ranked with ``rows``)."""
    score_names: list[str]
    splits: list[str]
    """Splits that have a finished run (to switch the board)."""


def latest_finished_runs(eval_set: EvalSet, split: str) -> list[EvalRun]:
    """The latest finished whole-split run of each (target, variant) of ``eval_set`` on ``split``:
    one query (a ``ROW_NUMBER()`` window per pair, newest finish first)."""
    ranked = (
        EvalRun.objects.filter(eval_set=eval_set, split=split, status=EvalRunStatus.FINISHED, finished__isnull=False)
        .exclude(config__has_key="case_ids")
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("target_id"), F("variant")],
                order_by=[F("finished").desc(), F("pk").desc()],
            )
        )
        .filter(rank=1)
        .select_related("set_version")
        .order_by("target_id", "variant")
    )
    return list(ranked)


def leaderboard(eval_set: EvalSet, split: str) -> Leaderboard:
    """The leaderboard of ``eval_set`` on ``split`` (see the module's doc for every figure).

    Cost: one query for the runs, one for the current version, one for the splits with runs, the
    cost and latency interface's queries, one grouped aggregate over the results of the runs that
    used the target cache or have no cost rows (cached cases, fallback latency), and one grouped
    query per run that repeats its cases.
    """
    runs = latest_finished_runs(eval_set, split)
    current = SetVersion.objects.filter(eval_set=eval_set).order_by("-number").first()
    ids = [r.pk for r in runs]
    costs = cost_latency(ids) if ids else {}
    # the results are read only for runs that used the target cache or have no cost rows yet
    results = _result_figures([r for r in runs if used_cache(r.config) or not _costed(costs.get(r.pk))])
    rows = [_row(run, current, costs.get(run.pk), results.get(run.pk)) for run in runs]
    counts: dict[str, int] = {}
    for row in rows:
        for cell in row.scores:
            counts[cell.name] = counts.get(cell.name, 0) + 1
    names = sorted(counts, key=lambda name: (-counts[name], name))[:MAIN_SCORES]
    for row in rows:
        by_name = {cell.name: cell for cell in row.scores}
        row.scores = [by_name.get(name) or _missing(name) for name in names]
    fresh = sorted((r for r in rows if not r.stale), key=lambda r: (-(r.pass_rate or 0.0), r.target_id, r.variant))
    stale = sorted((r for r in rows if r.stale), key=lambda r: r.finished or datetime.min, reverse=True)
    splits = list(
        EvalRun.objects.filter(eval_set=eval_set, status=EvalRunStatus.FINISHED)
        .values_list("split", flat=True)
        .distinct()
        .order_by("split")
    )
    return Leaderboard(
        eval_set=eval_set,
        split=split,
        current_version=current.number if current else None,
        rows=fresh,
        stale=stale,
        score_names=names,
        splits=splits,
    )


def _costed(costs: RunCostLatency | None) -> bool:
    return costs is not None and costs.latency_p50_ms is not None


def _missing(name: str) -> ScoreCell:
    return ScoreCell(name, None, FigureInterval(None, None, None, "not scored by this run"), 0, 0)


def _result_figures(runs: list[EvalRun]) -> dict[str, dict[str, Any]]:
    """Per run: the cached-case count and the called cases' wall time
    (:func:`~apps.evals.queries.target_cache.run_cache_figures`): stored on the run when it ended,
    else one grouped aggregate over the others' results, kept in the cache while they do not
    change (a finished run's results never do)."""
    figures: dict[str, dict[str, Any]] = {}
    missing = []
    for run in runs:
        stored = stored_cache_figures(run)
        if stored is not None:
            figures[run.pk] = stored
        else:
            missing.append(run)
    if missing:
        ids = [r.pk for r in missing]
        figures.update(while_unchanged("leaderboard-results.v1", missing, lambda: run_cache_figures(ids)))
    return figures


def _row(
    run: EvalRun, current: SetVersion | None, costs: RunCostLatency | None, figures: dict[str, Any] | None
) -> LeaderRow:
    repeat = int((run.config or {}).get("repeat") or 1)
    version = run.set_version.number if run.set_version is not None else None
    if current is None:
        stale = False
    elif run.set_version_id is not None:
        stale = run.set_version_id != current.pk
    else:  # recorded before versions: its content hash says whether the cases were the same
        stale = bool(run.set_hash) and bool(current.content_hash) and run.set_hash != current.content_hash
    row = LeaderRow(
        eval_run_id=run.pk,
        name=run.name,
        target_id=run.target_id,
        variant=run.variant,
        model=run.model,
        finished=run.finished,
        set_version=version,
        stale=stale,
        n_total=run.n_total,
        n_done=run.n_done,
        n_passed=run.n_passed,
        n_errored=run.n_errored,
        n_unscored=run.n_unscored,
        pass_rate=run.pass_rate,
        pass_interval=_pass_interval(run, repeat),
        scores=_scores(run.summary),
        repeat=repeat,
    )
    figures = figures or {}
    row.n_cached = int(figures.get("cached") or 0)
    if costs is not None:
        row.cost, row.n_priced, row.tokens_estimated = costs.cost_per_case_usd, costs.n_priced, costs.n_tokens_estimated
    if costs is not None and costs.latency_p50_ms is not None:  # its cost rows time no cached case
        p50 = costs.latency_p50_ms
        row.latency = Latency("p50", p50.value, p50.lo, p50.hi, costs.n_latency, run.n_done, costs.latency_p95_ms)
    else:
        n = int(figures.get("n_ms") or 0)
        interval = mean_t_interval(n, float(figures.get("sum_ms") or 0.0), float(figures.get("sum_sq") or 0.0))
        if interval is not None:
            row.latency = Latency("mean", interval.mean, interval.low, interval.high, n, run.n_done)
    return row


def _pass_interval(run: EvalRun, repeat: int) -> FigureInterval:
    """Wilson over the cases; with repeats, a mean interval over each case's pass share."""
    if repeat <= 1:
        return proportion_interval(run.n_passed, run.n_done)
    shares = list(
        EvalResult.objects.filter(eval_run=run)
        .values("case_id")
        .annotate(share=Avg(Case(When(status=ResultStatus.PASSED, then=1.0), default=0.0, output_field=FloatField())))
        .values_list("share", flat=True)
        .order_by()
    )
    n = len(shares)
    if not n:
        return FigureInterval(None, None, None, "no cases")
    values = [float(s or 0.0) for s in shares]
    mean = sum(values) / n
    stderr = (sum((v - mean) ** 2 for v in values) / (n - 1) / n) ** 0.5 if n > 1 else None
    return mean_interval(mean, stderr, n)


def _scores(summary: dict[str, Any] | None) -> list[ScoreCell]:
    """The run's stored per-scorer figures (as the run page reads them: an old summary without its
    interval gets one from its standard error)."""
    cells = []
    for name, m in sorted(((summary or {}).get("metrics") or {}).items()):
        n, mean = int(m.get("n") or 0), m.get("mean")
        if "interval_method" in m:
            interval = FigureInterval(m.get("low"), m.get("high"), m.get("interval_method"), m.get("interval_reason"))
        else:
            interval = metric_interval(n, mean, m.get("stderr"), binary=bool(m.get("binary")))
        cells.append(ScoreCell(name, mean, interval, n, int(m.get("cases") or m.get("total") or 0)))
    return cells


# -- the JSON form (the API's response, GET /api/eval/sets/{id}/leaderboard) -----------------


def _interval(interval: FigureInterval) -> dict[str, Any]:
    return {"low": interval.low, "high": interval.high, "method": interval.method, "reason": interval.reason}


def _estimate(estimate: Estimate | None) -> dict[str, Any] | None:
    return None if estimate is None else {"value": estimate.value, "low": estimate.lo, "high": estimate.hi}


def row_record(row: LeaderRow) -> dict[str, Any]:
    """One row as JSON (every interval with its coverage)."""
    latency = row.latency
    return {
        "eval_run_id": row.eval_run_id,
        "name": row.name,
        "target_id": row.target_id,
        "variant": row.variant,
        "model": row.model,
        "finished": row.finished,
        "set_version": row.set_version,
        "stale": row.stale,
        "repeat": row.repeat,
        "n_total": row.n_total,
        "n_done": row.n_done,
        "n_passed": row.n_passed,
        "n_errored": row.n_errored,
        "n_unscored": row.n_unscored,
        "n_cached": row.n_cached,
        "pass_rate": row.pass_rate,
        "pass_rate_interval": _interval(row.pass_interval),
        "coverage": row.coverage,
        "scores": [
            {
                "name": c.name,
                "mean": c.mean,
                "interval": _interval(c.interval),
                "n": c.n,
                "cases": c.cases,
                "coverage": f"n = {c.n}/{c.cases}",
            }
            for c in row.scores
        ],
        "cost_per_case_usd": _estimate(row.cost),
        "cost_coverage": f"n = {row.n_priced}/{row.n_done}",
        "n_tokens_estimated": row.tokens_estimated,
        "latency_ms": None
        if latency is None
        else {
            "kind": latency.kind,
            "value": latency.value,
            "low": latency.low,
            "high": latency.high,
            "p95": _estimate(latency.p95),
            "coverage": f"n = {latency.n}/{latency.cases}",
            "cached_excluded": row.n_cached,
        },
    }


def board_record(board: Leaderboard) -> dict[str, Any]:
    """The board as JSON."""
    return {
        "set_id": board.eval_set.pk,
        "set_name": board.eval_set.name,
        "split": board.split,
        "current_version": board.current_version,
        "splits": board.splits,
        "score_names": board.score_names,
        "rows": [row_record(r) for r in board.rows],
        "stale": [row_record(r) for r in board.stale],
    }
