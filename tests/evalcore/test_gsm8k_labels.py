"""``numeric_match`` reproduces OpenAI's own GSM8K ``is_correct`` labels exactly.

``example_model_solutions.jsonl`` (openai/grade-school-math) holds, for each of the 1,319 test
questions, four recorded model solutions (GPT-3 6B / 175B, finetuning / verification), each with
OpenAI's ``is_correct`` label. Solutions end ``A: <number>``; reference answers in ``test.jsonl``
end ``#### <number>``. Scoring every solution against the test answer with the default
``numeric_match`` must give exactly 286 / 515 / 458 / 742 passes, agreeing question by question.
(Reading "1,000" as 1000 matters: without it 175b_finetuning drops to 456.)
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

from evalcore.runner import run_eval
from evalcore.scorers import NumericMatch, ScoreContext
from evalcore.types import Case, RunRecord

MODELS: dict[str, int] = {
    "6b_finetuning": 286,
    "6b_verification": 515,
    "175b_finetuning": 458,
    "175b_verification": 742,
}


def realdata_dir() -> Path:
    """``/work/shared/realdata`` next to the repo, else ``$EVALSITE_REALDATA``."""
    default = Path(__file__).resolve().parents[2].parent / "shared" / "realdata"
    if default.is_dir():
        return default
    return Path(os.environ.get("EVALSITE_REALDATA", str(default)))


GSM8K = realdata_dir() / "gsm8k"
pytestmark = pytest.mark.skipif(
    not (GSM8K / "example_model_solutions.jsonl.gz").is_file() or not (GSM8K / "test.jsonl").is_file(),
    reason=f"GSM8K real data not found under {GSM8K} (set EVALSITE_REALDATA)",
)


@pytest.fixture(scope="module")
def gsm8k() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(test row, model solutions row) pairs, in file order."""
    with gzip.open(GSM8K / "example_model_solutions.jsonl.gz", "rt", encoding="utf-8") as fh:
        solutions = [json.loads(line) for line in fh if line.strip()]
    with (GSM8K / "test.jsonl").open(encoding="utf-8") as fh:
        tests = [json.loads(line) for line in fh if line.strip()]
    return list(zip(tests, solutions, strict=True))


def test_files_line_up(gsm8k: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    assert len(gsm8k) == 1319
    assert all(test["question"] == sol["question"] for test, sol in gsm8k)
    assert set(gsm8k[0][1]) == {"question", "ground_truth", *MODELS}


@pytest.mark.parametrize("model", sorted(MODELS))
async def test_numeric_match_reproduces_is_correct(
    gsm8k: list[tuple[dict[str, Any], dict[str, Any]]], model: str
) -> None:
    scorer = NumericMatch()
    disagreements: list[tuple[int, bool, str | None]] = []
    passes = 0
    for index, (test, sol) in enumerate(gsm8k):
        case = Case(id=str(index), input=test["question"], expected=test["answer"])
        output = sol[model]["solution"]
        run = RunRecord(case_id=case.id, run_id=f"gsm8k:{index}", trace_id=f"gsm8k:{index}", output=output)
        score = await scorer.score(ScoreContext(case=case, output=output, run=run))
        assert score.value is score.passed
        passes += bool(score.passed)
        if score.passed != sol[model]["is_correct"]:
            disagreements.append((index, sol[model]["is_correct"], score.explanation))
    assert disagreements == []
    assert passes == MODELS[model]


async def test_the_runner_gives_the_same_pass_rate(gsm8k: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    # The whole engine path: a target that replays the recorded solution, scored by a CLI spec.
    solutions = {str(i): sol["175b_verification"]["solution"] for i, (_, sol) in enumerate(gsm8k)}
    cases = [Case(id=str(i), input=test["question"], expected=test["answer"]) for i, (test, _) in enumerate(gsm8k)]

    async def replay(question: str, ctx: Any) -> str:
        return solutions[ctx.case.id]

    report = await run_eval(cases, replay, ["numeric_match"], concurrency=16)
    assert report.n == 1319
    assert report.passed == MODELS["175b_verification"]
    assert report.errored == 0
