"""Conversation cases (evalcore.conversations): read from JSON Lines and ADK files, played turn by
turn on one session, each turn scored against its own expectation (repro bh-43)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from evalcore.conversations import Session, conversation_of
from evalcore.jsonvalue import MISSING
from evalcore.loaders import load_cases
from evalcore.loaders.errors import CaseBankError
from evalcore.runner import rescore, run_eval
from evalcore.store import NullSink
from evalcore.types import Case, CaseResult, CaseStatus

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BH43 = FIXTURES / "repros" / "bh-43-turns.evalset.json"


def _targets() -> Any:
    spec = importlib.util.spec_from_file_location("bh43_targets", FIXTURES / "repros" / "bh-43-agents" / "targets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Collect(NullSink):
    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)


def play(cases: list[Case], target: Any, scorers: list[Any], **options: Any) -> list[CaseResult]:
    sink = Collect()
    asyncio.run(run_eval(cases, target, scorers, sink=sink, **options))
    return sink.results


def turn_verdicts(result: CaseResult, name: str = "tool_calls") -> list[bool | None]:
    score = next(s for s in result.scores if s.name == name)
    return [None if t is None else t["passed"] for t in score.metadata["turns"]]


# --- bh-43: a call made in the wrong turn -----------------------------------------------------


@pytest.mark.parametrize(
    ("target_id", "status", "turns"),
    [
        ("late-caller", CaseStatus.FAILED, [False, False]),
        ("bh3-turns", CaseStatus.FAILED, [False, False]),
        ("on-time", CaseStatus.PASSED, [True, True]),
        ("bh3-turns-ok", CaseStatus.PASSED, [True, True]),
    ],
)
def test_bh43_a_call_in_the_wrong_turn_fails_both_turns(target_id: str, status: CaseStatus, turns: list) -> None:
    cases = load_cases(BH43).cases
    assert conversation_of(cases[0]) is not None
    spec = next(v for v in vars(_targets()).values() if getattr(v, "id", None) == target_id)
    (result,) = play(cases, spec.target, spec.scorers)
    assert result.status is status
    assert turn_verdicts(result) == turns
    verdict = result.scores[0]
    if status is CaseStatus.FAILED:
        assert verdict.explanation.startswith("turn 1 fails: expected call #1 'set_device' was not made")
        assert verdict.value == 0.0
    # the transcript is kept turn by turn
    assert [t["turn"] for t in result.run.metadata["turns"]] == [1, 2]
    assert len(result.run.output) == 2


def test_rescore_scores_the_stored_transcript_turn_by_turn() -> None:
    cases = load_cases(BH43).cases
    (result,) = play(cases, _targets().late_caller.target, ["tool_calls"])
    sink = Collect()
    asyncio.run(rescore([(cases[0], result.run)], ["tool_calls"], sink=sink))
    assert turn_verdicts(sink.results[0]) == [False, False]
