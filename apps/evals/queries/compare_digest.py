"""Two ended runs compared from their digests (:mod:`apps.evals.results.digest`): the paired
2x2 table, the per-case pass shares and the comparison's row order by merging two arrays, in
place of the SQL join of :mod:`apps.evals.queries.compare` (which live runs keep using).

The figures are those of the SQL path, computed the same way: pairs are the (case, repeat) keys
both runs hold; ``passed`` is never null, so a pair is a regression when A passed and B did not,
an improvement the other way round, else the same; the rows are ordered by kind, then the score
change ``|B's score - A's score|`` (a missing score read as 0) largest first, then A's order of
``(case_id, repeat_index)`` on the database. A pair's arrays are kept in this process (the last
:data:`KEEP` pairs), so paging a comparison slices them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from apps.evals.models import EvalRun
from apps.evals.results.digest import LIVE, Digest, DigestUnavailable, Stamp, current_stamps, run_digest
from evalcore.stats import ConfidenceInterval, PairedCounts, Verdict

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

KEEP = 4
"""Pairs kept in this process."""

KINDS = ("regression", "improvement", "same")


@dataclass(slots=True)
class PairedDigest:
    """Two runs' pairs in the comparison's row order.

    Attributes:
        counts: The 2x2 table over the pairs.
        only_a, only_b: Results in one run only.
        cases_in_both: Distinct cases among the pairs.
        shares: With repeats (more pairs than cases), one ``(A's pass share, B's pass share)`` per
            distinct case in A's case order; ``None`` with one repeat per case.
        a_ids, b_ids: The paired results' ids in row order.
        kinds: Each row's kind (0 regression, 1 improvement, 2 same); rows of a kind are contiguous.
        statistics: The pass-rate interval, verdict and sign table over cases
            (:func:`apps.evals.queries.compare.pass_rate_statistics`), set by the first page read
            (its bootstrap is O(resamples): tens of ms, once per pair).
    """

    counts: PairedCounts
    only_a: int
    only_b: int
    cases_in_both: int
    shares: list[tuple[float, float]] | None
    a_ids: npt.NDArray[np.int64]
    b_ids: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.int8]
    statistics: tuple[ConfidenceInterval | None, Verdict, PairedCounts | None] | None = None

    def block(self, only: str | None) -> tuple[int, int]:
        """``[start, stop)`` of the rows a filter keeps (``flips``, ``regressions``,
        ``improvements``, ``same`` or ``None``): kind is the first sort key, so each is one block."""
        regressions, improvements = self.counts.a_only, self.counts.b_only
        return {
            None: (0, self.counts.n),
            "flips": (0, regressions + improvements),
            "regressions": (0, regressions),
            "improvements": (regressions, regressions + improvements),
            "same": (regressions + improvements, self.counts.n),
        }[only]

    def page(self, only: str | None, start: int, size: int) -> list[tuple[int, int, int]]:
        """``(a_id, b_id, kind)`` of rows ``start .. start + size`` within the filter ``only``."""
        low, high = self.block(only)
        begin = min(low + start, high)
        end = min(begin + size, high)
        return [
            (int(a), int(b), int(k))
            for a, b, k in zip(self.a_ids[begin:end], self.b_ids[begin:end], self.kinds[begin:end], strict=True)
        ]


def pair_digests(a: Digest, b: Digest) -> PairedDigest:
    """Merge two runs' digests into their comparison (see the module's note). O(n) when both
    runs hold the same keys, else O(n log n) (a merge of the key-sorted arrays)."""
    import numpy as np

    sorted_a, sorted_b = a.key[a.by_key], b.key[b.by_key]
    if sorted_a.size == sorted_b.size and np.array_equal(sorted_a, sorted_b):
        # the same (case, repeat) keys: A's position r pairs with B's at the same key rank
        rank = np.empty(len(a), dtype=np.int64)
        rank[a.by_key] = np.arange(len(a))
        ia = np.arange(len(a))
        ib = b.by_key[rank].astype(np.int64)
    else:
        _, at, bt = np.intersect1d(sorted_a, sorted_b, assume_unique=True, return_indices=True)
        ia = a.by_key[at].astype(np.int64)
        ib = b.by_key[bt].astype(np.int64)
        in_a_order = np.argsort(ia, kind="stable")
        ia, ib = ia[in_a_order], ib[in_a_order]
    n = int(ia.size)
    passed_a, passed_b = a.passed[ia], b.passed[ib]
    both = int(np.count_nonzero(passed_a & passed_b))
    a_only = int(np.count_nonzero(passed_a & ~passed_b))
    b_only = int(np.count_nonzero(passed_b & ~passed_a))
    counts = PairedCounts(both=both, a_only=a_only, b_only=b_only, neither=n - both - a_only - b_only)
    case_a = a.case[ia]  # non-decreasing: ia is in A's (case_id, repeat) order
    starts = np.flatnonzero(np.r_[True, case_a[1:] != case_a[:-1]]) if n else np.empty(0, dtype=np.int64)
    cases_in_both = int(starts.size)
    shares = None
    if n > cases_in_both:
        sizes = np.diff(np.r_[starts, n])
        share_a = np.add.reduceat(passed_a.astype(np.int64), starts) / sizes
        share_b = np.add.reduceat(passed_b.astype(np.int64), starts) / sizes
        shares = list(zip(share_a.tolist(), share_b.tolist(), strict=True))
    kind = np.full(n, 2, dtype=np.int8)
    kind[passed_a & ~passed_b] = 0
    kind[passed_b & ~passed_a] = 1
    distance = np.abs(np.nan_to_num(b.score[ib], nan=0.0) - np.nan_to_num(a.score[ia], nan=0.0))
    order = np.lexsort((-distance, kind))  # stable: ties keep A's (case_id, repeat) order
    return PairedDigest(
        counts,
        len(a) - n,
        len(b) - n,
        cases_in_both,
        shares,
        a.id[ia][order],
        b.id[ib][order],
        kind[order],
    )


_kept: OrderedDict[tuple[str, Stamp, str, Stamp], PairedDigest] = OrderedDict()
_lock = threading.Lock()


def paired_digest(run_a: EvalRun, run_b: EvalRun) -> PairedDigest:
    """The comparison of two ended runs from their digests, kept in this process while neither
    run changes.

    Raises:
        DigestUnavailable: Either run is live or has no digest (compare in SQL).
    """
    for run in (run_a, run_b):
        if run.status in LIVE:
            raise DigestUnavailable(f"run {run.pk} is {run.status}")
    stamp_a, stamp_b = current_stamps(run_a, run_b)
    key = (str(run_a.pk), stamp_a, str(run_b.pk), stamp_b)
    with _lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
            return found
    a, b = run_digest(run_a, stamp_a), run_digest(run_b, stamp_b)
    paired = pair_digests(a, b)
    if (a.stamp, b.stamp) != (stamp_a, stamp_b):  # a run moved on while being read: use it once
        return paired
    with _lock:
        _kept[key] = paired
        while len(_kept) > KEEP:
            _kept.popitem(last=False)
    return paired


def forget_pairs() -> None:
    """Drop the pairs kept in this process (tests)."""
    with _lock:
        _kept.clear()
