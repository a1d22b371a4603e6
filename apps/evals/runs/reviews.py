"""Human reviews: a person's verdict, rubric-axis scores and comment on one result (writes).

Reads (a run's reviews, human labels, judge-vs-people agreement) live in
:mod:`apps.evals.queries.reviews`.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import batched
from typing import Any

from django.db import transaction

from apps.core.storable import unstorable_reason
from apps.evals.models import EvalResult, Review, ReviewAssignment, ReviewRevision, ReviewVerdict
from evalcore.errors import InvalidInputError, NotFoundError
from evalcore.judge import AXES
from evalcore.judge.parsing import MAX_AXIS_SCORE

MAX_COMMENT_CHARS = 10_000
"""The longest comment kept (characters)."""


def check_review(verdict: Any, axis_scores: Any, comment: Any) -> tuple[str, dict[str, int], str]:
    """The review's fields, checked: ``(verdict, {axis: 0..5}, comment)``.

    A review needs at least one of a verdict, an axis score or a comment: a comment alone (a
    note for the team) or axis scores alone are reviews; such a review has the verdict ``""``
    and counts in no verdict figure (:mod:`apps.evals.queries.reviews`).

    Args:
        verdict: ``pass``, ``fail`` or ``unsure``; ``None`` or ``""`` for none.
        axis_scores: ``{axis: int}`` over the judge's rubric axes (``evalcore.judge.AXES``), each
            an integer 0..5; ``None`` or ``{}`` for none. An axis may be left out.
        comment: Free text (``None`` for none), at most :data:`MAX_COMMENT_CHARS` characters.

    Raises:
        InvalidInputError: Naming the field: an unknown verdict, an unknown axis, a score that is
            not an integer in 0..5, a comment that is not text, too long or holding a NUL
            character or a lone surrogate (:func:`apps.core.storable.unstorable_reason`); a review with none of
            the three (field ``verdict``).
    """
    if verdict is None:
        verdict = ""
    if verdict != "" and verdict not in ReviewVerdict.values:
        raise InvalidInputError(
            f"verdict must be one of {', '.join(ReviewVerdict.values)} (or none), got {verdict!r}", field="verdict"
        )
    scores: dict[str, int] = {}
    if axis_scores is not None:
        if not isinstance(axis_scores, Mapping):
            raise InvalidInputError("axis_scores must be an object {axis: 0..5}", field="axis_scores")
        for axis, value in axis_scores.items():
            if axis not in AXES:
                raise InvalidInputError(
                    f"unknown axis {axis!r}; the axes are {', '.join(AXES)}", field=f"axis_scores.{axis}"
                )
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AXIS_SCORE:
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
                raise InvalidInputError(
                    f"{axis} must be an integer 0..{MAX_AXIS_SCORE}, got {shown}", field=f"axis_scores.{axis}"
                )
            scores[axis] = value
    if comment is None:
        comment = ""
    if not isinstance(comment, str):
        raise InvalidInputError("comment must be text", field="comment")
    if len(comment) > MAX_COMMENT_CHARS:
        raise InvalidInputError(f"comment is over {MAX_COMMENT_CHARS} characters", field="comment")
    if (reason := unstorable_reason(comment)) is not None:
        raise InvalidInputError(f"comment {reason}", field="comment")
    comment = comment.strip()
    if not (verdict or scores or comment):
        raise InvalidInputError("a review needs a verdict, an axis score or a comment", field="verdict")
    return str(verdict), {axis: scores[axis] for axis in AXES if axis in scores}, comment


def find_result(eval_run_id: str, case_id: str, repeat_index: int = 0) -> EvalResult:
    """The result of ``case_id`` (repeat ``repeat_index``) in an eval run.

    Raises:
        NotFoundError: No such result.
    """
    result = (
        EvalResult.objects.filter(eval_run_id=eval_run_id, case_id=case_id, repeat_index=repeat_index)
        .select_related("eval_run")
        .first()
    )
    if result is None:
        raise NotFoundError(f"eval run {eval_run_id} has no result for case {case_id!r} (repeat {repeat_index})")
    return result


def save_review(
    result: EvalResult,
    reviewer: Any,
    *,
    verdict: Any = "",
    axis_scores: Any = None,
    comment: Any = "",
) -> tuple[Review, bool]:
    """Create ``reviewer``'s review of ``result``, or edit it (the replaced state is kept as a
    :class:`ReviewRevision`). One transaction; an edit that changes nothing writes nothing.

    Returns:
        ``(review, created)``.

    Raises:
        InvalidInputError: A bad field (see :func:`check_review`).
    """
    verdict, scores, text = check_review(verdict, axis_scores, comment)
    with transaction.atomic():
        review = Review.objects.select_for_update().filter(result=result, reviewer=reviewer).first()
        if review is None:
            review = Review.objects.create(
                result=result,
                eval_run_id=result.eval_run_id,
                case_id=result.case_id,
                reviewer=reviewer,
                verdict=verdict,
                axis_scores=scores,
                comment=text,
            )
            return review, True
        if (review.verdict, review.axis_scores, review.comment) == (verdict, scores, text):
            return review, False
        ReviewRevision.objects.create(
            review=review,
            verdict=review.verdict,
            axis_scores=review.axis_scores,
            comment=review.comment,
            saved=review.updated,
        )
        review.verdict, review.axis_scores, review.comment = verdict, scores, text
        review.save(update_fields=["verdict", "axis_scores", "comment", "updated"])
        return review, False


def assign_results(result_ids: list[int], assignees: list[Any], *, by: Any = None) -> int:
    """Hand ``result_ids`` to ``assignees`` in turn (round robin, in the given order), skipping
    results a person already has. One transaction.

    Returns:
        How many assignments were made.

    Raises:
        InvalidInputError: No assignee.
    """
    if not assignees:
        raise InvalidInputError("choose at least one reviewer to assign to", field="assignees")
    results: dict[int, Any] = {}
    for chunk in batched(result_ids, 500):  # a set's queue may hold tens of thousands: bounded IN lists
        results.update(EvalResult.objects.filter(pk__in=chunk).only("pk", "eval_run_id").in_bulk())
    rows = []
    for index, result_id in enumerate(r for r in result_ids if r in results):
        result = results[result_id]
        rows.append(
            ReviewAssignment(
                result=result,
                eval_run_id=result.eval_run_id,
                assignee=assignees[index % len(assignees)],
                assigned_by=by if getattr(by, "pk", None) else None,
            )
        )
    with transaction.atomic():
        # the pairs stored already are not made again (nor counted: bulk_create with
        # ignore_conflicts returns every object it was given, stored or not)
        held: set[tuple[int, int]] = set()
        assignee_ids = [a.pk for a in assignees]
        for chunk in batched([row.result_id for row in rows], 500):
            held.update(
                ReviewAssignment.objects.filter(result_id__in=chunk, assignee_id__in=assignee_ids).values_list(
                    "result_id", "assignee_id"
                )
            )
        new = [row for row in rows if (row.result_id, row.assignee_id) not in held]
        ReviewAssignment.objects.bulk_create(new, ignore_conflicts=True, batch_size=500)
    return len(new)
