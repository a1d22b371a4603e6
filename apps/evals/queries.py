"""Shared reads of the evals pages and API: a run's results page and the A/B comparison.

Both stay fast on 100,000-case runs: they never load all results. The result table reads one
page through the ``(eval_run, status, id)`` / ``(eval_run, case_id)`` indexes; the comparison
joins the two runs on ``(case_id, repeat_index)`` in SQL (the unique index on
``(eval_run, case_id, repeat_index)`` serves the join), aggregates the 2x2 pass/fail table
in the same database pass, and fetches full rows only for the page shown.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import F, Max, Q, QuerySet

from apps.evals.models import EvalResult, EvalRun
from evalcore.stats import (
    ConfidenceInterval,
    PairedCounts,
    Verdict,
    bootstrap_mean_delta,
    bootstrap_pass_rate_delta,
    verdict,
)

RESULT_STATUSES = ("passed", "failed", "errored", "unscored")
# NULL placement spelled out: SQLite sorts NULL first ascending, PostgreSQL last. Results with no
# score (errored cases) sort with the lowest scores, on both.
RESULT_ORDERS = {
    "arrival": ("id",),
    "score": (F("score").asc(nulls_first=True), "id"),
    "-score": (F("score").desc(nulls_last=True), "id"),
    "case": ("case_id", "repeat_index"),
}
# Newest run first; runs queued but not started yet (``started`` NULL) come before all of them,
# as in the API's run list. Spelled out because the default differs: SQLite sorts NULL last in
# descending order, PostgreSQL first.
NEWEST_FIRST = F("started").desc(nulls_first=True)
COMPARE_ONLY = ("flips", "regressions", "improvements", "same")

# Columns of traces.Run a result row shows; final_answer / metadata may be large and are not read.
_RUN_FIELDS = ("run__id", "run__run_id", "run__status", "run__elapsed_ms", "run__tokens_in", "run__tokens_out")


class _Paged:
    """Pagination helpers over ``page`` / ``num_pages``, shaped like Django's ``Page`` so one
    pager template serves every paginated view."""

    page: int
    num_pages: int

    @property
    def has_next(self) -> bool:
        return self.page < self.num_pages

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def number(self) -> int:
        return self.page

    @property
    def paginator(self) -> Any:
        return self

    def previous_page_number(self) -> int:
        return self.page - 1

    def next_page_number(self) -> int:
        return self.page + 1


@dataclass(slots=True)
class ResultsPage(_Paged):
    """One page of an eval run's results.

    Attributes:
        rows: ``EvalResult`` objects with ``run`` joined (light columns only).
        page, page_size: The page shown (1-based) and its size.
        total: Results matching the filter.
        num_pages: Pages in all (>= 1).
        max_id: Highest result id of the whole run (the live high-water mark), 0 when none.
    """

    rows: list[EvalResult]
    page: int
    page_size: int
    total: int
    num_pages: int
    max_id: int


def has_tag(tag: str) -> Q:
    """A filter on ``EvalCase.tags`` (a JSON list of strings): cases carrying ``tag``.

    A substring match on the quoted tag inside the list's JSON text: portable (SQLite has no
    JSON containment) and case-insensitive for ASCII, like the rest of the filters. The text
    differs by database: SQLite keeps Django's ``json.dumps`` output (non-ASCII written as
    ``\\uXXXX``), PostgreSQL's ``jsonb`` prints non-ASCII characters as themselves.
    """
    needle = json.dumps(tag, ensure_ascii=connection.vendor != "postgresql")
    return Q(tags__icontains=needle)


_RESULT_ROW_FIELDS = (
    "id",
    "eval_run_id",
    "case_id",
    "repeat_index",
    "split",
    "scores",
    "passed",
    "status",
    "reason",
    "score",
    *_RUN_FIELDS,
)
"""The columns a result row of a table or a comparison shows (the large JSON columns stay unread)."""


def result_rows(eval_run: EvalRun) -> QuerySet[EvalResult]:
    """The base queryset of result rows as the table renders them (run joined, light columns)."""
    return (
        EvalResult.objects.filter(eval_run=eval_run)
        .select_related("run")
        .only(*_RESULT_ROW_FIELDS)
    )


def _num_pages(total: int, page_size: int) -> int:
    return max(1, -(-total // page_size))


def run_results(
    eval_run: EvalRun,
    *,
    status: str | None = None,
    search: str | None = None,
    order: str | None = None,
    page: int = 1,
    page_size: int = 50,
) -> ResultsPage:
    """One page of an eval run's results, filtered, searched and sorted in the database.

    Args:
        eval_run: The run.
        status: ``passed`` / ``failed`` / ``errored`` / ``unscored`` or ``None`` for all.
        search: Case-id substring (case-insensitive).
        order: One of ``arrival`` (default), ``score``, ``-score``, ``case``.
        page: 1-based; clamped to the last page.
        page_size: Rows per page (1..500).

    Raises:
        ValueError: Unknown status or order.
    """
    if status and status not in RESULT_STATUSES:
        raise ValueError(f"unknown status {status!r}; choose one of {', '.join(RESULT_STATUSES)}")
    if order and order not in RESULT_ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {', '.join(RESULT_ORDERS)}")
    page_size = min(max(page_size, 1), 500)
    rows = result_rows(eval_run)
    if status:
        rows = rows.filter(status=status)
    if search:
        rows = rows.filter(case_id__icontains=search)
    # Without a filter the run's own counter is exact and saves a count over 100k rows.
    total = eval_run.n_done if not (status or search) and eval_run.status == "finished" else rows.count()
    num_pages = _num_pages(total, page_size)
    page = min(max(page, 1), num_pages)
    ordered = rows.order_by(*RESULT_ORDERS[order or "arrival"])
    start = (page - 1) * page_size
    max_id = EvalResult.objects.filter(eval_run=eval_run).aggregate(m=Max("id"))["m"] or 0
    return ResultsPage(list(ordered[start : start + page_size]), page, page_size, total, num_pages, max_id)


# -- comparison --------------------------------------------------------------------------------


@dataclass(slots=True)
class CompareRow:
    """One case aligned across the two runs.

    Attributes:
        case_id, repeat_index: The case.
        a, b: The two results (light columns, ``run`` joined).
        kind: ``regression`` (pass -> fail), ``improvement`` (fail -> pass) or ``same``.
        score_delta: B's mean score minus A's, when both have one.
    """

    case_id: str
    repeat_index: int
    a: EvalResult
    b: EvalResult
    kind: str
    score_delta: float | None


@dataclass(slots=True)
class ScorerDelta:
    """One scorer's paired mean delta (B minus A) over cases where both have a value.

    Attributes:
        name: Score name.
        n: Pairs with a value in both runs.
        mean_a, mean_b: Means over those pairs (0..1).
        interval: Bootstrap interval of the delta, ``None`` when n == 0.
    """

    name: str
    n: int
    mean_a: float | None
    mean_b: float | None
    interval: ConfidenceInterval | None

    @property
    def delta(self) -> float | None:
        return None if self.mean_a is None or self.mean_b is None else self.mean_b - self.mean_a


@dataclass(slots=True)
class CompareView(_Paged):
    """Two runs of one set compared case by case (A is the baseline).

    Attributes:
        run_a, run_b: The runs.
        counts: The 2x2 pass/fail table over cases in both.
        only_a, only_b: Results present in one run only (not compared).
        interval: Bootstrap interval of the pass-rate delta.
        verdict: McNemar + interval reading.
        rows: The page of aligned cases: regressions first, then improvements, then the rest
            (largest score change first within each group).
        page, page_size, total, num_pages: Pagination over the filtered rows.
        only: The row filter applied (see ``COMPARE_ONLY``) or ``None``.
    """

    run_a: EvalRun
    run_b: EvalRun
    counts: PairedCounts
    only_a: int
    only_b: int
    interval: ConfidenceInterval | None
    verdict: Verdict
    rows: list[CompareRow]
    page: int
    page_size: int
    total: int
    num_pages: int
    only: str | None = None
    scorer_deltas: list[ScorerDelta] = field(default_factory=list)


class CompareError(ValueError):
    """Two runs that cannot be compared (different sets, or the same run twice)."""


_KIND_SQL = "CASE WHEN a.passed AND NOT b.passed THEN 0 WHEN b.passed AND NOT a.passed THEN 1 ELSE 2 END"
_KINDS = {0: "regression", 1: "improvement", 2: "same"}
_ONLY_SQL = {
    "flips": f"{_KIND_SQL} < 2",
    "regressions": f"{_KIND_SQL} = 0",
    "improvements": f"{_KIND_SQL} = 1",
    "same": f"{_KIND_SQL} = 2",
}


def _join_sql() -> str:
    table = EvalResult._meta.db_table
    return (
        f"FROM {table} a JOIN {table} b ON b.eval_run_id = %s AND b.case_id = a.case_id "
        "AND b.repeat_index = a.repeat_index WHERE a.eval_run_id = %s"
    )


def check_comparable(run_a: EvalRun, run_b: EvalRun) -> None:
    """Raise :class:`CompareError` unless both runs are distinct runs of the same set."""
    if run_a.pk == run_b.pk:
        raise CompareError("pick two different runs to compare")
    if run_a.eval_set_id != run_b.eval_set_id:
        raise CompareError(
            f"run {run_a.pk} is on set {run_a.eval_set} and run {run_b.pk} on set {run_b.eval_set}: "
            "only runs of the same set can be compared case by case"
        )


def paired_counts(run_a: EvalRun, run_b: EvalRun) -> tuple[PairedCounts, int, int]:
    """The 2x2 table over shared cases, and how many results are only in A / only in B (one query)."""
    table = EvalResult._meta.db_table
    sql = (
        "SELECT COUNT(*), "
        "COALESCE(SUM(CASE WHEN a.passed AND b.passed THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN a.passed AND NOT b.passed THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN b.passed AND NOT a.passed THEN 1 ELSE 0 END), 0), "
        f"(SELECT COUNT(*) FROM {table} WHERE eval_run_id = %s), "
        f"(SELECT COUNT(*) FROM {table} WHERE eval_run_id = %s) " + _join_sql()
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_a.pk, run_b.pk, run_b.pk, run_a.pk])
        n, both, a_only, b_only, total_a, total_b = cursor.fetchone()
    counts = PairedCounts(both=both, a_only=a_only, b_only=b_only, neither=n - both - a_only - b_only)
    return counts, total_a - n, total_b - n


def _cached_counts(run_a: EvalRun, run_b: EvalRun) -> tuple[PairedCounts, int, int]:
    """:func:`paired_counts`, cached while neither run changes (paging a big comparison re-reads it)."""
    key = f"evals.paired-counts:{run_a.pk}:{run_a.n_done}:{run_a.status}:{run_b.pk}:{run_b.n_done}:{run_b.status}"
    found = cache.get(key)
    if found is None:
        found = paired_counts(run_a, run_b)
        cache.set(key, found, 600)
    return found


def compare_runs(
    run_a: EvalRun,
    run_b: EvalRun,
    *,
    page: int = 1,
    page_size: int = 50,
    only: str | None = None,
) -> CompareView:
    """Compare two runs of the same set case by case (A is the baseline, B the candidate).

    Cost: three SQL queries over the join plus two small fetches for the page; the statistics
    (McNemar exact test, bootstrap interval of the pass-rate delta) are O(resamples), whatever
    the number of cases. Per-scorer deltas need every score and are left to
    :func:`scorer_deltas`.

    Args:
        run_a: Baseline.
        run_b: Candidate.
        page: 1-based page of aligned rows (clamped).
        page_size: Rows per page (1..500).
        only: ``flips``, ``regressions``, ``improvements``, ``same`` or ``None`` for all.

    Raises:
        CompareError: Runs of different sets, or the same run twice.
        ValueError: Unknown ``only``.
    """
    check_comparable(run_a, run_b)
    if only and only not in COMPARE_ONLY:
        raise ValueError(f"unknown filter {only!r}; choose one of {', '.join(COMPARE_ONLY)}")
    page_size = min(max(page_size, 1), 500)
    counts, only_a, only_b = _cached_counts(run_a, run_b)
    interval = bootstrap_pass_rate_delta(counts)
    reading = verdict(counts, interval)
    total = {
        None: counts.n,
        "flips": counts.a_only + counts.b_only,
        "regressions": counts.a_only,
        "improvements": counts.b_only,
        "same": counts.both + counts.neither,
    }[only or None]
    num_pages = _num_pages(total, page_size)
    page = min(max(page, 1), num_pages)
    where = f" AND {_ONLY_SQL[only]}" if only else ""
    sql = (
        f"SELECT a.id, b.id, {_KIND_SQL} AS kind " + _join_sql() + where + " ORDER BY kind, "
        "ABS(COALESCE(b.score, 0) - COALESCE(a.score, 0)) DESC, a.case_id, a.repeat_index LIMIT %s OFFSET %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_b.pk, run_a.pk, page_size, (page - 1) * page_size])
        triples = cursor.fetchall()
    wanted = [pk for a_id, b_id, _ in triples for pk in (a_id, b_id)]
    by_id = {
        r.pk: r
        for r in EvalResult.objects.filter(pk__in=wanted)
        .select_related("run")
        .only(*_RESULT_ROW_FIELDS)
    }
    rows = []
    for a_id, b_id, kind in triples:
        a, b = by_id[a_id], by_id[b_id]
        delta = b.score - a.score if a.score is not None and b.score is not None else None
        rows.append(CompareRow(a.case_id, a.repeat_index, a, b, _KINDS[int(kind)], delta))
    return CompareView(
        run_a, run_b, counts, only_a, only_b, interval, reading, rows, page, page_size, total, num_pages, only or None
    )


def _score_values(eval_run: EvalRun) -> dict[tuple[str, int], dict[str, float]]:
    """``(case_id, repeat_index) -> {score name: numeric value}`` (errors and labels left out)."""
    values: dict[tuple[str, int], dict[str, float]] = {}
    rows = EvalResult.objects.filter(eval_run=eval_run).values_list("case_id", "repeat_index", "scores")
    for case_id, repeat_index, scores in rows.iterator(chunk_size=5000):
        numeric: dict[str, float] = {}
        for score in scores or []:
            value = score.get("value")
            if score.get("error") is None and isinstance(value, bool | int | float):
                numeric[score["name"]] = float(value)
        values[(case_id, repeat_index)] = numeric
    return values


def scorer_deltas(run_a: EvalRun, run_b: EvalRun) -> list[ScorerDelta]:
    """Per-scorer paired mean deltas with bootstrap intervals, over cases scored in both runs.

    Reads every result's scores of both runs (about a second per 100,000-case pair), so the
    result is cached while neither run changes (keyed by ids and ``n_done``).

    Raises:
        CompareError: Runs that cannot be compared.
    """
    check_comparable(run_a, run_b)
    key = f"evals.scorer-deltas:{run_a.pk}:{run_a.n_done}:{run_b.pk}:{run_b.n_done}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    values_a = _score_values(run_a)
    values_b = _score_values(run_b)
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key_case, scores_a in values_a.items():
        scores_b = values_b.get(key_case)
        if scores_b is None:
            continue
        for name, value_a in scores_a.items():
            if name in scores_b:
                pairs[name].append((value_a, scores_b[name]))
    out: list[ScorerDelta] = []
    for name in sorted(pairs):
        items = pairs[name]
        n = len(items)
        mean_a = sum(a for a, _ in items) / n
        mean_b = sum(b for _, b in items) / n
        out.append(ScorerDelta(name, n, mean_a, mean_b, bootstrap_mean_delta([b - a for a, b in items])))
    cache.set(key, out, 600)
    return out


def latest_runs(eval_set_id: int | None = None, limit: int = 200) -> QuerySet[EvalRun]:
    """Recent runs (newest first) for the compare picker, optionally of one set."""
    runs = EvalRun.objects.select_related("eval_set").order_by(NEWEST_FIRST, "-pk")
    if eval_set_id is not None:
        runs = runs.filter(eval_set_id=eval_set_id)
    return runs[:limit]


def max_result_id(eval_run: EvalRun) -> int:
    """Highest result id of a run (the live high-water mark), 0 when none."""
    return EvalResult.objects.filter(eval_run=eval_run).aggregate(m=Max("id"))["m"] or 0
