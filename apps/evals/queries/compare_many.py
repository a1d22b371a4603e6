"""Comparing k >= 2 runs of one set at once (issue 27): the reads behind the N-way compare page,
``GET /api/eval/compare-many``, ``evalsite compare`` and the N-way exports.

The statistics live in :mod:`evalcore.compare_many`; here the runs' verdicts become its outcome
patterns in one SQL pass: the baseline's results are joined to every other run's on
``(case_id, repeat_index)`` (the unique index ``(eval_run, case_id, repeat_index)`` serves each
join), grouped per case, then per pattern, so Python receives at most a few thousand rows
whatever the number of cases (10 runs x 100,000 cases: ``bench/bench_compare_many.py``). The
per-case table is paged in SQL the same way; scorers, slices and latency are separate reads
loaded after the summary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from apps.evals.models import EvalResult, EvalRun
from apps.evals.queries.cached import while_unchanged
from apps.evals.queries.compare import CompareError, ScorerDelta, check_comparable, scorer_deltas
from apps.evals.queries.costs import Estimate, cost_latency
from apps.evals.queries.paging import Paged, num_pages
from apps.evals.queries.slices import comparison_slices
from apps.traces.models import Run
from evalcore.compare_many import (
    MAX_VARIANTS,
    Axis,
    ManyComparison,
    OutcomePattern,
    PairReading,
    ParetoMark,
    ParetoPoint,
    compare_many,
    pareto_marks,
)
from evalcore.errors import InvalidInputError
from evalcore.slices import SliceRow, holm
from evalcore.stats import MIN_INTERVAL_CASES, TOO_FEW_CASES, Z_95, ConfidenceInterval, too_few_cases

CASE_SORTS = ("split", "case", "passes", "-passes")
"""Orders of the per-case table: cases that split the variants first (default), by case id,
most variants passing first, fewest first."""

CASE_FILTERS = ("all", "split", "all_pass", "all_fail")
"""Filters of the per-case table (also ``passed:<i>`` / ``failed:<i>``: variant i's verdict)."""


@dataclass(slots=True)
class RunCoverage:
    """What one run contributes to the comparison.

    Attributes:
        run: The run.
        compared: Distinct cases it shares with every other run (the paired n).
        total: Cases it was to run (``n_total``; the N of ``n = compared/total``).
        errored, unscored: Its cases with no verdict (they count as failed, never as passed).
    """

    run: EvalRun
    compared: int
    total: int
    errored: int
    unscored: int

    @property
    def label(self) -> str:
        """``n = 95/100``."""
        return f"n = {self.compared}/{self.total}"


@dataclass(slots=True)
class ManyView:
    """k runs compared: the runs in the given order, the baseline, the engine's figures.

    Attributes:
        runs: The runs in the order given (the index of each is its variant index).
        baseline: Index of the baseline in ``runs``.
        baseline_reason: How it was chosen: ``given``, ``pinned`` (the set's pinned baseline) or ``first``.
        comparison: :class:`evalcore.compare_many.ManyComparison`.
        coverage: One per run, in ``runs`` order.
    """

    runs: list[EvalRun]
    baseline: int
    baseline_reason: str
    comparison: ManyComparison
    coverage: list[RunCoverage]

    @property
    def baseline_run(self) -> EvalRun:
        """The baseline run."""
        return self.runs[self.baseline]

    @property
    def baseline_name(self) -> str:
        """The baseline's short label."""
        return self.name(self.baseline)

    def name(self, index: int) -> str:
        """A run's short label: its variant when that tells the runs apart (one target), else
        target/variant when that does, else the run's name (or id)."""
        run = self.runs[index]
        variants = [r.variant for r in self.runs]
        if len({r.target_id for r in self.runs}) == 1 and run.variant and len(set(variants)) == len(variants):
            return run.variant
        pairs = [(r.target_id, r.variant) for r in self.runs]
        if len(set(pairs)) == len(pairs):
            return f"{run.target_id}/{run.variant or '-'}"
        return run.name or run.pk


class CompareManyError(InvalidInputError):
    """Runs that cannot be compared together (too few, too many, repeated, other sets or splits)."""

    field = "runs"


def parse_run_ids(text: str | list[str]) -> list[str]:
    """Run ids from ``"A,B,C"`` or a list of such strings, in order, blanks dropped."""
    parts = [text] if isinstance(text, str) else list(text)
    return [piece.strip() for part in parts for piece in part.split(",") if piece.strip()]


def load_runs(run_ids: list[str]) -> list[EvalRun]:
    """The runs named, in the given order (set joined).

    Raises:
        CompareManyError: Fewer than 2 or more than :data:`~evalcore.compare_many.MAX_VARIANTS`
            ids, an id given twice, or an unknown id (named).
    """
    if len(run_ids) < 2:
        raise CompareManyError(f"give at least two runs to compare (got {len(run_ids)})")
    if len(run_ids) > MAX_VARIANTS:
        raise CompareManyError(f"compare at most {MAX_VARIANTS} runs at once (got {len(run_ids)})")
    seen: set[str] = set()
    for run_id in run_ids:
        if run_id in seen:
            raise CompareManyError(f"run {run_id!r} is given twice")
        seen.add(run_id)
    found = {run.pk: run for run in EvalRun.objects.select_related("eval_set").filter(pk__in=run_ids)}
    missing = [run_id for run_id in run_ids if run_id not in found]
    if missing:
        raise CompareManyError(f"no run {missing[0]!r}")
    return [found[run_id] for run_id in run_ids]


def check_all_comparable(runs: list[EvalRun]) -> None:
    """Raise unless every run is of the first run's set (the A/B rule,
    :func:`~apps.evals.queries.compare.check_comparable`) and split.

    Raises:
        CompareError: A run of another set, or the same run twice.
        CompareManyError: A run of another split.
    """
    first = runs[0]
    for run in runs[1:]:
        check_comparable(first, run)
        if run.split != first.split:
            raise CompareManyError(
                f"run {first.pk} ran split {first.split!r} and run {run.pk} split {run.split!r}: "
                "compare runs of the same split"
            )


def choose_baseline(runs: list[EvalRun], baseline_id: str | None) -> tuple[int, str]:
    """The baseline's index and how it was chosen: the one given, else the set's pinned baseline
    when it is among the runs, else the first run.

    Raises:
        CompareManyError: A baseline that is not among the runs.
    """
    ids = [run.pk for run in runs]
    if baseline_id:
        if baseline_id not in ids:
            raise CompareManyError(f"baseline {baseline_id!r} is not among the runs compared", field="baseline")
        return ids.index(baseline_id), "given"
    for index, run in enumerate(runs):
        if run.pinned:
            return index, "pinned"
    return 0, "first"


def _joins(runs: list[EvalRun]) -> tuple[str, list[Any]]:
    """``FROM ... WHERE`` joining run 0's results (``r0``) to every other run's (``r1``...) on
    (case, repeat), and its parameters."""
    table = EvalResult._meta.db_table
    sql = f"FROM {table} r0"
    params: list[Any] = []
    for index, run in enumerate(runs[1:], start=1):
        sql += (
            f" JOIN {table} r{index} ON r{index}.eval_run_id = %s AND r{index}.case_id = r0.case_id"
            f" AND r{index}.repeat_index = r0.repeat_index"
        )
        params.append(run.pk)
    return sql + " WHERE r0.eval_run_id = %s", [*params, runs[0].pk]


def _passed(index: int) -> str:
    return f"CASE WHEN r{index}.passed THEN 1 ELSE 0 END"


def _verdict_string_sql(vendor: str) -> tuple[str, str]:
    """Two queries over one run's results in (case, repeat) order: its verdicts as one string of
    ``0``/``1`` with their count and largest repeat index, and its keys joined (the alignment
    check); each a single ordered scan of the unique index whose work stays in the database."""
    table = EvalResult._meta.db_table
    bit = "CASE WHEN passed THEN '1' ELSE '0' END"
    if vendor == "postgresql":
        return (
            f"SELECT COUNT(*), MAX(repeat_index), string_agg({bit}, '' ORDER BY case_id, repeat_index) "
            f"FROM {table} WHERE eval_run_id = %s",
            f"SELECT string_agg(case_id, chr(10) ORDER BY case_id, repeat_index) FROM {table} WHERE eval_run_id = %s",
        )
    return (
        f"SELECT COUNT(*), MAX(r), GROUP_CONCAT(bit, '') FROM (SELECT {bit} AS bit, repeat_index AS r "
        f"FROM {table} WHERE eval_run_id = %s ORDER BY case_id, repeat_index)",
        f"SELECT GROUP_CONCAT(case_id, char(10)) FROM (SELECT case_id FROM {table} WHERE eval_run_id = %s "
        "ORDER BY case_id, repeat_index)",
    )


@dataclass(slots=True)
class Aligned:
    """The verdicts of runs that hold the same cases, one repeat each, side by side.

    Attributes:
        keys: The case ids in the database's ``ORDER BY case_id`` order.
        passed: ``k x n`` array of 0/1 (numpy ``uint8``), row i run i's verdicts in ``keys`` order.
    """

    keys: list[str]
    passed: Any


def _read_aligned(runs: list[EvalRun]) -> Aligned | bool:
    import numpy as np

    verdicts_sql, keys_sql = _verdict_string_sql(connection.vendor)
    columns: list[Any] = []
    first_keys: str | None = None
    with connection.cursor() as cursor:
        for run in runs:
            cursor.execute(verdicts_sql, [run.pk])
            count, max_repeat, bits = cursor.fetchone()
            if not count or (max_repeat or 0) > 0 or (columns and count != len(columns[0])):
                return False
            cursor.execute(keys_sql, [run.pk])
            keys = cursor.fetchone()[0]
            if first_keys is None:
                first_keys = keys
            elif keys != first_keys:
                return False
            columns.append(np.frombuffer(bits.encode("ascii"), dtype=np.uint8) - ord("0"))
    return Aligned((first_keys or "").split("\n"), np.vstack(columns))


def aligned_verdicts(runs: list[EvalRun]) -> Aligned | None:
    """Each run's verdicts in case order, when every run holds the same cases with one repeat each
    (the usual bake-off), else ``None``; two indexed scans per run, cached while no run changes
    (the per-case table pages through it)."""
    found = while_unchanged("aligned-verdicts.v1", runs, lambda: _read_aligned(runs))
    return found if isinstance(found, Aligned) else None


def _aligned_patterns(aligned: Aligned) -> list[OutcomePattern]:
    """The outcome patterns of aligned runs, counted with numpy (a k-bit integer per case)."""
    import numpy as np

    k = aligned.passed.shape[0]
    codes = np.zeros(aligned.passed.shape[1], dtype=np.int64)
    for index in range(k):
        codes |= aligned.passed[index].astype(np.int64) << index
    values, counts = np.unique(codes, return_counts=True)
    return [
        OutcomePattern(tuple(float((int(code) >> i) & 1) for i in range(k)), int(count))
        for code, count in zip(values, counts, strict=True)
    ]


def outcome_patterns(runs: list[EvalRun]) -> list[OutcomePattern]:
    """The cases every run holds, as outcome patterns (pass share per run; see
    :class:`evalcore.compare_many.OutcomePattern`).

    Runs over the same (case, repeat) keys with one repeat each (the usual bake-off): one query
    per run reading its verdicts as one string, counted with numpy (10 x 100,000 cases: well
    under a second). Otherwise one SQL query joining the runs on (case, repeat), grouped per case
    (pass shares) and then per pattern in the database.
    """
    aligned = aligned_verdicts(runs)
    if aligned is not None:
        return _aligned_patterns(aligned)
    k = len(runs)
    joins, params = _joins(runs)
    sums = ", ".join(f"SUM({_passed(i)}) AS s{i}" for i in range(k))
    names = ", ".join(f"s{i}" for i in range(k))
    sql = (
        f"SELECT reps, {names}, COUNT(*) FROM (SELECT COUNT(*) AS reps, {sums} {joins} GROUP BY r0.case_id) per_case "
        f"GROUP BY reps, {names}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        OutcomePattern(tuple(int(s) / int(row[0]) for s in row[1 : k + 1]), int(row[k + 1]), int(row[0]))
        for row in rows
    ]


def compare_many_runs(runs: list[EvalRun], baseline_id: str | None = None) -> ManyView:
    """Compare the runs (their order kept; see :func:`choose_baseline`); cached while none changes.

    Cost: one SQL query (joins + two GROUP BYs) and the engine's O(resamples x patterns) bootstrap.

    Raises:
        CompareError, CompareManyError: Runs that cannot be compared together, or a bad baseline.
    """
    check_all_comparable(runs)
    baseline, how = choose_baseline(runs, baseline_id)
    comparison = while_unchanged(
        f"compare-many.v2.{baseline}",
        runs,
        lambda: compare_many(outcome_patterns(runs), baseline=baseline, variants=len(runs)),
    )
    coverage = [RunCoverage(run, comparison.n_cases, run.n_total, run.n_errored, run.n_unscored) for run in runs]
    return ManyView(runs, baseline, how, comparison, coverage)


@dataclass(slots=True)
class CaseRow:
    """One (case, repeat) every run holds, with each run's status (in the runs' order).

    Attributes:
        case_id, repeat_index: The case.
        statuses: ``passed`` / ``failed`` / ``errored`` / ``unscored``, one per run.
        n_passed: Runs that passed it.
    """

    case_id: str
    repeat_index: int
    statuses: list[str]
    n_passed: int

    @property
    def splits(self) -> bool:
        """Some runs passed it and some did not."""
        return 0 < self.n_passed < len(self.statuses)


@dataclass(slots=True)
class CasePage(Paged):
    """A page of the per-case table (see :func:`case_table`)."""

    rows: list[CaseRow]
    page: int
    page_size: int
    total: int
    num_pages: int
    sort: str
    only: str
    q: str = ""
    counts: dict[str, int] = field(default_factory=dict)


def _only_sql(only: str, k: int) -> str:
    passes = " + ".join(_passed(i) for i in range(k))
    if only == "all":
        return ""
    if only == "split":
        return f" AND ({passes}) > 0 AND ({passes}) < {k}"
    if only == "all_pass":
        return f" AND ({passes}) = {k}"
    if only == "all_fail":
        return f" AND ({passes}) = 0"
    verb, _, index_text = only.partition(":")
    if verb in ("passed", "failed") and index_text.isdigit() and int(index_text) < k:
        return f" AND r{int(index_text)}.passed = {'TRUE' if verb == 'passed' else 'FALSE'}"
    choices = ", ".join((*CASE_FILTERS, f"passed:<0..{k - 1}>", f"failed:<0..{k - 1}>"))
    raise InvalidInputError(f"unknown case filter {only!r}; choose one of {choices}", field="only")


def case_table(
    runs: list[EvalRun], *, page: int = 1, page_size: int = 50, sort: str = "split", only: str = "all", q: str = ""
) -> CasePage:
    """A page of the cases every run holds with each run's status: sortable (:data:`CASE_SORTS`),
    filterable (:data:`CASE_FILTERS`, ``passed:<i>`` / ``failed:<i>``, ``q``: case id contains),
    the cases that split the variants first by default (those nearest an even split first).

    Cost: a COUNT and one page of the joined rows in SQL.

    Raises:
        InvalidInputError: Unknown sort or filter.
    """
    if sort not in CASE_SORTS:
        raise InvalidInputError(f"unknown sort {sort!r}; choose one of {', '.join(CASE_SORTS)}", field="sort")
    k = len(runs)
    where = _only_sql(only, k)  # checks the filter whichever path reads the page
    aligned = aligned_verdicts(runs)
    if aligned is not None:
        return _aligned_case_page(runs, aligned, page=page, page_size=page_size, sort=sort, only=only, q=q)
    joins, params = _joins(runs)
    if q:
        where += " AND r0.case_id LIKE %s"
        params = [*params, "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"]
        where += " ESCAPE '\\'"
    passes = " + ".join(_passed(i) for i in range(k))
    order = {
        "split": f"CASE WHEN ({passes}) > 0 AND ({passes}) < {k} THEN 0 ELSE 1 END, ABS(2 * ({passes}) - {k}), "
        "r0.case_id, r0.repeat_index",
        "case": "r0.case_id, r0.repeat_index",
        "passes": f"({passes}) DESC, r0.case_id, r0.repeat_index",
        "-passes": f"({passes}), r0.case_id, r0.repeat_index",
    }[sort]
    page_size = min(max(page_size, 1), 500)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) {joins}{where}", params)
        total = int(cursor.fetchone()[0])
        pages = num_pages(total, page_size)
        page = min(max(page, 1), pages)
        statuses = ", ".join(f"r{i}.status" for i in range(k))
        cursor.execute(
            f"SELECT r0.case_id, r0.repeat_index, {statuses} {joins}{where} ORDER BY {order} LIMIT %s OFFSET %s",
            [*params, page_size, (page - 1) * page_size],
        )
        fetched = cursor.fetchall()
    rows = [CaseRow(row[0], int(row[1]), list(row[2:]), sum(1 for s in row[2:] if s == "passed")) for row in fetched]
    return CasePage(rows, page, page_size, total, pages, sort, only, q)


def _aligned_case_page(
    runs: list[EvalRun], aligned: Aligned, *, page: int, page_size: int, sort: str, only: str, q: str
) -> CasePage:
    """:func:`case_table` over aligned runs: filtered and ordered with numpy, then one query for
    the page's statuses."""
    import numpy as np

    k = len(runs)
    passed = aligned.passed
    n_passed = passed.sum(axis=0, dtype=np.int64)
    mask = np.ones(passed.shape[1], dtype=bool)
    splits = (n_passed > 0) & (n_passed < k)
    if only == "split":
        mask &= splits
    elif only == "all_pass":
        mask &= n_passed == k
    elif only == "all_fail":
        mask &= n_passed == 0
    elif only != "all":
        verb, _, index_text = only.partition(":")
        mask &= passed[int(index_text)] == (1 if verb == "passed" else 0)
    if q:
        mask &= np.fromiter((q in key for key in aligned.keys), dtype=bool, count=len(aligned.keys))
    chosen = np.flatnonzero(mask)
    order_keys = {
        "split": (chosen, np.abs(2 * n_passed[chosen] - k), ~splits[chosen]),
        "case": (chosen,),
        "passes": (chosen, -n_passed[chosen]),
        "-passes": (chosen, n_passed[chosen]),
    }[sort]
    ordered = chosen[np.lexsort(order_keys)]
    page_size = min(max(page_size, 1), 500)
    total = len(ordered)
    pages = num_pages(total, page_size)
    page = min(max(page, 1), pages)
    shown = [aligned.keys[int(i)] for i in ordered[(page - 1) * page_size : page * page_size]]
    index = {run.pk: i for i, run in enumerate(runs)}
    statuses: dict[str, list[str]] = {case_id: [""] * k for case_id in shown}
    for run_id, case_id, status in EvalResult.objects.filter(
        eval_run_id__in=list(index), case_id__in=shown
    ).values_list("eval_run_id", "case_id", "status"):
        statuses[case_id][index[run_id]] = status
    rows = [CaseRow(c, 0, statuses[c], sum(1 for s in statuses[c] if s == "passed")) for c in shown]
    return CasePage(rows, page, page_size, total, pages, sort, only, q)


@dataclass(slots=True)
class VariantScorers:
    """One candidate's per-scorer deltas against the baseline, ``p_holm`` corrected over the whole
    family (every candidate x every scorer)."""

    run: EvalRun
    deltas: list[ScorerDelta]


def many_scorer_deltas(view: ManyView) -> list[VariantScorers]:
    """Per-scorer paired deltas of each candidate against the baseline
    (:func:`~apps.evals.queries.compare.scorer_deltas`, each cached), their sign-flip p-values
    Holm-corrected over the family of every candidate x scorer (Holm 1979). Reads every score of
    every run: loaded after the summary."""
    base = view.runs[view.baseline]
    found = [
        VariantScorers(run, list(scorer_deltas(base, run))) for i, run in enumerate(view.runs) if i != view.baseline
    ]
    family = [delta for variant in found for delta in variant.deltas]
    for delta, corrected in zip(family, holm([d.p_value for d in family]), strict=True):
        delta.p_holm = corrected
    return found


@dataclass(slots=True)
class VariantSlices:
    """Where one candidate changed against the baseline: its slices, corrected as the A/B slices are
    (Holm over that pair's slices; :func:`evalcore.slices.compare_slices`)."""

    run: EvalRun
    slices: list[SliceRow]

    @property
    def flagged(self) -> list[SliceRow]:
        """Its significant slices."""
        return [s for s in self.slices if s.significant]


def many_slices(view: ManyView) -> list[VariantSlices]:
    """Each candidate's slices against the baseline (:func:`~apps.evals.queries.slices.comparison_slices`)."""
    base = view.runs[view.baseline]
    return [VariantSlices(run, comparison_slices(base, run)) for i, run in enumerate(view.runs) if i != view.baseline]


@dataclass(slots=True)
class ParetoRow:
    """One variant in the quality x cost x latency view.

    Attributes:
        run: The run.
        point: Its figures with intervals (quality = pass rate over the compared cases, cost per
            case in USD, mean latency per case in ms).
        mark: On the front or dominated (:func:`evalcore.compare_many.pareto_marks`).
        latency_n: Cases with a measured wall time.
        cost_note: The cost's coverage (``priced 95/100``) or why there is none.
        latency_kind: ``p50`` (median wall time, order-statistic interval) or ``mean``.
    """

    run: EvalRun
    point: ParetoPoint
    mark: ParetoMark
    latency_n: int
    cost_note: str = ""
    latency_kind: str = "mean"


def _mean_latency(run: EvalRun) -> tuple[Axis | None, int]:
    """Mean wall time per case (ms) of the target over the run's results, with a normal 95%
    interval (mean +- 1.96 s/sqrt(n)) from :data:`~evalcore.stats.MIN_INTERVAL_CASES` cases on."""
    sql = (
        f"SELECT COUNT(t.elapsed_ms), AVG(t.elapsed_ms), AVG(t.elapsed_ms * t.elapsed_ms) "
        f"FROM {EvalResult._meta.db_table} r JOIN {Run._meta.db_table} t ON t.id = r.run_id WHERE r.eval_run_id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [run.pk])
        n, mean, mean_sq = cursor.fetchone()
    if not n or mean is None:
        return None, 0
    if n < MIN_INTERVAL_CASES:
        return Axis(float(mean)), int(n)
    variance = max(0.0, float(mean_sq) - float(mean) ** 2) * n / (n - 1)
    half = Z_95 * math.sqrt(variance / n)
    return Axis(float(mean), max(0.0, float(mean) - half), float(mean) + half), int(n)


def _estimate_axis(estimate: Estimate | None) -> Axis | None:
    return None if estimate is None else Axis(estimate.value, estimate.lo, estimate.hi)


def pareto_rows(view: ManyView) -> list[ParetoRow]:
    """Quality (pass rate with its ranking interval), cost and latency per case of each run, and
    which are on the Pareto front.

    Cost and latency come from :func:`apps.evals.queries.costs.cost_latency` (issue 27 part 2):
    mean cost per case with its t-interval, and the target's p50 wall time with its
    order-statistic interval. One measure is used for every run or for none: when some run has no
    p50 (no cost rows: a run stored before costs were recorded), latency is every run's mean wall
    time per case from its traces (mean +- 1.96 standard errors); when some run is not priced, no
    run gets a cost (the axis is left out, the note says why).
    """
    by_variant = {entry.variant: entry for entry in view.comparison.ranking}
    figures = cost_latency([run.pk for run in view.runs])
    found = [figures.get(run.pk) for run in view.runs]
    p50 = [_estimate_axis(f.latency_p50_ms) if f is not None else None for f in found]
    costs = [_estimate_axis(f.cost_per_case_usd) if f is not None else None for f in found]
    every_cost = all(c is not None for c in costs)
    points: list[ParetoPoint] = []
    latency_ns: list[int] = []
    notes: list[str] = []
    for index, run in enumerate(view.runs):
        entry = by_variant.get(index)
        quality = Axis(entry.pass_rate, entry.interval.low, entry.interval.high) if entry is not None else Axis(0.0)
        figure = found[index]
        if all(axis is not None for axis in p50) and figure is not None:
            latency, n = p50[index], figure.n_latency
        else:
            latency, n = while_unchanged("mean-latency.v1", [run], lambda run=run: _mean_latency(run))  # type: ignore[misc]
        points.append(ParetoPoint(quality, costs[index] if every_cost else None, latency))
        latency_ns.append(n)
        if figure is None or figure.cost_per_case_usd is None:
            notes.append("not priced (evalsite reprice RUN)")
        elif not every_cost:
            notes.append("left out: another run is not priced")
        else:
            notes.append(f"priced {figure.n_priced}/{figure.n_cases}")
    marks = pareto_marks(points)
    kind = "p50" if all(axis is not None for axis in p50) else "mean"
    return [
        ParetoRow(run, point, mark, n, note, kind)
        for run, point, mark, n, note in zip(view.runs, points, marks, latency_ns, notes, strict=True)
    ]


def _interval(interval: ConfidenceInterval | None) -> dict[str, Any] | None:
    if interval is None:
        return None
    return {"low": interval.low, "high": interval.high, "estimate": interval.estimate, "method": interval.method}


def _reading(view: ManyView, reading: PairReading) -> dict[str, Any]:
    return {
        "a": view.runs[reading.a].pk,
        "b": view.runs[reading.b].pk,
        "delta": reading.delta,
        "interval": _interval(reading.interval),
        "interval_reason": None if reading.interval is not None else too_few_cases(reading.counts.n) or TOO_FEW_CASES,
        "counts": {
            "both": reading.counts.both,
            "a_only": reading.counts.a_only,
            "b_only": reading.counts.b_only,
            "neither": reading.counts.neither,
        },
        "outcome": reading.verdict.outcome,
        "verdict": reading.verdict.text,
        "p_value": reading.p_value,
        "p_holm": reading.p_holm,
        "significant": reading.significant,
        "corrected_verdict": reading.text,
    }


def _axis(axis: Axis | None) -> dict[str, Any] | None:
    return None if axis is None else {"value": axis.value, "low": axis.low, "high": axis.high}


def comparison_payload(
    view: ManyView,
    *,
    scorers: list[VariantScorers] | None = None,
    slices: list[VariantSlices] | None = None,
    pareto: list[ParetoRow] | None = None,
) -> dict[str, Any]:
    """The comparison as plain JSON values: the API's ``GET /api/eval/compare-many`` body and
    ``evalsite compare --json`` (one shape, :class:`apps.evals.api.compare_many_schemas.CompareManyOut`)."""
    comparison = view.comparison
    ids = [run.pk for run in view.runs]
    payload: dict[str, Any] = {
        "set": view.runs[0].eval_set.name,
        "split": view.runs[0].split,
        "baseline": ids[view.baseline],
        "baseline_chosen": view.baseline_reason,
        "n_cases": comparison.n_cases,
        "n_pairs": comparison.n_pairs,
        "repeated": comparison.repeated,
        "reason": comparison.reason,
        "runs": [
            {
                "id": c.run.pk,
                "name": view.name(i),
                "target": c.run.target_id,
                "variant": c.run.variant,
                "model": c.run.model,
                "compared": c.compared,
                "total": c.total,
                "coverage": c.label,
                "errored": c.errored,
                "unscored": c.unscored,
            }
            for i, c in enumerate(view.coverage)
        ],
        "ranking": [
            {
                "run": ids[entry.variant],
                "pass_rate": entry.pass_rate,
                "low": entry.interval.low,
                "high": entry.interval.high,
                "interval_method": entry.interval.method,
                "interval_reason": entry.interval.reason,
                "rank_low": entry.rank_low,
                "rank_high": entry.rank_high,
                "tied_with_best": entry.tied_with_best,
                "to_best": None if entry.to_best is None else _reading(view, entry.to_best),
            }
            for entry in comparison.ranking
        ],
        "best_group": [ids[i] for i in comparison.best_group],
        "pairs": [_reading(view, reading) for reading in comparison.pairs],
        "flips": [
            {"passed": ids[i], "failed": ids[j], "cases": comparison.flips[i][j]}
            for i in range(comparison.k)
            for j in range(comparison.k)
            if i != j
        ],
    }
    if scorers is not None:
        payload["scorers"] = [
            {
                "run": variant.run.pk,
                "name": d.name,
                "n": d.n,
                "mean_a": d.mean_a,
                "mean_b": d.mean_b,
                "delta": d.delta,
                "interval": _interval(d.interval),
                "p_value": d.p_value,
                "p_holm": d.p_holm,
                "significant": d.significant,
            }
            for variant in scorers
            for d in variant.deltas
        ]
    if slices is not None:
        payload["slices"] = [
            {
                "run": variant.run.pk,
                "label": s.label,
                "n": s.n_cases,
                "delta": s.counts.delta,
                "interval": _interval(s.interval),
                "p_value": s.p_value,
                "p_holm": s.p_holm,
                "significant": s.significant,
                "contribution": s.contribution,
                "sentence": s.sentence,
            }
            for variant in slices
            for s in variant.slices
        ]
    if pareto is not None:
        payload["pareto"] = [
            {
                "run": row.run.pk,
                "quality": _axis(row.point.quality),
                "cost_per_case": _axis(row.point.cost),
                "latency_ms": _axis(row.point.latency),
                "latency_n": row.latency_n,
                "latency_kind": row.latency_kind,
                "cost_note": row.cost_note or None,
                "on_front": row.mark.on_front,
                "dominated_by": [ids[i] for i in row.mark.dominated_by],
                "clearly_dominated": row.mark.clearly,
                "axes": list(row.mark.axes),
            }
            for row in pareto
        ]
    return payload


__all__ = [
    "CASE_FILTERS",
    "CASE_SORTS",
    "CasePage",
    "CaseRow",
    "CompareError",
    "CompareManyError",
    "ManyView",
    "ParetoRow",
    "RunCoverage",
    "VariantScorers",
    "VariantSlices",
    "case_table",
    "check_all_comparable",
    "choose_baseline",
    "compare_many_runs",
    "comparison_payload",
    "load_runs",
    "many_scorer_deltas",
    "many_slices",
    "outcome_patterns",
    "pareto_rows",
    "parse_run_ids",
]
