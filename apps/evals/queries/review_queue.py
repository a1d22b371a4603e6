"""The review queue: results in the order a person should grade them, over one run or over several
runs of a set (the set's queue, :func:`set_queue_runs`).

Cases that most need a person come first (:data:`REASONS`, in order): the judge was unstable
across its samples, the judge disagrees with a deterministic scorer, the target errored, the case
failed, no scorer decided it (unscored); then the rest. Within a reason, case id order, and in a
set's queue one case's results in its runs stand together, the newest run first. The order
depends only on the stored scores, never on who reviewed what, so ``j`` / ``k`` step through a
stable list while reviews are being saved; filters narrow it (:data:`QUEUE_FILTERS`).

Each run's order is computed once and cached while the run does not change (:func:`queue_order`);
a set's queue merges its runs' cached orders, so its cost grows with its results, not with a
scan of their scores on every page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

from django.core.cache import cache

from apps.evals.models import EvalResult, EvalRun, ResultStatus, Review, ReviewAssignment
from evalcore.judge.outcome import JUDGE_SCORE

REASONS: tuple[str, ...] = ("judge unstable", "judge vs scorer", "errored", "failed", "unscored", "")
"""Why a result is where it is in the queue, most urgent first ("" for the rest)."""

QUEUE_FILTERS: dict[str, str] = {
    "unreviewed": "not reviewed by anyone yet",
    "assigned": "assigned to me, not reviewed by me yet",
    "mine": "not reviewed by me yet",
    "flagged": "judge unstable or disagreeing with a scorer",
    "failed": "failed or errored",
    "reviewed": "already reviewed",
    "all": "every case",
}
"""The queue's filters and what each keeps (the first is the default)."""

_RANK = {reason: index for index, reason in enumerate(REASONS)}

CACHE_SECONDS = 3600
"""How long a queue order stays cached. It is keyed on what would change it, so this only frees
memory; reading a run's scores again costs ~1 s per 25,000 results on a loaded 2-core machine."""


class QueueItem(NamedTuple):
    """One result in the queue: its id, case, repeat, why it is where it is, and its run.

    A tuple, not a dataclass: a run's queue lives in the cache, and a set's page reads tens of
    thousands of them back per request (unpickling a slotted dataclass cost ~3 µs each).
    """

    result_id: int
    case_id: str
    repeat_index: int
    reason: str
    eval_run_id: str = ""


def _reason(status: str, scores: list[dict[str, Any]]) -> str:
    judge = None
    deterministic: list[bool] = []
    for score in scores or []:
        if not isinstance(score, dict) or score.get("error"):
            continue
        name = str(score.get("name", ""))
        if name == JUDGE_SCORE:
            judge = score
        elif "." not in name and isinstance(score.get("passed"), bool):
            deterministic.append(score["passed"])
    if judge is not None and (judge.get("metadata") or {}).get("unstable"):
        return REASONS[0]
    if judge is not None and isinstance(judge.get("passed"), bool) and any(p != judge["passed"] for p in deterministic):
        return REASONS[1]
    if status == ResultStatus.ERRORED:
        return REASONS[2]
    if status == ResultStatus.FAILED:
        return REASONS[3]
    if status == ResultStatus.UNSCORED:
        return REASONS[4]
    return REASONS[5]


def queue_order(eval_run: EvalRun) -> list[QueueItem]:
    """Every result of the run in queue order (cached while the run does not change)."""
    rows: list[tuple[int, str, int, str, str]] | None = cache.get(_cache_key(eval_run))
    if rows is None:
        results = EvalResult.objects.filter(eval_run=eval_run).values_list(
            "pk", "case_id", "repeat_index", "status", "scores"
        )
        rows = [
            (pk, case_id, repeat, _reason(status, scores), eval_run.pk)
            for pk, case_id, repeat, status, scores in results.iterator(chunk_size=2000)
        ]
        rows.sort(key=lambda r: (_RANK[r[3]], r[1], r[2]))
        # cached as plain tuples: they unpickle in C, where a NamedTuple calls its __new__ per item
        cache.set(_cache_key(eval_run), rows, CACHE_SECONDS)
    return list(map(_as_item, rows))


def _cache_key(eval_run: EvalRun) -> str:
    # a run's results change only while it runs (n_done) or when it ends (status)
    return f"evals.review-queue.v2:{eval_run.pk}:{eval_run.n_done}:{eval_run.status}"


_as_item = partial(tuple.__new__, QueueItem)  # a plain tuple as a QueueItem, in C (no per-item Python call)


class ReviewQueue:
    """The review queue over ``runs``: one run, or runs of one set (newest first; a case's results
    in several runs are ordered as the runs are).

    Reads nothing until asked; the full order and each result's place in it are read once per
    instance (one per request).
    """

    def __init__(self, runs: Sequence[EvalRun]) -> None:
        self.runs = list(runs)
        self.run_ids = [r.pk for r in self.runs]
        self._order: list[QueueItem] | None = None
        self._rank: dict[int, int] | None = None

    def order(self) -> list[QueueItem]:
        """Every result of the runs in queue order."""
        if self._order is None:
            self._order = queue_order(self.runs[0]) if len(self.runs) == 1 else self._merged()
        return self._order

    def _merged(self) -> list[QueueItem]:
        """The runs' orders merged (a case's results together, in the runs' order), cached as one
        list for these runs in their present state: a set's page reads it back on every key press."""
        state = "|".join(_cache_key(run) for run in self.runs)
        key = f"evals.review-queue-merged.v1:{hashlib.sha256(state.encode()).hexdigest()}"
        rows: list[tuple[int, str, int, str, str]] | None = cache.get(key)
        if rows is not None:
            return list(map(_as_item, rows))
        run_rank = {run_id: index for index, run_id in enumerate(self.run_ids)}
        items = [item for run in self.runs for item in queue_order(run)]
        # each run's list is already sorted: timsort merges the runs' sorted stretches
        items.sort(key=lambda i: (_RANK[i.reason], i.case_id, run_rank[i.eval_run_id], i.repeat_index))
        cache.set(key, [tuple(item) for item in items], CACHE_SECONDS)
        return items

    def filtered(self, user: Any, queue_filter: str) -> list[QueueItem]:
        """The queue narrowed by ``queue_filter`` (a key of :data:`QUEUE_FILTERS`; unknown: the
        default). Review state is read fresh (one or two queries, over the runs' reviews only), so a
        case just reviewed leaves ``unreviewed`` at once."""
        items = self.order()
        if queue_filter not in QUEUE_FILTERS:
            queue_filter = next(iter(QUEUE_FILTERS))
        if queue_filter == "all":
            return items
        if queue_filter == "flagged":
            return [i for i in items if i.reason in REASONS[:2]]
        if queue_filter == "failed":
            return [i for i in items if i.reason in (REASONS[2], REASONS[3])]
        reviews = Review.objects.filter(eval_run_id__in=self.run_ids)
        if queue_filter == "assigned":
            assigned = ReviewAssignment.objects.filter(eval_run_id__in=self.run_ids, assignee=user)
            mine = set(assigned.values_list("result_id", flat=True))
            done = set(reviews.filter(reviewer=user).values_list("result_id", flat=True))
            return [i for i in items if i.result_id in mine and i.result_id not in done]
        if queue_filter == "mine":
            reviews = reviews.filter(reviewer=user)
        reviewed = set(reviews.values_list("result_id", flat=True))
        if queue_filter == "reviewed":
            return [i for i in items if i.result_id in reviewed]
        return [i for i in items if i.result_id not in reviewed]

    def find(self, result_id: int) -> QueueItem | None:
        """The item of ``result_id`` in the full order (``None``: not in these runs)."""
        place = self._ranks().get(result_id)
        return None if place is None else self.order()[place]

    def _ranks(self) -> dict[int, int]:
        if self._rank is None:
            self._rank = {item.result_id: index for index, item in enumerate(self.order())}
        return self._rank

    def with_walked(self, items: list[QueueItem], walked: Sequence[int]) -> list[QueueItem]:
        """``items`` (a filtered queue) plus the results of ``walked`` (ids reviewed in this walk
        through the queue) that have left it, in queue order: the list a reviewer steps through,
        so ``k`` returns to a case just reviewed although ``unreviewed`` no longer holds it.

        Ids outside these runs are ignored; ``items`` itself is returned when nothing is added.
        """
        rank = self._ranks()
        have = {item.result_id for item in items}
        extra = {r: self.order()[rank[r]] for r in walked if r in rank and r not in have}
        if not extra:
            return items
        return sorted([*items, *extra.values()], key=lambda item: rank[item.result_id])

    def step(self, current: int | None, items: list[QueueItem], direction: int) -> QueueItem | None:
        """The item after (``direction`` 1) or before (-1) result ``current`` in ``items``.

        ``current`` may have left ``items`` (it was just reviewed under ``unreviewed``): its place
        in the full queue order decides what comes next. ``None`` past either end; the first item
        when ``current`` is ``None``.
        """
        if not items:
            return None
        if current is None:
            return items[0] if direction > 0 else items[-1]
        rank = self._ranks()
        here = rank.get(current)
        if here is None:
            return items[0]
        if direction > 0:
            return next((i for i in items if rank[i.result_id] > here), None)
        return next((i for i in reversed(items) if rank[i.result_id] < here), None)
