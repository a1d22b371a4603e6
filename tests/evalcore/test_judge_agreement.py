"""Judge-human agreement: Cohen's kappa against hand-computed figures, label lookup, GSM8K labels."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from evalcore.judge import (
    RubricJudge,
    agreement,
    judge_agreement,
    pair_with_labels,
    read_label,
)
from evalcore.runner import run_eval
from evalcore.types import Case, CaseResult, RunRecord, Score
from tests.evalcore.test_judge_rubric import FakeJudge, answer


def pairs(tp: int, fp: int, fn: int, tn: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * tp + [(True, False)] * fp + [(False, True)] * fn + [(False, False)] * tn


def test_hand_computed_example() -> None:
    # n=50: p_o = (20+15)/50 = 0.7; judge yes 25/50, human yes 30/50;
    # p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = (0.7-0.5)/(1-0.5) = 0.4.
    result = agreement(pairs(tp=20, fp=5, fn=10, tn=15))
    assert result.n == 50
    assert result.accuracy == pytest.approx(0.7)
    assert result.cohen_kappa == pytest.approx(0.4)
    assert (result.confusion.tp, result.confusion.fp, result.confusion.fn, result.confusion.tn) == (20, 5, 10, 15)


def test_second_hand_computed_example() -> None:
    # n=10: p_o = 0.6; judge yes 0.6, human yes 0.4; p_e = 0.24 + 0.24 = 0.48; kappa = 0.12/0.52.
    result = agreement(pairs(tp=3, fp=3, fn=1, tn=3))
    assert result.accuracy == pytest.approx(0.6)
    assert result.cohen_kappa == pytest.approx(0.12 / 0.52)


def test_perfect_and_inverted_agreement() -> None:
    assert agreement(pairs(5, 0, 0, 5)).cohen_kappa == pytest.approx(1.0)
    assert agreement(pairs(0, 5, 5, 0)).cohen_kappa == pytest.approx(-1.0)


def test_constant_raters_agreeing_everywhere_give_kappa_one() -> None:
    # p_e == 1: the formula is 0/0; by our convention full agreement is 1.0.
    assert agreement(pairs(7, 0, 0, 0)).cohen_kappa == 1.0
    assert agreement(pairs(0, 0, 0, 7)).cohen_kappa == 1.0


def test_a_judge_that_always_passes_is_at_chance() -> None:
    result = agreement(pairs(tp=6, fp=4, fn=0, tn=0))
    assert result.accuracy == pytest.approx(0.6)
    assert result.cohen_kappa == pytest.approx(0.0)


def test_no_pairs_is_an_error() -> None:
    with pytest.raises(ValueError):
        agreement([])


@pytest.mark.parametrize(
    ("metadata", "label", "expected"),
    [
        ({"is_correct": True}, "is_correct", True),
        ({"is_correct": 0}, "is_correct", False),
        ({"is_correct": "yes"}, "is_correct", None),
        ({}, "is_correct", None),
        ({"labels": {"175b_verification": False}}, "labels.175b_verification", False),
        ({"labels": {"6b": True}}, "labels.175b_verification", None),
        ({"labels": True}, "labels.x", None),
    ],
)
def test_read_label(metadata: dict[str, Any], label: str, expected: bool | None) -> None:
    assert read_label(Case(id="c", input="q", metadata=metadata), label) is expected


def test_read_label_with_a_function() -> None:
    case = Case(id="c", input="q", tags=["correct"])
    assert read_label(case, lambda c: "correct" in c.tags) is True


def result(case_id: str, verdict: bool | None, label: Any) -> CaseResult:
    score = (
        Score("rubric_judge", verdict, passed=verdict) if verdict is not None else Score.failure("rubric_judge", "x")
    )
    case = Case(id=case_id, input="q", metadata={"is_correct": label} if label is not None else {})
    return CaseResult(case=case, run=RunRecord(case_id=case_id, run_id=case_id, trace_id=case_id), scores=[score])


def test_pair_with_labels_skips_errors_and_unlabelled() -> None:
    results = [result("a", True, True), result("b", False, True), result("c", None, True), result("d", True, None)]
    paired = pair_with_labels(results)
    assert paired.pairs == [(True, True), (False, True)]
    assert paired.case_ids == ["a", "b"]
    assert (paired.unlabelled, paired.judge_errors) == (1, 1)


def realdata_dir() -> Path:
    default = Path(__file__).resolve().parents[2].parent / "shared" / "realdata"
    return default if default.is_dir() else Path(os.environ.get("EVALSITE_REALDATA", str(default)))


SOLUTIONS = realdata_dir() / "gsm8k" / "example_model_solutions.jsonl.gz"
VARIANT = "175b_verification"


def final_number(text: str, marker: str) -> str | None:
    match = re.search(re.escape(marker) + r"\s*\$?(-?[\d,]*\.?\d+)", text)
    return match.group(1).replace(",", "") if match else None


def oracle_reply(messages: list[dict[str, Any]], _: dict[str, Any]) -> str:
    """A stand-in judge that compares the final numbers of the graded and the reference answer."""
    lines = messages[1]["content"].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("<case-data-"))
    end = lines.index(f"</{lines[start][1:-1]}>")
    data = json.loads("\n".join(lines[start + 1 : end]))  # the case, fenced as data
    reference, graded = data["reference_answer"], data["answer_to_grade"]
    same = final_number(graded, "A:") == final_number(reference, "A:")
    return answer(accuracy=5 if same else 1)


@pytest.mark.skipif(not SOLUTIONS.is_file(), reason=f"GSM8K real data not found at {SOLUTIONS}")
async def test_gsm8k_labels_through_a_dotted_path() -> None:
    """Real GSM8K solutions with OpenAI's is_correct labels, paired via ``labels.<variant>``."""
    with gzip.open(SOLUTIONS, "rt", encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(40)]
    cases = [
        Case(
            id=str(i),
            input=row["question"],
            expected=row["ground_truth"],
            metadata={"labels": {v: row[v]["is_correct"] for v in row if isinstance(row[v], dict)}},
        )
        for i, row in enumerate(rows)
    ]
    solution = {row["question"]: row[VARIANT]["solution"] for row in rows}
    labels = [row[VARIANT]["is_correct"] for row in rows]
    assert 0 < sum(labels) < len(labels)  # both classes present, so kappa is informative

    def replay(question: str) -> str:
        return solution[question]

    results: list[CaseResult] = []

    class Collect:
        def on_event(self, event: Any) -> None:
            pass

        def on_result(self, item: CaseResult) -> None:
            results.append(item)

        def flush(self) -> None:
            pass

    judge = RubricJudge(model=FakeJudge(oracle_reply))
    await run_eval(cases, replay, [judge], sink=Collect())
    oracle = judge_agreement(results, label=f"labels.{VARIANT}")
    assert oracle.n == 40
    assert oracle.accuracy == 1.0 and oracle.cohen_kappa == pytest.approx(1.0)

    lenient_results = [
        CaseResult(case=r.case, run=r.run, scores=[Score("rubric_judge", True, passed=True)]) for r in results
    ]
    lenient = judge_agreement(lenient_results, label=f"labels.{VARIANT}")
    assert lenient.accuracy == pytest.approx(sum(labels) / len(labels))
    assert lenient.cohen_kappa == pytest.approx(0.0)
