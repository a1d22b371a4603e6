"""Comparing two eval runs of one set case by case (A is the baseline, B the candidate).

Two ended runs are compared from their per-case digests (:mod:`apps.evals.queries.compare_digest`,
a merge of two arrays: a million-result pair pages in milliseconds once merged); live runs in SQL,
where it stays fast on 100,000-case runs: the two runs are joined on ``(case_id, repeat_index)``
(the unique index on ``(eval_run, case_id, repeat_index)`` serves the join), the 2x2 pass/fail
table is aggregated in the same database pass, and full rows are fetched only for the page shown.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db import connection

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.evals.queries.cached import while_unchanged
from apps.evals.queries.compare_digest import PairedDigest, paired_digest
from apps.evals.queries.paging import Paged, num_pages
from apps.evals.queries.results import RESULT_ROW_FIELDS
from apps.evals.queries.runs import NEWEST_FIRST
from apps.evals.results.digest import DigestUnavailable
from evalcore.errors import InvalidInputError
from evalcore.slices import holm, sign_flip_p
from evalcore.stats import (
    ConfidenceInterval,
    PairedCounts,
    Verdict,
    bootstrap_mean_delta,
    bootstrap_pass_rate_delta,
    case_level_pass_delta,
    verdict,
)

COMPARE_ONLY = ("flips", "regressions", "improvements", "same")


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
        n: Distinct cases with a value in both runs (a case's repeats are averaged first).
        mean_a, mean_b: Means of the per-case means over those cases (0..1).
        interval: Bootstrap interval of the delta, ``None`` below
            :data:`~evalcore.stats.MIN_INTERVAL_CASES` pairs (too few cases).
        p_value: Two-sided p of the paired sign-flip randomization test
            (:func:`evalcore.slices.sign_flip_p`).
        p_holm: ``p_value`` corrected over every scorer of the comparison (Holm 1979).
    """

    name: str
    n: int
    mean_a: float | None
    mean_b: float | None
    interval: ConfidenceInterval | None
    p_value: float = 1.0
    p_holm: float = 1.0

    @property
    def significant(self) -> bool:
        """``p_holm < 0.05`` and the interval excludes 0 (both readings agree)."""
        return self.p_holm < 0.05 and self.interval is not None and self.interval.excludes_zero

    @property
    def delta(self) -> float | None:
        return None if self.mean_a is None or self.mean_b is None else self.mean_b - self.mean_a


@dataclass(slots=True)
class CompareView(Paged):
    """Two runs of one set compared case by case (A is the baseline).

    Attributes:
        run_a, run_b: The runs.
        counts: The 2x2 pass/fail table over cases in both.
        only_a, only_b: Results present in one run only (not compared).
        cases_in_both: Distinct cases among the pairs (``counts.n`` counts (case, repeat) pairs).
        interval: Bootstrap interval of the pass-rate delta, ``None`` below
            :data:`~evalcore.stats.MIN_INTERVAL_CASES` distinct cases (too few cases). With
            repeats, of the mean per-case pass-share delta (the case is the unit:
            :func:`evalcore.stats.case_level_pass_delta`).
        verdict: McNemar + interval reading (``too_few_cases`` without an interval); with
            repeats, the sign test over cases.
        case_counts: With repeats, the sign table over distinct cases the verdict reads (cases
            whose pass share fell / rose / stayed); ``None`` with one repeat per case.
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
    scorer_deltas: list[ScorerDelta] | None = None
    cases_in_both: int = 0
    case_counts: PairedCounts | None = None


class CompareError(InvalidInputError):
    """Two runs that cannot be compared (different sets, or the same run twice)."""

    field = "b"


_KIND_SQL = "CASE WHEN a.passed AND NOT b.passed THEN 0 WHEN b.passed AND NOT a.passed THEN 1 ELSE 2 END"
_KINDS = {0: "regression", 1: "improvement", 2: "same"}
_ONLY_SQL = {
    "flips": f"{_KIND_SQL} < 2",
    "regressions": f"{_KIND_SQL} = 0",
    "improvements": f"{_KIND_SQL} = 1",
    "same": f"{_KIND_SQL} = 2",
}


def paired_results_sql() -> str:
    """``FROM ... WHERE`` of A's results joined to B's on (case, repeat); params ``[b_id, a_id]``."""
    table = EvalResult._meta.db_table
    return (
        f"FROM {table} a JOIN {table} b ON b.eval_run_id = %s AND b.case_id = a.case_id "
        "AND b.repeat_index = a.repeat_index WHERE a.eval_run_id = %s"
    )


def check_comparable(run_a: EvalRun, run_b: EvalRun) -> None:
    """Raise :class:`CompareError` unless both runs are distinct runs of the same set (the one
    check of the compare page's form, the API and :func:`compare_runs`)."""
    if run_a.pk == run_b.pk:
        raise CompareError("pick two different runs to compare")
    if run_a.eval_set_id != run_b.eval_set_id:
        raise CompareError(
            f"run {run_a.pk} is on set “{run_a.eval_set}” and run {run_b.pk} on set “{run_b.eval_set}”: "
            "only runs of the same set can be compared case by case"
        )


def suggested_partner(run: EvalRun) -> EvalRun | None:
    """The run to compare ``run`` with: the pinned baseline of its set and target, else the same
    target's latest earlier run of the set, else any other run of the set, newest first; ``None``
    when the set has no other."""
    others = EvalRun.objects.filter(eval_set_id=run.eval_set_id).exclude(pk=run.pk).exclude(status=EvalRunStatus.QUEUED)
    pinned = others.filter(target_id=run.target_id, pinned=True).first()
    if pinned is not None:
        return pinned
    earlier = others.filter(target_id=run.target_id)
    if run.started is not None:
        earlier = earlier.filter(started__lt=run.started)
    return earlier.order_by(NEWEST_FIRST, "-pk").first() or others.order_by(NEWEST_FIRST, "-pk").first()


def paired_counts(run_a: EvalRun, run_b: EvalRun) -> tuple[PairedCounts, int, int, int]:
    """The 2x2 table over shared (case, repeat) pairs, how many results are only in A / only in
    B, and how many distinct cases the pairs cover (fewer than the pairs when runs repeat cases);
    one query."""
    table = EvalResult._meta.db_table
    sql = (
        "SELECT COUNT(*), COUNT(DISTINCT a.case_id), "
        "COALESCE(SUM(CASE WHEN a.passed AND b.passed THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN a.passed AND NOT b.passed THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN b.passed AND NOT a.passed THEN 1 ELSE 0 END), 0), "
        f"(SELECT COUNT(*) FROM {table} WHERE eval_run_id = %s), "
        f"(SELECT COUNT(*) FROM {table} WHERE eval_run_id = %s) " + paired_results_sql()
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_a.pk, run_b.pk, run_b.pk, run_a.pk])
        n, cases, both, a_only, b_only, total_a, total_b = cursor.fetchone()
    counts = PairedCounts(both=both, a_only=a_only, b_only=b_only, neither=n - both - a_only - b_only)
    return counts, total_a - n, total_b - n, cases


def _cached_counts(run_a: EvalRun, run_b: EvalRun) -> tuple[PairedCounts, int, int, int]:
    """:func:`paired_counts`, cached while neither run changes (paging a big comparison re-reads it)."""
    return while_unchanged("paired-counts.3", (run_a, run_b), lambda: paired_counts(run_a, run_b))


def case_pass_shares(run_a: EvalRun, run_b: EvalRun) -> list[tuple[float, float]]:
    """One ``(A's pass share, B's pass share)`` per distinct case over the shared (case, repeat)
    pairs: the per-case aggregate the paired statistics of runs with repeats rest on; one query."""
    sql = (
        "SELECT a.case_id, COUNT(*), COALESCE(SUM(CASE WHEN a.passed THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN b.passed THEN 1 ELSE 0 END), 0) " + paired_results_sql() + " GROUP BY a.case_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_b.pk, run_a.pk])
        rows = cursor.fetchall()
    return [(passed_a / n, passed_b / n) for _, n, passed_a, passed_b in rows]


def pass_rate_statistics(
    run_a: EvalRun,
    run_b: EvalRun,
    counts: PairedCounts,
    cases_in_both: int,
    shares: list[tuple[float, float]] | None = None,
) -> tuple[ConfidenceInterval | None, Verdict, PairedCounts | None]:
    """The interval, verdict and (with repeats) the sign table over cases of a comparison.

    One repeat per case: McNemar's test and the paired bootstrap over the 2x2 table, as ever.
    With repeats (more pairs than distinct cases) the case is the unit: each case's repeats are
    reduced to its pass share and :func:`evalcore.stats.case_level_pass_delta` tests and bounds
    the per-case differences, so the minimum n counts distinct cases, never (case, repeat) pairs.
    ``shares`` given (from the runs' digests) are used as they are, else read in SQL.
    """
    if counts.n <= cases_in_both:
        interval = bootstrap_pass_rate_delta(counts)
        return interval, verdict(counts, interval), None
    if shares is None:
        shares = while_unchanged("case-shares.1", (run_a, run_b), lambda: case_pass_shares(run_a, run_b))
    case_counts, interval = case_level_pass_delta(shares)
    return interval, verdict(case_counts, interval, per_case=True), case_counts


def _paired_digest(run_a: EvalRun, run_b: EvalRun) -> PairedDigest | None:
    """Both runs' comparison from their digests, or ``None`` when either is live or has none."""
    try:
        return paired_digest(run_a, run_b)
    except DigestUnavailable:
        return None


def compare_runs(
    run_a: EvalRun,
    run_b: EvalRun,
    *,
    page: int = 1,
    page_size: int = 50,
    only: str | None = None,
    digest: bool = True,
) -> CompareView:
    """Compare two runs of the same set case by case (A is the baseline, B the candidate).

    Two ended runs are compared from their digests (:mod:`apps.evals.queries.compare_digest`:
    the same figures and row order, by merging two arrays kept in this process); live ones in SQL.
    Cost in SQL: three queries over the join plus two small fetches for the page; the statistics
    (McNemar exact test, bootstrap interval of the pass-rate delta) are O(resamples), whatever
    the number of cases. Per-scorer deltas need every score and are left to
    :func:`scorer_deltas`.

    Args:
        run_a: Baseline.
        run_b: Candidate.
        page: 1-based page of aligned rows (clamped).
        page_size: Rows per page (1..500).
        only: ``flips``, ``regressions``, ``improvements``, ``same`` or ``None`` for all.
        digest: Compare ended runs from their digests (default); ``False`` reads the SQL join
            (the reference the digest is tested against).

    Raises:
        CompareError: Runs of different sets, or the same run twice.
        InvalidInputError: Unknown ``only``.
    """
    check_comparable(run_a, run_b)
    if only and only not in COMPARE_ONLY:
        raise InvalidInputError(f"unknown filter {only!r}; choose one of {', '.join(COMPARE_ONLY)}", field="only")
    page_size = min(max(page_size, 1), 500)
    paired = _paired_digest(run_a, run_b) if digest else None
    if paired is not None:
        counts, only_a, only_b, cases_in_both = paired.counts, paired.only_a, paired.only_b, paired.cases_in_both
    else:
        counts, only_a, only_b, cases_in_both = _cached_counts(run_a, run_b)
    if paired is None:
        interval, reading, case_counts = pass_rate_statistics(run_a, run_b, counts, cases_in_both)
    else:
        if paired.statistics is None:  # once per pair: the bootstrap is tens of ms
            paired.statistics = pass_rate_statistics(run_a, run_b, counts, cases_in_both, paired.shares)
        interval, reading, case_counts = paired.statistics
    total = {
        None: counts.n,
        "flips": counts.a_only + counts.b_only,
        "regressions": counts.a_only,
        "improvements": counts.b_only,
        "same": counts.both + counts.neither,
    }[only or None]
    pages = num_pages(total, page_size)
    page = min(max(page, 1), pages)
    if paired is not None:
        triples = paired.page(only or None, (page - 1) * page_size, page_size)
    else:
        where = f" AND {_ONLY_SQL[only]}" if only else ""
        sql = (
            f"SELECT a.id, b.id, {_KIND_SQL} AS kind " + paired_results_sql() + where + " ORDER BY kind, "
            "ABS(COALESCE(b.score, 0) - COALESCE(a.score, 0)) DESC, a.case_id, a.repeat_index LIMIT %s OFFSET %s"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [run_b.pk, run_a.pk, page_size, (page - 1) * page_size])
            triples = cursor.fetchall()
    wanted = [pk for a_id, b_id, _ in triples for pk in (a_id, b_id)]
    by_id = {r.pk: r for r in EvalResult.objects.filter(pk__in=wanted).select_related("run").only(*RESULT_ROW_FIELDS)}
    rows = []
    for a_id, b_id, kind in triples:
        a, b = by_id[a_id], by_id[b_id]
        delta = b.score - a.score if a.score is not None and b.score is not None else None
        rows.append(CompareRow(a.case_id, a.repeat_index, a, b, _KINDS[int(kind)], delta))
    return CompareView(
        run_a,
        run_b,
        counts,
        only_a,
        only_b,
        interval,
        reading,
        rows,
        page,
        page_size,
        total,
        pages,
        only or None,
        cases_in_both=cases_in_both,
        case_counts=case_counts,
    )


_DISTANCE_SQL = "ABS(COALESCE(b.score, 0) - COALESCE(a.score, 0))"
_ORDER_SQL = f"{_KIND_SQL}, {_DISTANCE_SQL} DESC, a.case_id, a.repeat_index"
_ORDER_REVERSED_SQL = f"{_KIND_SQL} DESC, {_DISTANCE_SQL}, a.case_id DESC, a.repeat_index DESC"
# rows after (kind, distance, case_id, repeat) in the comparison's order (kind up, distance down)
_AFTER_SQL = (
    f"({_KIND_SQL} > %s OR ({_KIND_SQL} = %s AND ({_DISTANCE_SQL} < %s OR ({_DISTANCE_SQL} = %s AND "
    "(a.case_id > %s OR (a.case_id = %s AND a.repeat_index > %s))))))"
)
_BEFORE_SQL = (
    f"({_KIND_SQL} < %s OR ({_KIND_SQL} = %s AND ({_DISTANCE_SQL} > %s OR ({_DISTANCE_SQL} = %s AND "
    "(a.case_id < %s OR (a.case_id = %s AND a.repeat_index < %s))))))"
)

CaseKey = tuple[str, int]


def compare_neighbours(
    run_a: EvalRun, run_b: EvalRun, case_id: str, repeat_index: int, *, only: str | None = None
) -> tuple[CaseKey | None, CaseKey | None]:
    """The cases before and after one case in the comparison's row order (flips first, then the
    largest score changes; see :func:`compare_runs`), within the ``only`` filter, as
    ``(case_id, repeat_index)``; ``None`` at either end. Three indexed queries over the join.

    Raises:
        InvalidInputError: Unknown ``only``.
    """
    if only and only not in COMPARE_ONLY:
        raise InvalidInputError(f"unknown filter {only!r}; choose one of {', '.join(COMPARE_ONLY)}", field="only")
    where = f" AND {_ONLY_SQL[only]}" if only else ""
    base = paired_results_sql() + where
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_KIND_SQL}, {_DISTANCE_SQL} "
            + paired_results_sql()
            + " AND a.case_id = %s AND a.repeat_index = %s",
            [run_b.pk, run_a.pk, case_id, repeat_index],
        )
        here = cursor.fetchone()
        if here is None:
            return None, None
        kind, distance = int(here[0]), float(here[1])
        key: list[int | float | str] = [kind, kind, distance, distance, case_id, case_id, repeat_index]
        found: list[CaseKey | None] = []
        for condition, order in ((_BEFORE_SQL, _ORDER_REVERSED_SQL), (_AFTER_SQL, _ORDER_SQL)):
            cursor.execute(
                f"SELECT a.case_id, a.repeat_index {base} AND {condition} ORDER BY {order} LIMIT 1",
                [run_b.pk, run_a.pk, *key],
            )
            row = cursor.fetchone()
            found.append((row[0], int(row[1])) if row else None)
    return found[0], found[1]


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
    """Per-scorer paired mean deltas with bootstrap intervals and sign-flip p-values (Holm-corrected
    over the scorers), over cases scored in both runs.

    Reads every result's scores of both runs (about a second per 100,000-case pair), so the
    result is cached while neither run changes (keyed by ids and ``n_done``).

    Raises:
        CompareError: Runs that cannot be compared.
    """
    check_comparable(run_a, run_b)
    return while_unchanged("scorer-deltas.v5", (run_a, run_b), lambda: _scorer_deltas(run_a, run_b))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _scorer_deltas(run_a: EvalRun, run_b: EvalRun) -> list[ScorerDelta]:
    values_a = _score_values(run_a)
    values_b = _score_values(run_b)
    # the case is the unit: a case's repeats are averaged first (one repeat: the value itself), so
    # n counts distinct cases and the bootstrap and sign-flip test resample cases, not repeats
    per_case: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for key_case, scores_a in values_a.items():
        scores_b = values_b.get(key_case)
        if scores_b is None:
            continue
        for name, value_a in scores_a.items():
            if name in scores_b:
                per_case[name][key_case[0]].append((value_a, scores_b[name]))
    pairs: dict[str, list[tuple[float, float]]] = {
        name: [
            (repeats[0] if len(repeats) == 1 else (_mean([a for a, _ in repeats]), _mean([b for _, b in repeats])))
            for repeats in cases.values()
        ]
        for name, cases in per_case.items()
    }
    out: list[ScorerDelta] = []
    for name in sorted(pairs):
        items = pairs[name]
        n = len(items)
        mean_a = sum(a for a, _ in items) / n
        mean_b = sum(b for _, b in items) / n
        differences = [b - a for a, b in items]
        out.append(
            ScorerDelta(name, n, mean_a, mean_b, bootstrap_mean_delta(differences), p_value=sign_flip_p(differences))
        )
    for delta, corrected in zip(out, holm([d.p_value for d in out]), strict=True):
        delta.p_holm = corrected
    return out
