"""The review queue of a run: its results in the order a person should grade them.

Cases that most need a person come first (:data:`REASONS`, in order): the judge was unstable
across its samples, the judge disagrees with a deterministic scorer, the target errored, the case
failed, no scorer decided it (unscored); then the rest. Within a reason, case id order. The order
depends only on the stored scores, never on who reviewed what, so ``j`` / ``k`` step through a
stable list while reviews are being saved; filters narrow it (:data:`QUEUE_FILTERS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


@dataclass(slots=True, frozen=True)
class QueueItem:
    """One result in the queue: its id, case, repeat and why it is where it is."""

    result_id: int
    case_id: str
    repeat_index: int
    reason: str


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
    key = f"evals.review-queue:{eval_run.pk}:{eval_run.n_done}:{eval_run.status}"
    found: list[QueueItem] | None = cache.get(key)
    if found is None:
        rows = EvalResult.objects.filter(eval_run=eval_run).values_list(
            "pk", "case_id", "repeat_index", "status", "scores"
        )
        items = [
            QueueItem(pk, case_id, repeat, _reason(status, scores)) for pk, case_id, repeat, status, scores in rows
        ]
        items.sort(key=lambda i: (REASONS.index(i.reason), i.case_id, i.repeat_index))
        found = items
        cache.set(key, found, 600)
    return found


def filtered_queue(eval_run: EvalRun, user: Any, queue_filter: str) -> list[QueueItem]:
    """The queue narrowed by ``queue_filter`` (a key of :data:`QUEUE_FILTERS`; unknown: the default).

    Review state is read fresh (one query), so a case just reviewed leaves ``unreviewed`` at once.
    """
    items = queue_order(eval_run)
    if queue_filter not in QUEUE_FILTERS:
        queue_filter = next(iter(QUEUE_FILTERS))
    if queue_filter == "all":
        return items
    if queue_filter == "flagged":
        return [i for i in items if i.reason in REASONS[:2]]
    if queue_filter == "failed":
        return [i for i in items if i.reason in (REASONS[2], REASONS[3])]
    reviews = Review.objects.filter(eval_run=eval_run)
    if queue_filter == "assigned":
        mine = set(
            ReviewAssignment.objects.filter(eval_run=eval_run, assignee=user).values_list("result_id", flat=True)
        )
        done = set(reviews.filter(reviewer=user).values_list("result_id", flat=True))
        return [i for i in items if i.result_id in mine and i.result_id not in done]
    if queue_filter == "mine":
        reviews = reviews.filter(reviewer=user)
    reviewed = set(reviews.values_list("result_id", flat=True))
    if queue_filter == "reviewed":
        return [i for i in items if i.result_id in reviewed]
    return [i for i in items if i.result_id not in reviewed]


def step(eval_run: EvalRun, current: int | None, items: list[QueueItem], direction: int) -> QueueItem | None:
    """The item after (``direction`` 1) or before (-1) result ``current`` in ``items``.

    ``current`` may have left ``items`` (it was just reviewed under ``unreviewed``): its place in
    the full queue order decides what comes next. ``None`` past either end; the first item
    when ``current`` is ``None``.
    """
    if not items:
        return None
    if current is None:
        return items[0] if direction > 0 else items[-1]
    rank = {item.result_id: index for index, item in enumerate(queue_order(eval_run))}
    here = rank.get(current)
    if here is None:
        return items[0]
    if direction > 0:
        return next((i for i in items if rank[i.result_id] > here), None)
    return next((i for i in reversed(items) if rank[i.result_id] < here), None)
