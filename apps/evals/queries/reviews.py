"""Reads of human reviews: a result's reviews, a run's progress, people's labels, and how well
the judge and each deterministic scorer agree with people.

Agreement of a scorer with people is :func:`evalcore.judge.agreement.agreement` (accuracy and
Cohen's kappa, Cohen 1960) over the results that have both a scorer verdict and a human label.
Agreement among people is Krippendorff's alpha for nominal data (Krippendorff 2011, "Computing
Krippendorff's Alpha-Reliability"), computed by the ``krippendorff`` package over the results
that two or more people graded: the ceiling a judge can be held to.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet, Review, ReviewVerdict
from evalcore.judge import AXES
from evalcore.judge.agreement import Agreement, agreement
from evalcore.judge.align import HumanLabel
from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.judge.parsing import MAX_AXIS_SCORE

VERDICT_NAME = "verdict"
"""The row of :func:`judge_vs_people` for the case's overall verdict (all scorers together)."""

MAX_DISAGREEMENTS = 50
"""Disagreeing cases listed per scorer."""


def result_reviews(result: EvalResult) -> list[Review]:
    """The result's reviews, oldest first, with reviewer and revision count loaded."""
    from django.db.models import Count

    return list(
        Review.objects.filter(result=result).select_related("reviewer").annotate(n_revisions=Count("revisions"))
    )


@dataclass(slots=True, frozen=True)
class ReviewProgress:
    """How much of a run people have graded: ``reviewed`` of ``total`` results (0 when empty)."""

    reviewed: int
    total: int

    @property
    def share(self) -> float:
        """``reviewed / total`` in 0..1 (0 for a run without results)."""
        return self.reviewed / self.total if self.total else 0.0


def review_progress(runs: EvalRun | Sequence[EvalRun]) -> ReviewProgress:
    """Results with at least one review (of any kind: a verdict, axis scores or only a comment), of
    all the results of a run or of several runs (a set's queue). Two COUNT queries."""
    run_ids = [runs.pk] if isinstance(runs, EvalRun) else [r.pk for r in runs]
    total = EvalResult.objects.filter(eval_run_id__in=run_ids).count()
    reviewed = Review.objects.filter(eval_run_id__in=run_ids).values("result_id").distinct().count()
    return ReviewProgress(reviewed, total)


def _reviews_of(scope: EvalRun | EvalSet) -> QuerySet[Review]:
    """The reviews of a run, or of every run of a set."""
    if isinstance(scope, EvalSet):
        return Review.objects.filter(eval_run__eval_set=scope)
    return Review.objects.filter(eval_run=scope)


def human_labels(eval_run: EvalRun | EvalSet) -> dict[int, bool]:
    """Each reviewed result's human label (of a run, or of every run of a set):
    ``{result id: passed}``.

    The majority of its ``pass`` / ``fail`` verdicts; ``unsure`` verdicts and reviews without a
    verdict (only a comment or axis scores) do not vote, and a result whose votes tie (or that has
    no vote) has no label.
    """
    votes: dict[int, Counter[str]] = defaultdict(Counter)
    voting = _reviews_of(eval_run).filter(verdict__in=(ReviewVerdict.PASS, ReviewVerdict.FAIL))
    for result_id, verdict in voting.values_list("result_id", "verdict"):
        votes[result_id][verdict] += 1
    labels: dict[int, bool] = {}
    for result_id, counts in votes.items():
        yes, no = counts[ReviewVerdict.PASS], counts[ReviewVerdict.FAIL]
        if yes != no:
            labels[result_id] = yes > no
    return labels


def labels_by_case(eval_run: EvalRun) -> dict[tuple[str, int], bool]:
    """:func:`human_labels` keyed by ``(case id, repeat index)`` (for a rescore of the run)."""
    labels = human_labels(eval_run)
    rows = EvalResult.objects.filter(pk__in=labels).values_list("pk", "case_id", "repeat_index")
    return {(case_id, repeat): labels[pk] for pk, case_id, repeat in rows}


@dataclass(slots=True)
class Disagreement:
    """A result where a scorer and people disagree."""

    result_id: int
    eval_run_id: str
    case_id: str
    repeat_index: int
    scorer_passed: bool
    human_passed: bool


@dataclass(slots=True)
class ScorerAgreement:
    """One scorer (or the overall verdict, :data:`VERDICT_NAME`) against people's labels.

    Attributes:
        name: Score name, or ``verdict``.
        figures: Accuracy, Cohen's kappa and the confusion counts over the paired results.
        disagreements: Up to :data:`MAX_DISAGREEMENTS` results where they differ, in case order.
    """

    name: str
    figures: Agreement
    disagreements: list[Disagreement] = field(default_factory=list)


@dataclass(slots=True)
class AxisAgreement:
    """The judge's score on one rubric axis against people's (both 0..5).

    Attributes:
        axis: The axis name.
        n: Results where both scored it.
        mean_abs_diff: Mean of |judge - person| in axis points (0..5).
        within_one: Share of pairs at most one point apart, 0..1.
    """

    axis: str
    n: int
    mean_abs_diff: float
    within_one: float


@dataclass(slots=True)
class PeopleAgreement:
    """The judge-vs-people block of a run page.

    Attributes:
        labelled: Results with a human label.
        scorers: The overall verdict first, then each score with a verdict, by name.
        axes: Per rubric axis, when both the judge and people scored it.
        alpha: Krippendorff's alpha (nominal, over pass / fail / unsure) among people, on results
            given a verdict by two or more; ``None`` when there are none or it is undefined.
        multi_rated: Results given a verdict by two or more people.

    Reviews without a verdict (only a comment, or only axis scores) count in no verdict figure;
    their axis scores count in ``axes``.
    """

    labelled: int
    scorers: list[ScorerAgreement]
    axes: list[AxisAgreement]
    alpha: float | None
    multi_rated: int


def _score_verdicts(scores: list[dict[str, Any]]) -> dict[str, bool]:
    verdicts: dict[str, bool] = {}
    for score in scores or []:
        if isinstance(score, dict) and isinstance(score.get("passed"), bool) and not score.get("error"):
            verdicts[str(score.get("name"))] = score["passed"]
    return verdicts


def _judge_axes(scores: list[dict[str, Any]]) -> dict[str, int]:
    axes: dict[str, int] = {}
    for score in scores or []:
        name = str(score.get("name", "")) if isinstance(score, dict) else ""
        axis = name.removeprefix(f"{JUDGE_SCORE}.")
        if axis in AXES and name != axis and isinstance(score.get("value"), int | float) and not score.get("error"):
            axes[axis] = round(float(score["value"]) * MAX_AXIS_SCORE)
    return axes


def judge_vs_people(scope: EvalRun | EvalSet) -> PeopleAgreement:
    """How the verdicts, each scorer with a verdict and the judge's axes agree with people, over a
    run's reviews or (an :class:`EvalSet`) the reviews of all its runs.

    Reads the reviews and only the results people graded (no full scan of a large run).
    """
    labels = human_labels(scope)
    reviews = list(_reviews_of(scope).values_list("result_id", "reviewer_id", "verdict", "axis_scores"))
    results = (
        EvalResult.objects.filter(pk__in={r[0] for r in reviews})
        .order_by("eval_run_id", "case_id", "repeat_index")
        .values_list("pk", "eval_run_id", "case_id", "repeat_index", "passed", "scores")
    )
    pairs: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    disagreements: dict[str, list[Disagreement]] = defaultdict(list)
    judge_axes: dict[int, dict[str, int]] = {}
    for pk, eval_run_id, case_id, repeat_index, passed, scores in results:
        judge_axes[pk] = _judge_axes(scores)
        label = labels.get(pk)
        if label is None:
            continue
        verdicts = {VERDICT_NAME: bool(passed), **_score_verdicts(scores)}
        for name, verdict in verdicts.items():
            pairs[name].append((verdict, label))
            if verdict != label and len(disagreements[name]) < MAX_DISAGREEMENTS:
                disagreements[name].append(Disagreement(pk, eval_run_id, case_id, repeat_index, verdict, label))
    order = [VERDICT_NAME, *sorted(n for n in pairs if n != VERDICT_NAME)]
    voted = [r for r in reviews if r[2] in ReviewVerdict.values]  # a review without a verdict does not vote
    scorers = [ScorerAgreement(n, agreement(pairs[n]), disagreements[n]) for n in order if pairs[n]]
    return PeopleAgreement(
        labelled=len(labels),
        scorers=scorers,
        axes=_axis_agreement(reviews, judge_axes),
        alpha=_alpha(voted),
        multi_rated=sum(1 for n in Counter(r[0] for r in voted).values() if n >= 2),
    )


def _axis_agreement(
    reviews: list[tuple[int, int, str, Any]], judge_axes: dict[int, dict[str, int]]
) -> list[AxisAgreement]:
    diffs: dict[str, list[int]] = defaultdict(list)
    for result_id, _, _, axis_scores in reviews:
        judged = judge_axes.get(result_id, {})
        for axis, value in (axis_scores or {}).items():
            if axis in judged and isinstance(value, int):
                diffs[axis].append(abs(judged[axis] - value))
    return [
        AxisAgreement(axis, len(d), sum(d) / len(d), sum(1 for x in d if x <= 1) / len(d))
        for axis in AXES
        if (d := diffs.get(axis))
    ]


def _alpha(reviews: list[tuple[int, int, str, Any]]) -> float | None:
    by_result: dict[int, dict[int, str]] = defaultdict(dict)
    for result_id, reviewer_id, verdict, _ in reviews:
        by_result[result_id][reviewer_id] = verdict
    graded = {r: v for r, v in by_result.items() if len(v) >= 2}
    if not graded:
        return None
    import krippendorff
    import numpy as np

    reviewers = sorted({reviewer for verdicts in graded.values() for reviewer in verdicts})
    codes = {verdict: index for index, verdict in enumerate(ReviewVerdict.values)}
    matrix = np.full((len(reviewers), len(graded)), np.nan)
    for column, verdicts in enumerate(graded.values()):
        for reviewer, verdict in verdicts.items():
            matrix[reviewers.index(reviewer), column] = codes[verdict]
    if len({value for value in matrix.flatten() if not math.isnan(value)}) < 2:
        # one category only: every pair agrees, and alpha's expected disagreement is 0 (undefined)
        return None
    value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))
    return value if math.isfinite(value) else None


def alignment_labels(eval_set: EvalSet) -> list[HumanLabel]:
    """People's labels on a set's judged outputs, for aligning the judge
    (:func:`evalcore.judge.align.align`): one per result of any run of the set that people gave a
    pass/fail majority, with the output graded, people's comments, the judge's stored verdict and
    the case's split in the set now (the set's own split discipline; a case deleted since: left
    out). Four queries."""
    labels = human_labels(eval_set)
    comments: dict[int, list[str]] = defaultdict(list)
    for result_id, comment in (
        _reviews_of(eval_set).filter(result_id__in=labels).exclude(comment="").values_list("result_id", "comment")
    ):
        comments[result_id].append(comment.strip())
    rows = (
        EvalResult.objects.filter(pk__in=labels)
        .order_by("eval_run_id", "case_id", "repeat_index")
        .values_list("pk", "case_id", "expected", "scores", "run__final_answer")
    )
    results = list(rows)
    cases = {
        case_id: (split, value)
        for case_id, split, value in EvalCase.objects.filter(
            eval_set=eval_set, case_id__in={r[1] for r in results}
        ).values_list("case_id", "split", "input")
    }
    found = []
    for pk, case_id, expected, scores, output in results:
        if case_id not in cases:
            continue
        judged = _score_verdicts(scores).get(JUDGE_SCORE)
        found.append(
            HumanLabel(
                key=str(pk),
                case_id=case_id,
                split=cases[case_id][0],
                input=cases[case_id][1],
                expected=expected,
                output=output,
                passed=labels[pk],
                comment=" / ".join(comments.get(pk, [])),
                judge_passed=judged,
            )
        )
    return found


def people_alpha(eval_set: EvalSet, split: str) -> tuple[float | None, int]:
    """Krippendorff's alpha among people (nominal) over the verdicts on the set's results whose
    case is on ``split`` now (ties included: a tie is disagreement, not a missing label), and how
    many results two or more people graded (the n it rests on): the ceiling of a judge there."""
    case_ids = EvalCase.objects.filter(eval_set=eval_set, split=split).values("case_id")
    voted = list(
        _reviews_of(eval_set)
        .filter(case_id__in=case_ids, verdict__in=ReviewVerdict.values)
        .values_list("result_id", "reviewer_id", "verdict", "axis_scores")
    )
    return _alpha(voted), sum(1 for n in Counter(r[0] for r in voted).values() if n >= 2)
