"""The plan every executor runs (``apps.evals.runs.plan``): built from a stored run, the crash
culprits stored errored, the suspects first, then the rest at the run's concurrency."""

from __future__ import annotations

import asyncio
from typing import Any

from apps.evals.models import EvalRun
from apps.evals.runs.config import RunConfig
from apps.evals.runs.plan import PROCESS_ENDED, RunPlan
from evalcore.discovery import TargetSpec
from evalcore.types import Case, CaseResult


class Kept:
    """A sink keeping every result, in order."""

    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def on_event(self, event: Any) -> None:
        return None

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)

    def flush(self) -> None:
        return None


class Upper:
    """A target that upper-cases its input, noting the order of its calls and the most in flight."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.running = self.most = 0

    async def __call__(self, text: str) -> str:
        self.calls.append(text)
        self.running += 1
        self.most = max(self.most, self.running)
        for _ in range(3):  # let the other workers start theirs
            await asyncio.sleep(0)
        self.running -= 1
        return text.upper()


def plan_of(target: Upper, **config: Any) -> RunPlan:
    spec = TargetSpec(id="upper", target=target, scorers=["exact_match"])
    eval_run = EvalRun(
        id="r1",
        target_id="upper",
        scorer_specs=[{"name": "exact_match", "args": {}}],
        config=RunConfig.parse(config).stored(),
    )
    return RunPlan.of(eval_run, spec)


CASES = [Case(f"c{i}", f"q{i}", f"Q{i}") for i in range(6)]


def test_a_plan_runs_its_cases_at_the_runs_concurrency_with_its_scorers():
    target = Upper()
    plan = plan_of(target, concurrency=2)
    sink = Kept()
    report = asyncio.run(plan.run(CASES, sink=sink, done=set()))
    assert report.n == 6 and report.passed == 6
    assert target.most == 2
    assert {r.run.metadata["eval_run_id"] for r in sink.results} == {"r1"}


def test_the_cases_of_a_dead_process_come_first_and_a_culprit_is_not_run_again():
    target = Upper()
    plan = plan_of(target, concurrency=4)
    sink = Kept()
    done = {("c0", 0)}  # stored before the process died
    culprit, suspect = CASES[1], CASES[5]
    asyncio.run(plan.run(CASES, sink=sink, done=done, suspects=[(suspect, 0)], culprits=[(culprit, 0)]))
    assert target.calls[0] == "q5"  # the suspect ran first, alone
    assert sorted(target.calls) == ["q2", "q3", "q4", "q5"]  # neither the done case nor the culprit
    errored = sink.results[0]
    assert errored.case.id == "c1" and errored.run.error is not None
    assert errored.run.error.message.startswith(PROCESS_ENDED)
