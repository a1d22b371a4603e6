"""The judge reliability ledger (issue 28): every scorer / judge invocation is a row with its
reason, written with the results (a stand-in judge endpoint that fails 10% of calls)."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from apps.evals.models import EvalRun, ScorerInvocation
from apps.evals.results.ledger import (
    REASON_INVALID_JSON,
    REASON_NO_JUDGE,
    REASON_RATE_LIMITED,
    REASON_SCORER_TIMEOUT,
    REASON_TARGET_ERRORED,
    REASON_UNREACHABLE,
    Invocation,
    error_reason,
    invocations_from_result,
    record_invocations,
)
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord, Score
from tests.support.stand_in_llm import Scripted, StandInLLM, completion_body

GOOD = {
    axis: {"score": 4, "reason": "fine"}
    for axis in ("accuracy", "completeness", "grounding", "hazard_avoidance", "calibration")
}
N_CASES = 20


class FlakyJudge(StandInLLM):
    """A judge endpoint failing 10% of the cases' calls, by the answer it is asked about: Q03
    always gets HTTP 503 (unreachable), Q07 HTTP 429 (rate-limited); Q11 is answered in prose
    (invalid judge JSON). Every failure carries ``Retry-After: 0`` so retries take no time."""

    def _next_answer(self, body: Any) -> Scripted:
        prompt = json.dumps(body)
        if "Q03" in prompt:
            return Scripted(503, b'{"error": {"message": "down"}}', {"Retry-After": "0"})
        if "Q07" in prompt:
            return Scripted(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "0"})
        if "Q11" in prompt:
            return Scripted(200, json.dumps(completion_body("looks fine to me", usage=(30, 5))).encode())
        return Scripted(200, json.dumps(completion_body(json.dumps(GOOD), usage=(40, 20))).encode())


@pytest.fixture
def suite(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "a.py").write_text(
        textwrap.dedent(
            """
            from evalcore.discovery import TargetSpec
            def answer(q):
                return q.upper()
            spec = TargetSpec(id="upper", target=answer, scorers=["exact_match"])
            """
        )
    )
    rows = [{"id": f"c{i:02d}", "input": f"q{i:02d}", "expected": f"Q{i:02d}", "split": "dev"} for i in range(N_CASES)]
    path = tmp_path / "qs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder, path


def judge_args(llm: StandInLLM) -> list[str]:
    return ["--judge", "--judge-model", "stand-in-model", "--judge-base-url", llm.base_url, "--judge-retries", "0"]


@pytest.mark.django_db(transaction=True)
def test_every_invocation_is_a_row_with_its_reason(suite: tuple[Path, Path]) -> None:
    folder, path = suite
    with FlakyJudge() as llm:
        call_command("eval", str(folder), "--set", str(path), "--quiet", "--no-judge-cache", *judge_args(llm))
    eval_run = EvalRun.objects.get()
    rows = list(ScorerInvocation.objects.filter(eval_run=eval_run))
    assert Counter(r.scorer for r in rows) == {"exact_match": N_CASES, "rubric_judge": N_CASES}
    judged = {r.case_id: r for r in rows if r.scorer == "rubric_judge"}
    assert judged["c03"].status == "errored" and judged["c03"].reason.startswith(REASON_UNREACHABLE)
    assert judged["c07"].status == "errored" and judged["c07"].reason.startswith(REASON_RATE_LIMITED)
    assert judged["c11"].status == "errored" and judged["c11"].reason.startswith(REASON_INVALID_JSON)
    done = [r for r in judged.values() if r.status == "done"]
    assert len(done) == N_CASES - 3
    assert all(r.kind == "judge" and r.judge_model == "stand-in-model" for r in judged.values())
    assert all((r.tokens_in, r.tokens_out, r.calls) == (40, 20, 1) for r in done)
    assert all(r.latency_ms is not None and r.latency_ms >= 0 and r.finished is not None for r in done)
    assert all(r.status == "done" and r.kind == "scorer" for r in rows if r.scorer == "exact_match")


@pytest.mark.django_db
def test_record_invocations_online_rows_and_refusals() -> None:
    n = record_invocations(
        [
            Invocation(kind="judge", scorer="rubric_judge", status="queued", trace_id="t1"),
            Invocation(
                kind="judge", scorer="rubric_judge", status="skipped", reason="no judge configured", trace_id="t2"
            ),
        ]
    )
    assert n == 2
    queued = ScorerInvocation.objects.get(trace_id="t1")
    assert queued.finished is None and queued.eval_run_id is None
    assert ScorerInvocation.objects.get(trace_id="t2").finished is not None
    with pytest.raises(ValueError, match="needs a reason"):
        Invocation(kind="judge", scorer="rubric_judge", status="errored", trace_id="t3")
    with pytest.raises(ValueError, match="neither an eval run nor a trace"):
        Invocation(kind="scorer", scorer="exact_match", status="done")
    with pytest.raises(ValueError, match="status must be one of"):
        Invocation(kind="scorer", scorer="exact_match", status="pending", trace_id="t4")


def test_rows_a_case_implies_without_a_database() -> None:
    specs = [{"name": "exact_match", "args": {}}, {"name": "rubric_judge", "args": {"judge_model": "m"}}]
    case = Case(id="c1", input="q")
    errored = CaseResult(case=case, run=RunRecord("c1", "r:c1", "r:c1", error=ErrorInfo("Boom", "down")), scores=[])
    rows = invocations_from_result(errored, eval_run_id="r", specs=specs)
    assert [(r.scorer, r.status, r.reason, r.kind) for r in rows] == [
        ("exact_match", "skipped", REASON_TARGET_ERRORED, "scorer"),
        ("rubric_judge", "skipped", REASON_TARGET_ERRORED, "judge"),
    ]
    scored = CaseResult(
        case=case,
        run=RunRecord("c1", "r:c1", "r:c1", output="a"),
        scores=[
            Score("is_even", True),  # a predicate's score carries its function's name
            Score.failure("rubric_judge", "no judge model", kind="no_model"),
            Score.failure("rubric_judge.accuracy", "no judge model", kind="no_model"),
        ],
    )
    rows = invocations_from_result(scored, eval_run_id="r", specs=specs)
    assert [(r.scorer, r.status, r.reason) for r in rows] == [
        ("is_even", "done", ""),
        ("rubric_judge", "skipped", REASON_NO_JUDGE),
    ]
    timeout = Score.failure("x", "Timeout: scorer 'x' exceeded the 5 s scorer timeout")
    assert error_reason(timeout, judge=False) == ("errored", f"{REASON_SCORER_TIMEOUT}: {timeout.error}")
