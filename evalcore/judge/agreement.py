"""How well the judge agrees with human labels: accuracy, Cohen's kappa and the confusion matrix.

Cohen's kappa (Cohen 1960, "A coefficient of agreement for nominal scales", Educational and
Psychological Measurement 20(1)) corrects raw agreement for the agreement expected by chance:
``kappa = (p_o - p_e) / (1 - p_e)``, with ``p_o`` the observed agreement and ``p_e`` the sum over
classes of the product of the two raters' marginal rates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.judge.summary import iter_scores
from evalcore.types import Case, CaseResult


@dataclass(slots=True, frozen=True)
class Confusion:
    """Judge verdict (rows) against human label (columns); "positive" = pass / correct.

    Attributes:
        tp: Judge pass, human correct.
        fp: Judge pass, human incorrect (the judge was lenient).
        fn: Judge fail, human correct (the judge was harsh).
        tn: Judge fail, human incorrect.
    """

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0


@dataclass(slots=True, frozen=True)
class Agreement:
    """Agreement figures over ``n`` (judge, human) pairs.

    Attributes:
        n: Pairs compared.
        accuracy: Share of pairs where the two agree, ``p_o`` in 0..1.
        cohen_kappa: Chance-corrected agreement in -1..1 (1 = perfect, 0 = chance level).
        confusion: The 2x2 counts.
    """

    n: int
    accuracy: float
    cohen_kappa: float
    confusion: Confusion


def agreement(pairs: Iterable[tuple[bool, bool]]) -> Agreement:
    """Accuracy and Cohen's kappa of ``(judge, human)`` boolean pairs.

    When ``p_e == 1`` the formula divides by zero: both raters gave one and the same class to
    every item. We return 1.0 when they agree on every item (``p_o == 1``, which ``p_e == 1``
    implies for two binary raters) and 0.0 otherwise: our own convention, chosen so the figure
    is always a finite number (a judge matching a one-class label set exactly is not "unknown").

    Raises:
        ValueError: When there are no pairs.
    """
    tp = fp = fn = tn = 0
    for judge, human in pairs:
        if judge and human:
            tp += 1
        elif judge:
            fp += 1
        elif human:
            fn += 1
        else:
            tn += 1
    n = tp + fp + fn + tn
    if n == 0:
        raise ValueError("agreement of no pairs")
    p_o = (tp + tn) / n
    judge_yes, human_yes = (tp + fp) / n, (tp + fn) / n
    p_e = judge_yes * human_yes + (1 - judge_yes) * (1 - human_yes)
    if p_e >= 1.0:
        kappa = 1.0 if p_o == 1.0 else 0.0
    else:
        kappa = (p_o - p_e) / (1 - p_e)
    return Agreement(n=n, accuracy=p_o, cohen_kappa=kappa, confusion=Confusion(tp, fp, fn, tn))


LabelGetter = str | Callable[[Case], Any]
"""A dotted path into ``case.metadata`` (``"is_correct"``, ``"labels.175b_verification"``) or a
function ``case -> label``."""


def read_label(case: Case, label: LabelGetter = "is_correct") -> bool | None:
    """A case's human label as a bool, or ``None`` when it has none.

    Booleans are taken as they are, and the integers 0 / 1 as False / True; anything else
    (a missing key, ``None``, a string) counts as no label rather than a guess.
    """
    if callable(label):
        value = label(case)
    else:
        value = case.metadata
        for part in label.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return None


@dataclass(slots=True)
class LabelledPairs:
    """Judge verdicts paired with human labels, and what could not be paired.

    Attributes:
        pairs: ``(judge verdict, human label)`` per case that has both.
        case_ids: The case id of each pair, in the same order.
        unlabelled: Cases with a verdict but no usable human label.
        judge_errors: Cases whose judge score is an error (no verdict to compare).
    """

    pairs: list[tuple[bool, bool]] = field(default_factory=list)
    case_ids: list[str] = field(default_factory=list)
    unlabelled: int = 0
    judge_errors: int = 0


def pair_with_labels(
    results: Iterable[CaseResult], label: LabelGetter = "is_correct", score_name: str = JUDGE_SCORE
) -> LabelledPairs:
    """Pair each case's judge verdict (the ``score_name`` score's bool) with its human label.

    Args:
        results: Scored case results.
        label: Where the human label is (see :data:`LabelGetter`); default ``"is_correct"``.
        score_name: The verdict score to read.
    """
    out = LabelledPairs()
    for result in results:
        for score in iter_scores([result], score_name):
            if score.error is not None or not isinstance(score.value, bool):
                out.judge_errors += 1
                continue
            human = read_label(result.case, label)
            if human is None:
                out.unlabelled += 1
                continue
            out.pairs.append((score.value, human))
            out.case_ids.append(result.case.id)
    return out


def judge_agreement(
    results: Iterable[CaseResult], label: LabelGetter = "is_correct", score_name: str = JUDGE_SCORE
) -> Agreement:
    """:func:`agreement` of the judge verdicts with the human labels found by :func:`pair_with_labels`.

    Raises:
        ValueError: When no case has both a verdict and a label.
    """
    return agreement(pair_with_labels(results, label, score_name).pairs)
