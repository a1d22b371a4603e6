"""ADK's metrics (tool_trajectory_avg_score, response_match_score) against ADK's own evaluators,
and ADK's test_config.json read beside an eval file as the cases' verdicts.

The oracle is google-adk itself (tests/fixtures/adk_oracle/metrics_oracle.py), run on the same
invocations as ours. google-adk pins opentelemetry-sdk <= 1.44 while Evalsite needs >= 1.45, so
it lives in a Python of its own: ``EVALSITE_ADK_PYTHON=/path/to/python`` runs the live
comparison; without it the figures ADK 2.13.0 gave (recorded by that script into
bh-25-adk-metrics.json) are compared.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalcore.conversations import Session
from evalcore.loaders import load_cases
from evalcore.loaders.errors import CaseBankError
from evalcore.runner import run_eval
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers.adk_metrics import ResponseMatchScore, ToolTrajectoryAvgScore, rouge1_fmeasure, trajectory_matches
from evalcore.scorers.conversation import conversation_view
from evalcore.scoring import score_run
from evalcore.store import NullSink
from evalcore.types import Case, CaseResult, CaseStatus, RunRecord, Score

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ADK = FIXTURES / "adk"
ORACLE = FIXTURES / "adk_oracle"
RECORDED = ORACLE / "bh-25-adk-metrics.json"

SETS: dict[str, tuple[Path, bool]] = {
    # name: (file, whether ADK reads the expected invocations from the file itself)
    "multi_turn": (ADK / "adk-python__home_automation_agent__simple_multi_turn_conversation.test.json", False),
    "dependent": (ADK / "adk-python__home_automation_agent__dependent_tool_calls.test.json", False),
    "order_query": (ADK / "adk-python__ecommerce_customer_service_agent__order_query.test.json", False),
    "roll_die": (ADK / "adk-python__hello_world_agent__roll_die.test.json", False),
    "events": (ADK / "simple_test2_events.evalset.json", False),  # camelCase: ADK 2.13 reads snake_case only
    "bh43": (FIXTURES / "repros" / "bh-43-turns.evalset.json", True),
}

METRICS: dict[str, dict[str, Any]] = {
    "tool_trajectory_avg_score": {"name": "tool_trajectory_avg_score", "args": {}},
    "tool_trajectory_avg_score:IN_ORDER": {"name": "tool_trajectory_avg_score", "args": {"match_type": "IN_ORDER"}},
    "tool_trajectory_avg_score:ANY_ORDER": {"name": "tool_trajectory_avg_score", "args": {"match_type": "any-order"}},
    "tool_trajectory_avg_score:ignore_args": {"name": "tool_trajectory_avg_score", "args": {"ignore_args": True}},
    "response_match_score": {"name": "response_match_score", "args": {}},
}


def _expected_invocations(case: Case) -> list[dict[str, Any]]:
    view = conversation_view(_ctx(case, None))
    return [
        {"user": turn.user, "final_response": turn.final_response, "tool_calls": turn.tool_calls or []}
        for turn in view.conversation.turns
    ]


def _variants(expected: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Actual invocations: exact, partial matches, extra and reordered calls, other scripts, silence."""
    exact = [{"final_response": e["final_response"] or "", "tool_calls": e["tool_calls"]} for e in expected]
    partial = json.loads(json.dumps(exact))
    last = partial[-1]
    last["final_response"] = "Okay, the devices were changed as you asked: " + (last["final_response"] or "done")[:40]
    if last["tool_calls"]:
        last["tool_calls"][0]["arguments"] = {**last["tool_calls"][0]["arguments"], "extra": 1}
    shuffled = []
    for e in expected:
        calls = [*reversed(e["tool_calls"]), {"name": "lookup", "arguments": {"q": e["user"][:10]}}]
        words = (e["final_response"] or "nothing to say").split()
        shuffled.append({"final_response": " ".join(reversed(words)).upper(), "tool_calls": calls})
    scripts = [
        {"final_response": "设备 已经 关闭 了 — ไฟดับแล้ว, café naïve 2 devices", "tool_calls": e["tool_calls"][:1]}
        for e in expected
    ]
    silent = [{"final_response": "", "tool_calls": []} for _ in expected]
    return {"exact": exact, "partial": partial, "shuffled": shuffled, "scripts": scripts, "silent": silent}


def _invocations() -> dict[str, dict[str, Any]]:
    """Every (set, variant): the same invocations given to ADK and to us."""
    given: dict[str, dict[str, Any]] = {}
    for set_name, (path, native) in SETS.items():
        (case,) = load_cases(path).cases
        expected = _expected_invocations(case)
        for variant, answers in _variants(expected).items():
            actual = [{"user": e["user"], **a} for e, a in zip(expected, answers, strict=True)]
            given[f"{set_name}/{variant}"] = {
                "evalset": str(path) if native else None,
                "expected": expected,
                "actual": actual,
            }
    return given


def _ctx(case: Case, output: Any, metadata: dict[str, Any] | None = None) -> Any:
    from evalcore.scorers.base import ScoreContext

    run = RunRecord(case_id=case.id, run_id="r", trace_id="t", output=output, metadata=metadata or {})
    return ScoreContext(case=case, output=output, run=run)


def _ours(given: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    cases = {name: load_cases(path).cases[0] for name, (path, _) in SETS.items()}
    out: dict[str, dict[str, Any]] = {}
    for key, item in given.items():
        case = cases[key.split("/")[0]]
        answers = [{"final_response": a["final_response"], "tool_calls": a["tool_calls"]} for a in item["actual"]]
        if isinstance(case.input, str):  # a one-turn ADK case: the answer's text and its calls
            run = RunRecord(
                case_id=case.id,
                run_id="r",
                trace_id="t",
                output=answers[0]["final_response"],
                metadata={"tool_calls": answers[0]["tool_calls"]},
            )
        else:
            run = RunRecord(case_id=case.id, run_id="r", trace_id="t", output=answers)
        out[key] = {}
        for label, spec in METRICS.items():
            (score,) = asyncio.run(score_run(case, run, [scorer_from_spec(spec)]))
            assert score.error is None, score.error
            out[key][label] = {"per_invocation": score.metadata["invocations"], "overall": score.value}
    return out


def _assert_close(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours.keys() == theirs.keys()
    for key in ours:
        for metric, figures in ours[key].items():
            adk = theirs[key][metric]
            assert len(figures["per_invocation"]) == len(adk["per_invocation"]), (key, metric)
            for a, b in zip(figures["per_invocation"], adk["per_invocation"], strict=True):
                assert a == pytest.approx(b, abs=1e-9), (key, metric, figures, adk)
            assert figures["overall"] == pytest.approx(adk["overall"], abs=1e-9), (key, metric)


def test_our_adk_metrics_equal_the_figures_adk_gave_on_the_same_invocations() -> None:
    """Recorded from google-adk 2.13.0 (metrics_oracle.py); includes partial matches (0 < value < 1)."""
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    ours = _ours(_invocations())
    _assert_close(ours, recorded)
    partial = [ours[k]["response_match_score"]["overall"] for k in ours if k.endswith("/partial")]
    assert any(0 < value < 1 for value in partial)
    assert any(0 < ours[k]["tool_trajectory_avg_score"]["overall"] < 1 for k in ours)


@pytest.mark.skipif(not os.environ.get("EVALSITE_ADK_PYTHON"), reason="EVALSITE_ADK_PYTHON: a Python with google-adk")
def test_our_adk_metrics_equal_adks_own_evaluators_live(tmp_path: Path) -> None:
    """The same comparison against ADK's evaluators themselves, run in the Python EVALSITE_ADK_PYTHON names."""
    given = _invocations()
    path = tmp_path / "invocations.json"
    path.write_text(json.dumps(given, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run(
        [os.environ["EVALSITE_ADK_PYTHON"], str(ORACLE / "metrics_oracle.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    theirs = json.loads(done.stdout)
    _assert_close(_ours(given), theirs)
    if os.environ.get("EVALSITE_ADK_RECORD"):  # refresh the recorded figures from ADK itself
        RECORDED.write_text(json.dumps({k: theirs[k] for k in sorted(theirs)}, indent=1, sort_keys=True) + "\n")


def test_rouge_and_trajectory_rules_on_small_examples() -> None:
    # by hand, with Porter stemming: reference "the weather is sunni today" (5 tokens), candidate
    # "today weather wa sunni" (4): 3 in common, precision 3/4, recall 3/5
    assert rouge1_fmeasure("today weather was sunny", "The weather is sunny today") == pytest.approx(
        2 * 0.75 * 0.6 / 1.35
    )
    assert rouge1_fmeasure("", "") == 0.0
    calls = [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]
    assert trajectory_matches(calls, calls, "EXACT", False)
    assert not trajectory_matches(list(reversed(calls)), calls, "EXACT", False)
    assert trajectory_matches(list(reversed(calls)), calls, "ANY_ORDER", False)
    assert not trajectory_matches(list(reversed(calls)), calls, "IN_ORDER", False)
    assert trajectory_matches([calls[0], {"name": "z"}, calls[1]], calls, "IN_ORDER", False)
    assert trajectory_matches([], [], "IN_ORDER", False) and trajectory_matches([{"name": "q"}], [], "ANY_ORDER", False)
    assert trajectory_matches([{"name": "a", "arguments": {"x": 2}}, calls[1]], calls, "EXACT", True)
    with pytest.raises(ValueError, match="match_type must be one of"):
        ToolTrajectoryAvgScore(match_type="FUZZY")
    with pytest.raises(ValueError, match="finite"):
        ResponseMatchScore(threshold=float("nan"))


def test_a_case_stating_nothing_a_metric_reads_gets_no_score_from_it() -> None:
    case = Case("c", {"turns": ["hi", "bye"]}, [{"rubric": "be nice"}, {"rubric": "be brief"}])
    run = RunRecord(case_id="c", run_id="r", trace_id="t", output=[{"final_response": "x", "tool_calls": []}] * 2)
    scores = asyncio.run(score_run(case, run, [ToolTrajectoryAvgScore(), ResponseMatchScore()]))
    assert scores == []


# --- test_config.json beside the eval file ---------------------------------------------------


class Collect(NullSink):
    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)


def _beside(tmp_path: Path, config: Any, source: Path = SETS["multi_turn"][0]) -> Path:
    eval_file = tmp_path / "home.test.json"
    shutil.copyfile(source, eval_file)
    (tmp_path / "test_config.json").write_text(json.dumps(config), encoding="utf-8")
    return eval_file


def _play(case: Case, answers: list[dict[str, Any]]) -> CaseResult:
    from evalcore.scorer_registry import CaseScorers

    def agent(message: str, session: Session) -> dict[str, Any]:
        return answers[session.turn]

    sink = Collect()
    asyncio.run(run_eval([case], agent, [CaseScorers()], sink=sink))
    (result,) = sink.results
    return result


def test_test_config_thresholds_become_the_cases_verdicts(tmp_path: Path) -> None:
    eval_file = _beside(tmp_path, {"criteria": {"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8}})
    (case,) = load_cases(eval_file).cases
    assert case.metadata["scorers"] == [
        {"name": "tool_trajectory_avg_score", "args": {"threshold": 1.0}},
        {"name": "response_match_score", "args": {"threshold": 0.8}},
    ]
    assert case.metadata["adk_criteria"] == {"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8}
    expected = _expected_invocations(case)
    exact = [{"final_response": e["final_response"], "tool_calls": e["tool_calls"]} for e in expected]
    result = _play(case, exact)
    by_name = {s.name: s for s in result.scores}
    assert result.status is CaseStatus.PASSED
    assert by_name["case.tool_trajectory_avg_score"].value == 1.0
    assert by_name["case.response_match_score"].value == pytest.approx(1.0)
    # the second invocation's arguments wrong: trajectory 0.5 < 1.0 fails the case
    wrong = json.loads(json.dumps(exact))
    wrong[1]["tool_calls"][0]["arguments"]["status"] = "OFF"
    result = _play(case, wrong)
    by_name = {s.name: s for s in result.scores}
    assert by_name["case.tool_trajectory_avg_score"].value == 0.5
    assert by_name["case.tool_trajectory_avg_score"].passed is False
    assert by_name["case.tool_trajectory_avg_score"].metadata["invocations"] == [1.0, 0.0]
    assert result.status is CaseStatus.FAILED


def test_the_newer_criterion_objects_and_judged_metrics_are_read(tmp_path: Path) -> None:
    config = {
        "criteria": {
            "tool_trajectory_avg_score": {"threshold": 0.5, "matchType": "in_order", "ignore_args": True},
            "responseMatchScore": {"threshold": 0.4},
            "rubric_based_final_response_quality_v1": {
                "threshold": 0.8,
                "judge_model_options": {"judge_model": "gemini-2.5-flash", "num_samples": 3},
                "rubrics": [{"rubric_id": "r1", "rubric_content": {"text_property": "The answer names the device."}}],
            },
            "multi_turn_task_success_v1": {"threshold": 1.0},
            "hallucinations_v1": {"threshold": 0.8},
        }
    }
    (case,) = load_cases(_beside(tmp_path, config)).cases
    specs = case.metadata["scorers"]
    assert specs[0] == {
        "name": "tool_trajectory_avg_score",
        "args": {"threshold": 0.5, "match_type": "IN_ORDER", "ignore_args": True},
    }
    assert specs[1] == {"name": "rubric_judge", "args": {"rubric": "- The answer names the device.", "samples": 3}}
    assert specs[2] == {"name": "goal_completion", "args": {}}
    assert len(specs) == 3  # responseMatchScore is not ADK's spelling of a metric name: unmapped
    assert case.metadata["unscored_assertions"] == ["responseMatchScore", "hallucinations_v1"]
    for spec in specs:
        scorer_from_spec(spec)  # every spec builds


@pytest.mark.parametrize(
    ("config", "field", "message"),
    [
        ({"criteria": {"tool_trajectory_avg_score": "high"}}, "criteria.tool_trajectory_avg_score", "finite number"),
        ({"criteria": {"response_match_score": 1.5}}, "criteria.response_match_score", "from 0 to 1"),
        (
            {"criteria": {"tool_trajectory_avg_score": {"threshold": -0.1}}},
            "criteria.tool_trajectory_avg_score.threshold",
            "from 0 to 1",
        ),
        (
            {"criteria": {"tool_trajectory_avg_score": {"threshold": 1, "match_type": "FUZZY"}}},
            "criteria.tool_trajectory_avg_score.match_type",
            "match_type must be one of",
        ),
        ({"criteria": {"response_match_score": {}}}, "criteria.response_match_score", "needs a 'threshold'"),
        (
            {"criteria": {"rubric_based_final_response_quality_v1": {"threshold": 1, "rubrics": [{"rubric_id": "x"}]}}},
            "criteria.rubric_based_final_response_quality_v1.rubrics[0]",
            "needs its text",
        ),
        ({"thresholds": {}}, None, '"criteria"'),
    ],
)
def test_a_bad_test_config_names_the_file_and_field(
    tmp_path: Path, config: Any, field: str | None, message: str
) -> None:
    with pytest.raises(CaseBankError, match=message) as info:
        load_cases(_beside(tmp_path, config))
    assert info.value.path.endswith("test_config.json")
    assert info.value.field == field


def test_response_match_without_rouge_score_is_an_error_not_a_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalcore.scorers import adk_metrics

    monkeypatch.setattr(adk_metrics, "_SCORER", None)
    monkeypatch.setitem(sys.modules, "rouge_score", None)  # as if not installed
    case = Case("c", "hi", {"final_response": "hello", "tool_calls": []})
    run = RunRecord(case_id="c", run_id="r", trace_id="t", output="hello")
    (score,) = asyncio.run(score_run(case, run, [ResponseMatchScore()]))
    assert isinstance(score, Score) and score.value is None
    assert score.error is not None and "pip install 'evalsite[adk]'" in score.error


EVALSITE = [sys.executable, "-m", "evalsite.cli"]
AGENT = """
from evalcore.discovery import target

ANSWERS = {answers!r}


@target(id="home", scorers=[])
def home(message, session):
    return ANSWERS[session.turn]
"""


def test_evalsite_eval_gives_the_test_config_verdicts(tmp_path: Path) -> None:
    """Through the CLI: import with the criteria beside the file, run, report ADK's figures as verdicts."""
    eval_file = _beside(tmp_path, {"criteria": {"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8}})
    (case,) = load_cases(eval_file).cases
    answers = [
        {"final_response": e["final_response"], "tool_calls": e["tool_calls"]} for e in _expected_invocations(case)
    ]
    answers[1]["final_response"] = "Device 2 is now on."
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "home.py").write_text(AGENT.format(answers=answers), encoding="utf-8")
    report = tmp_path / "report.json"
    options = ["--db", str(tmp_path / "db.sqlite3"), "--json", str(report), "--quiet"]
    env = {**os.environ, "EVALSITE_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run(
        [*EVALSITE, "eval", "agents", "--target", "home", "--set", eval_file.name, "--split", "train", *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    (result,) = json.loads(report.read_text())["cases"]
    scores = {s["name"]: s for s in result["scores"]}
    assert scores["case.tool_trajectory_avg_score"]["passed"] is True
    assert scores["case.response_match_score"]["metadata"]["invocations"][0] == 1.0
    assert scores["case.response_match_score"]["value"] == pytest.approx(
        (1.0 + rouge1_fmeasure("Device 2 is now on.", "I have set the device 2 status to on.")) / 2
    )
    assert scores["case.response_match_score"]["passed"] is False
    assert result["status"] == "failed"
