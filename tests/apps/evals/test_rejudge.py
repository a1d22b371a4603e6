"""``evalsite rejudge``: re-ask only the unstable / errored cases (a stand-in judge endpoint counts
exactly which cases were asked), or judge a stored run with another judge spec; the flakiness report."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from apps.evals.cli.console import UsageError
from apps.evals.models import EvalResult, EvalRun, EvalSet, ScorerInvocation
from apps.evals.queries.flakiness import flakiness
from apps.evals.results.ledger import REASON_REUSED
from tests.support.stand_in_llm import Scripted, StandInLLM, completion_body

pytestmark = pytest.mark.django_db(transaction=True)

OTHER = {
    axis: {"score": 4, "reason": "fine"} for axis in ("completeness", "grounding", "hazard_avoidance", "calibration")
}
N_CASES = 12
WOBBLY = ("Q02", "Q05")  # the judge's accuracy on these depends on the sample's seed
DOWN = "Q09"  # the judge endpoint fails on this one while `down` is set


class SeedJudge(StandInLLM):
    """Grades 5/5 except: the WOBBLY answers get accuracy 1 on odd seeds (samples disagree), and
    DOWN gets HTTP 503 while :attr:`down`. Records which answers it was asked about."""

    down = True

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def _next_answer(self, body: Any) -> Scripted:
        prompt = json.dumps(body)
        answer = next((f"Q{i:02d}" for i in range(N_CASES) if f"Q{i:02d}" in prompt), "?")
        self.asked.append(answer)
        if answer == DOWN and self.down:
            return Scripted(503, b'{"error": {"message": "down"}}', {"Retry-After": "0"})
        accuracy = 1 if answer in WOBBLY and (body.get("seed") or 0) % 2 else 5
        content = json.dumps({"accuracy": {"score": accuracy, "reason": "checked"}, **OTHER})
        return Scripted(200, json.dumps(completion_body(content, usage=(40, 20))).encode())


@pytest.fixture
def judged_run(tmp_path: Path, settings: Any) -> Iterator[tuple[EvalRun, SeedJudge]]:
    settings.DATA_DIR = tmp_path
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
    llm = SeedJudge()
    llm.start()
    call_command(
        "eval", str(folder), "--set", str(path), "--quiet", "--judge", "--judge-model", "stand-in-model",
        "--judge-base-url", llm.base_url, "--judge-retries", "0", "--judge-samples", "3",
    )  # fmt: skip
    yield EvalRun.objects.get(), llm
    llm.stop()


def rejudge(llm: StandInLLM, run: EvalRun, *args: str) -> EvalRun:
    before = set(EvalRun.objects.values_list("pk", flat=True))
    call_command("rejudge", run.pk, "--judge-base-url", llm.base_url, *args)
    return EvalRun.objects.exclude(pk__in=before).get()


def verdicts(run: EvalRun) -> dict[str, Any]:
    return {
        r.case_id: next(s for s in r.scores if s["name"] == "rubric_judge")
        for r in EvalResult.objects.filter(eval_run=run)
    }


def test_rejudge_only_unstable_re_asks_exactly_those(judged_run: tuple[EvalRun, SeedJudge]) -> None:
    source, llm = judged_run
    report = flakiness(EvalSet.objects.get())
    verdict_rate = next(r for r in report.rates if r.score == "rubric_judge")
    assert (verdict_rate.flaky, verdict_rate.n) == (2, N_CASES - 1)  # the errored case has no reading
    assert verdict_rate.by_source == {"samples": 2}
    assert [c.case_id for c in report.flaky_cases] == ["c02", "c05"]
    llm.asked.clear()
    new = rejudge(llm, source, "--only", "unstable")
    assert sorted(llm.asked) == ["Q02"] * 3 + ["Q05"] * 3  # three samples each, nothing else
    assert new.source_eval_run_id == source.pk and new.n_done == N_CASES
    ledger = {r.case_id: r for r in ScorerInvocation.objects.filter(eval_run=new, scorer="rubric_judge")}
    assert {c for c, r in ledger.items() if r.status != "skipped"} == {"c02", "c05"}
    assert all(r.reason == REASON_REUSED for c, r in ledger.items() if c not in ("c02", "c05", "c09"))
    # the copied verdicts are the source's, the errored case keeps its error (not re-asked)
    old, now = verdicts(source), verdicts(new)
    assert now["c00"]["passed"] is True and now["c00"]["metadata"]["reused_from"] == source.pk
    assert now["c09"]["error"] and old["c09"]["error"]


def test_rejudge_only_errored_then_with_another_spec(judged_run: tuple[EvalRun, SeedJudge], tmp_path: Path) -> None:
    source, llm = judged_run
    llm.down = False
    llm.asked.clear()
    fixed = rejudge(llm, source, "--only", "errored")
    assert llm.asked == [DOWN] * 3
    assert verdicts(fixed)["c09"]["passed"] is True
    spec = dict(next(s for s in source.scorer_specs if s["name"] == "rubric_judge"))
    spec["args"] = {**spec["args"], "samples": 1, "rubric": "Be strict about capital letters."}
    path = tmp_path / "strict.json"
    path.write_text(json.dumps(spec))
    llm.asked.clear()
    other = rejudge(llm, source, "--judge", str(path), "--no-judge-cache")
    assert sorted(llm.asked) == sorted(f"Q{i:02d}" for i in range(N_CASES))
    assert other.scorer_specs[-1]["args"]["rubric"] == "Be strict about capital letters."
    with pytest.raises(UsageError, match="not both"):
        call_command("rejudge", source.pk, "--only", "errored", "--judge", str(path))
    with pytest.raises(UsageError, match="nothing to re-ask"):
        call_command("rejudge", source.pk)
    with pytest.raises(UsageError, match="no judge spec of that name"):
        call_command("rejudge", source.pk, "--judge", "strict@v3")
    EvalRun.objects.filter(pk=source.pk).update(status="running")
    with pytest.raises(UsageError, match="is running"):
        call_command("rejudge", source.pk, "--judge", str(path))
