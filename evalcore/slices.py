"""Where did B get worse? A paired comparison of two runs broken down by slice, and per-scorer
significance, both corrected for multiple comparisons.

A **slice** is the set of compared cases that share one value of one dimension: a tag
(``tag=multi-hop``), the split, or a low-cardinality metadata field (``metadata.difficulty=hard``:
a field whose values are scalars with 2..:data:`MAX_LEVELS` distinct values over the compared
cases). A case may sit in several slices (several tags). For each slice: n, both pass rates, the
delta with its paired bootstrap interval (:func:`evalcore.stats.bootstrap_pass_rate_delta`),
McNemar's exact p (:func:`evalcore.stats.mcnemar_exact`), and that p corrected over all slices
with Holm's step-down method (Holm 1979, "A simple sequentially rejective multiple test
procedure", Scandinavian Journal of Statistics 6(2)). A slice is flagged when its corrected p is
below alpha *and* its interval excludes 0 (the same double reading as the headline verdict).

A slice's **contribution** is its share of the overall pass-rate change: ``(improvements -
regressions in the slice) / N`` with ``N`` all compared cases, in pass-rate units; slices are
sorted by its magnitude. Slices overlap, so contributions need not add up to the total.

**Repeats.** When the compared results repeat cases (``PairedCase.case_id`` given and seen more
than once) the case is the unit: a slice's n and its minimum count distinct cases, and its p and
interval are the sign test and the paired bootstrap over the cases' pass shares
(:func:`evalcore.stats.case_level_pass_delta`; Miller 2024, arXiv:2411.00640).

Per-scorer deltas get a p-value from a paired sign-flip randomization test (Fisher 1935; as
recommended for NLP metrics by Dror et al. 2018, "The Hitchhiker's Guide to Testing Statistical
Significance in Natural Language Processing", ACL): under the null each per-case difference is
as likely to have either sign; the test statistic is the absolute mean difference.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalcore.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    ConfidenceInterval,
    PairedCounts,
    bootstrap_pass_rate_delta,
    case_level_pass_delta,
    mcnemar_exact,
)

__all__ = [
    "MAX_LEVELS",
    "PairedCase",
    "SliceRow",
    "compare_slices",
    "holm",
    "sign_flip_p",
]

MAX_LEVELS = 12
"""A metadata field with more distinct values than this is not sliced (an id, free text)."""


@dataclass(frozen=True, slots=True)
class PairedCase:
    """One case compared in both runs, with what it can be sliced by.

    Attributes:
        passed_a, passed_b: The verdicts in A and B.
        tags: The case's tags.
        split: The case's split ("" when unknown).
        metadata: The case's metadata (only scalar top-level values are sliced).
        case_id: The case's id; needed only when results repeat cases (one entry per repeat).
    """

    passed_a: bool
    passed_b: bool
    tags: Sequence[str] = ()
    split: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    case_id: str = ""


@dataclass(frozen=True, slots=True)
class SliceRow:
    """One slice of the comparison (see the module doc).

    Attributes:
        dimension: ``tag``, ``split`` or ``metadata.<field>``.
        value: The slice's value, as text.
        counts: Its 2x2 paired table.
        interval: Bootstrap interval of its pass-rate delta (B minus A, 0..1 scale); ``None``
            below :data:`~evalcore.stats.MIN_INTERVAL_CASES` cases (too few cases: never flagged).
        p_value: McNemar's exact p.
        p_holm: ``p_value`` corrected over every slice of the comparison (Holm).
        significant: ``p_holm < alpha`` and the interval excludes 0.
        contribution: Its share of the overall pass-rate change (pass-rate units, -1..1).
        cases: Distinct cases in the slice (``None``: ``counts.n``, one repeat per case).
    """

    dimension: str
    value: str
    counts: PairedCounts
    interval: ConfidenceInterval | None
    p_value: float
    p_holm: float
    significant: bool
    contribution: float
    cases: int | None = None

    @property
    def n_cases(self) -> int:
        """Distinct cases in the slice (the n of the minimum-n rule)."""
        return self.counts.n if self.cases is None else self.cases

    @property
    def label(self) -> str:
        """``tag=multi-hop``, ``metadata.difficulty=hard``."""
        return f"{self.dimension}={self.value}"

    @property
    def sentence(self) -> str:
        """ "B lost 14 points on tag=multi-hop (42 cases)" (or gained; "no change")."""
        delta = self.counts.delta or 0.0
        if delta == 0:
            return f"no change on {self.label} ({self.n_cases} cases)"
        verb = "lost" if delta < 0 else "gained"
        return f"B {verb} {abs(delta) * 100:.1f} points on {self.label} ({self.n_cases} cases)"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (Holm 1979).

    Sorted ascending, the i-th smallest (0-based) becomes ``min(1, (m - i) * p)``, made
    non-decreasing along the sorted order. ``m`` is the number of p-values.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def _slice_keys(case: PairedCase, fields: Iterable[str]) -> list[tuple[str, str]]:
    keys = [("tag", str(tag)) for tag in dict.fromkeys(case.tags)]
    if case.split:
        keys.append(("split", case.split))
    for name in fields:
        if name in case.metadata:
            keys.append((f"metadata.{name}", _text(case.metadata[name])))
    return keys


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _sliceable_fields(cases: Sequence[PairedCase], max_levels: int) -> list[str]:
    levels: dict[str, set[str]] = defaultdict(set)
    refused: set[str] = set()
    for case in cases:
        for name, value in case.metadata.items():
            if name in refused:
                continue
            if value is None or not isinstance(value, str | int | float | bool):
                refused.add(name)
                continue
            levels[name].add(_text(value))
            if len(levels[name]) > max_levels:
                refused.add(name)
    return sorted(name for name, found in levels.items() if name not in refused and len(found) >= 2)


def compare_slices(
    cases: Iterable[PairedCase],
    *,
    alpha: float = 0.05,
    max_levels: int = MAX_LEVELS,
    min_cases: int = 2,
) -> list[SliceRow]:
    """Every slice of two runs' paired verdicts, most contributing first (see the module doc).

    Args:
        cases: The compared cases (each present in both runs).
        alpha: Significance level after Holm's correction.
        max_levels: Metadata fields with more distinct values are not sliced.
        min_cases: Slices with fewer cases are left out (and not counted in the correction), as
            are slices holding every compared case (one split, a tag on every case).

    Returns:
        Rows sorted by |contribution| (then by label); empty when there is no case.
    """
    paired = list(cases)
    total = len(paired)
    if not total:
        return []
    ids = Counter(case.case_id for case in paired if case.case_id)
    repeated = any(count > 1 for count in ids.values())
    total_cases = len(ids) + sum(1 for case in paired if not case.case_id) if repeated else total
    fields = _sliceable_fields(paired, max_levels)
    cells: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    # with repeats: per slice, per case, [passes in A, passes in B, repeats]
    shares: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(dict)
    for index, case in enumerate(paired):
        cell = (
            "both"
            if case.passed_a and case.passed_b
            else "a_only"
            if case.passed_a
            else "b_only"
            if case.passed_b
            else "neither"
        )
        for key in _slice_keys(case, fields):
            cells[key][cell] += 1
            if repeated:
                tally = shares[key].setdefault(case.case_id or f"#{index}", [0, 0, 0])
                tally[0] += case.passed_a
                tally[1] += case.passed_b
                tally[2] += 1

    def size(key: tuple[str, str]) -> int:
        return len(shares[key]) if repeated else sum(cells[key].values())

    tables = {
        key: PairedCounts(c["both"], c["a_only"], c["b_only"], c["neither"])
        for key, c in cells.items()
        if min_cases <= size(key) < total_cases  # a slice holding every case is the headline again
    }
    keys = sorted(tables)
    tests: dict[tuple[str, str], tuple[float, ConfidenceInterval | None]] = {}
    for key in keys:
        counts = tables[key]
        if repeated:  # the case is the unit: sign test and bootstrap over per-case pass shares
            signs, case_interval = case_level_pass_delta([(a / n, b / n) for a, b, n in shares[key].values()])
            tests[key] = (mcnemar_exact(signs.a_only, signs.b_only), case_interval)
        else:
            tests[key] = (mcnemar_exact(counts.a_only, counts.b_only), bootstrap_pass_rate_delta(counts))
    p_values = [tests[k][0] for k in keys]
    adjusted = holm(p_values)
    rows = []
    for key, p, p_adj in zip(keys, p_values, adjusted, strict=True):
        counts = tables[key]
        interval = tests[key][1]
        significant = p_adj < alpha and interval is not None and interval.excludes_zero
        contribution = (counts.b_only - counts.a_only) / total
        rows.append(
            SliceRow(
                key[0], key[1], counts, interval, p, p_adj, significant, contribution, size(key) if repeated else None
            )
        )
    rows.sort(key=lambda r: (-abs(r.contribution), r.label))
    return rows


def sign_flip_p(differences: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> float:
    """Two-sided p of a paired sign-flip randomization test on the mean difference.

    Each resample flips the sign of every difference with probability 1/2; the p-value is
    ``(1 + #{|mean of flipped| >= |observed mean|}) / (1 + resamples)`` (the add-one form keeps
    it above 0, Phipson & Smyth 2010). Differences of equal value flip together in law: for a
    value ``v`` seen ``k`` times the sum of its signs is ``2 * Bin(k, 1/2) - k``, so a resample
    costs O(distinct values), not O(n). Fixed seed: the same inputs give the same p.

    Returns:
        The p-value in (0, 1]; 1.0 for no differences or all zero.
    """
    import numpy as np  # imported on use: a run that never compares never loads it (~40 ms, ~10 MB)

    values = [float(d) for d in differences if d != 0]
    if not values:
        return 1.0
    n = len(differences)
    observed = abs(math.fsum(values) / n)
    counter = Counter(round(v, 6) for v in values)
    magnitudes = np.asarray(list(counter), dtype=float)
    counts = np.asarray([counter[v] for v in counter], dtype=np.int64)
    rng = np.random.default_rng(seed)
    heads = rng.binomial(counts, 0.5, size=(resamples, len(counts)))
    sums = (2 * heads - counts) @ magnitudes
    extreme = int(np.count_nonzero(np.abs(sums) / n >= observed - 1e-12))
    return (1 + extreme) / (1 + resamples)
