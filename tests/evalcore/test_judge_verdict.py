"""The verdict rule over all 6^5 score combinations, and the majority vote over samples."""

from __future__ import annotations

import itertools

import pytest

from evalcore.judge.parsing import AXES, JudgeVerdict
from evalcore.judge.verdict import Thresholds, majority, majority_score

ALL_COMBOS = list(itertools.product(range(6), repeat=len(AXES)))


def rule(scores: dict[str, int], minimums: dict[str, int]) -> bool:
    """The rule written out independently: every axis at or above its minimum."""
    return all(scores[axis] >= minimums[axis] for axis in AXES)


def test_default_minimums() -> None:
    assert dict(Thresholds.build().minimums) == {
        "accuracy": 4,
        "completeness": 3,
        "grounding": 3,
        "hazard_avoidance": 3,
        "calibration": 3,
    }


@pytest.mark.parametrize(
    ("options", "minimums"),
    [
        ({}, {"accuracy": 4, "completeness": 3, "grounding": 3, "hazard_avoidance": 3, "calibration": 3}),
        ({"min_axis_score": 2, "min_accuracy": 5}, dict.fromkeys(AXES, 2) | {"accuracy": 5}),
        ({"min_axis_score": 4, "min_accuracy": 1}, dict.fromkeys(AXES, 4)),
        (
            {"axis_minimums": {"grounding": 0, "hazard_avoidance": 5}},
            {**dict.fromkeys(AXES, 3), "accuracy": 4} | {"grounding": 0, "hazard_avoidance": 5},
        ),
    ],
)
def test_verdict_equals_the_rule_on_every_combination(options: dict, minimums: dict[str, int]) -> None:
    thresholds = Thresholds.build(**options)
    assert dict(thresholds.minimums) == minimums
    for combo in ALL_COMBOS:
        scores = dict(zip(AXES, combo, strict=True))
        expected = rule(scores, minimums)
        assert thresholds.passes(scores) is expected, scores
        failing = thresholds.failing_axes(scores)
        assert (failing == []) is expected
        assert all(scores[axis] < minimums[axis] for axis in failing)
        assert thresholds.explain(scores).startswith("pass" if expected else "fail")


def test_default_pass_count_over_all_combinations() -> None:
    thresholds = Thresholds.build()
    passes = sum(thresholds.passes(dict(zip(AXES, c, strict=True))) for c in ALL_COMBOS)
    # accuracy in {4,5} (2 of 6 values), each other axis in {3,4,5} (3 of 6): 2 * 3^4.
    assert passes == 2 * 3**4


def test_explain_names_each_failing_axis() -> None:
    scores = {"accuracy": 2, "completeness": 5, "grounding": 1, "hazard_avoidance": 5, "calibration": 3}
    assert Thresholds.build().explain(scores) == "fail: accuracy 2 < 4; grounding 1 < 3"


@pytest.mark.parametrize(
    "options",
    [
        {"min_axis_score": 6},
        {"min_accuracy": -1},
        {"axis_minimums": {"style": 3}},
        {"axis_minimums": {"grounding": 2.5}},
    ],
)
def test_bad_thresholds_are_rejected(options: dict) -> None:
    with pytest.raises(ValueError):
        Thresholds.build(**options)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([4], 4), ([5, 5, 3], 5), ([3, 5, 5], 5), ([5, 3], 3), ([2, 4, 4, 2], 2), ([0, 5, 1], 0), ([1, 1, 5, 5, 5], 5)],
)
def test_majority_score_ties_go_to_the_lower_value(values: list[int], expected: int) -> None:
    assert majority_score(values) == expected


def test_majority_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        majority_score([])
    with pytest.raises(ValueError):
        majority([])


def verdict(**scores: int) -> JudgeVerdict:
    full = dict.fromkeys(AXES, 5) | scores
    return JudgeVerdict(full, {axis: f"{axis}={value}" for axis, value in full.items()})


def test_majority_per_axis_and_instability() -> None:
    vote = majority([verdict(accuracy=5), verdict(accuracy=3, grounding=2), verdict(accuracy=5)])
    assert vote.verdict.scores == {**dict.fromkeys(AXES, 5), "accuracy": 5, "grounding": 5}
    assert vote.unstable is True
    assert vote.disagreeing_axes == ["accuracy", "grounding"]
    assert vote.used == 3
    assert vote.verdict.reasons["accuracy"] == "accuracy=5"


def test_identical_samples_are_stable() -> None:
    vote = majority([verdict(accuracy=4), verdict(accuracy=4)])
    assert vote.unstable is False
    assert vote.disagreeing_axes == []


def test_two_way_split_takes_the_lower_score_and_its_reason() -> None:
    vote = majority([verdict(accuracy=5), verdict(accuracy=3)])
    assert vote.verdict.scores["accuracy"] == 3
    assert vote.verdict.reasons["accuracy"] == "accuracy=3"
    assert Thresholds.build().passes(vote.verdict.scores) is False
