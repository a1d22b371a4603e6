"""Ragas, DeepEval and autoevals metrics as scorers, on the HotpotQA example, against a stand-in judge.

The libraries run for real, in the Python that ``EVALSITE_METRICS_PYTHON`` names (CI makes
``.venv-metrics`` with ``make metrics-venv``: Ragas and DeepEval pin ``openai`` < 3 and ``rich`` < 15,
below Evalsite's own environment), or in this one when it has them. Their judge is
:class:`tests.support.library_judge.LibraryJudge`, answering each library's prompts with the JSON
its parser expects; the tests needing a library skip, saying so, where it is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalcore.discovery import discover_targets
from evalcore.judge.cache import InMemoryJudgeCache
from evalcore.loaders import load_cases
from evalcore.runner import run_eval
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers.base import ScoreContext, Scorer, ScorerServices, ScorerSpecError
from evalcore.scorers.libraries import AutoevalsMetric
from evalcore.scorers.libraries.process import close_workers, library_python, worker_for
from evalcore.scorers.libraries.scorer import read_path
from evalcore.tracing import SPAN_BEGIN
from evalcore.types import Case, CaseStatus, RunRecord, Score
from tests.support.library_judge import LibraryJudge
from tests.support.stand_in_llm import StandInLLM, completion_body

ROOT = Path(__file__).resolve().parents[2]
HOTPOT_SET = ROOT / "examples" / "sets" / "hotpotqa_dev100.jsonl"
LIBRARIES = ("ragas", "deepeval", "autoevals")


def _metrics_python() -> str:
    """The Python with the libraries: $EVALSITE_METRICS_PYTHON, else ./.venv-metrics, else this one."""
    for candidate in (os.environ.get("EVALSITE_METRICS_PYTHON"), str(ROOT / ".venv-metrics" / "bin" / "python")):
        if candidate and Path(candidate).exists():
            return candidate
    return sys.executable


def _installed(python: str) -> set[str]:
    code = (
        "import importlib.util, json; "
        f"print(json.dumps([n for n in {list(LIBRARIES)!r} if importlib.util.find_spec(n)]))"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    return set(json.loads(out.stdout or "[]"))


PYTHON = _metrics_python()
INSTALLED = _installed(PYTHON)


def needs(*libraries: str) -> pytest.MarkDecorator:
    missing = [name for name in libraries if name not in INSTALLED]
    return pytest.mark.skipif(
        bool(missing),
        reason=f"{', '.join(missing)} not installed in {PYTHON} (make metrics-venv; EVALSITE_METRICS_PYTHON)",
    )


@pytest.fixture(autouse=True)
def metrics_python(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in LIBRARIES:
        monkeypatch.delenv(f"EVALSITE_{name.upper()}_PYTHON", raising=False)
    monkeypatch.setenv("EVALSITE_METRICS_PYTHON", PYTHON)
    yield


@pytest.fixture(scope="module", autouse=True)
def stop_workers() -> Iterator[None]:
    yield
    close_workers()


HOTPOT_SPECS = [
    {
        "name": "ragas",
        "args": {
            "metric": "faithfulness",
            "threshold": 0.7,
            "fields": {"question": "input.question", "answer": "output.answer", "contexts": "input.paragraphs[*].text"},
        },
    },
    {
        "name": "deepeval",
        "args": {
            "metric": "answer_relevancy",
            "threshold": 0.5,
            "fields": {"question": "input.question", "answer": "output.answer"},
        },
    },
    {
        "name": "autoevals",
        "args": {
            "metric": "Factuality",
            "threshold": 0.5,
            "fields": {"question": "input.question", "answer": "output.answer", "reference": "expected.answer"},
        },
    },
]
NAMES = ["ragas.faithfulness", "deepeval.answer_relevancy", "autoevals.Factuality"]


class Results:
    def __init__(self) -> None:
        self.results: list[Any] = []
        self.events: list[Any] = []

    def on_event(self, event: Any) -> None:
        self.events.append(event)

    def on_result(self, result: Any) -> None:
        self.results.append(result)

    def flush(self) -> None:
        pass


@needs(*LIBRARIES)
async def test_three_libraries_score_hotpotqa_and_a_judge_failure_is_an_error_not_a_zero() -> None:
    cases = list(load_cases(HOTPOT_SET).cases)[:10]
    failing = cases[3]
    judge = LibraryJudge(fail=(failing.input["question"],))
    target, _ = discover_targets(ROOT / "examples" / "agents").targets["hotpotqa-agent"].resolve("top4")
    cache = InMemoryJudgeCache()
    with StandInLLM(responder=judge) as llm:
        services = ScorerServices(judge=OpenAIChatModel("stand-in-model", base_url=llm.base_url), judge_cache=cache)
        sink = Results()
        report = await run_eval(cases, target, HOTPOT_SPECS, sink=sink, services=services, scorer_timeout_s=120)
        first_calls = len(llm.requests)

        by_case = {r.case.id: r for r in sink.results}
        for case in cases:
            scores = {s.name: s for s in by_case[case.id].scores}
            assert sorted(scores) == sorted(NAMES)
            if case.id == failing.id:
                for name in NAMES:
                    assert scores[name].value is None and scores[name].passed is None
                    assert scores[name].error
                assert "invalid JSON" in scores["deepeval.answer_relevancy"].error
                assert "No tool call" in scores["autoevals.Factuality"].error
                assert "InstructorRetryException" in scores["ragas.faithfulness"].error
                assert by_case[case.id].status is CaseStatus.ERRORED
            else:
                for name in NAMES:
                    assert scores[name].error is None, scores[name].error
                    assert scores[name].value == 1.0 and scores[name].passed is True
                    assert "blocked_connections" not in scores[name].metadata
                # every judge call counted, with the stand-in's usage (10 in, 5 out): ledger and cost read these
                calls = {name: scores[name].metadata["judge_calls"] for name in NAMES}
                assert calls == {"ragas.faithfulness": 2, "deepeval.answer_relevancy": 3, "autoevals.Factuality": 1}
                for name in NAMES:
                    meta = scores[name].metadata
                    assert (meta["judge_tokens_in"], meta["judge_tokens_out"]) == (10 * calls[name], 5 * calls[name])
                    assert meta["judge_model"] == "stand-in-model"
                assert scores["ragas.faithfulness"].explanation.endswith("the context says so (verdict 1)")
                assert scores["deepeval.answer_relevancy"].explanation == "the statement addresses the question"
                assert scores["autoevals.Factuality"].explanation.startswith("choice C")
                assert by_case[case.id].status is CaseStatus.PASSED
        assert (report.passed, report.errored, report.failed) == (9, 1, 0)
        metric = report.metrics["ragas.faithfulness"]
        assert (metric.n, metric.errors) == (9, 1)
        # each library sample is a judge span in the case's trace (kept out of the target's metrics)
        begins = {
            e.payload["span_id"]: e.payload["scorer"]
            for e in sink.events
            if e.type == SPAN_BEGIN and e.payload.get("role") == "judge"
        }
        ends = [(begins[e.payload["span_id"]], e.payload) for e in sink.events if e.payload.get("span_id") in begins]
        ends = [(scorer, p) for scorer, p in ends if p is not None and "calls" in p]
        assert sorted({scorer for scorer, _ in ends}) == sorted(NAMES) and len(ends) == 30
        assert sum(p["calls"] for scorer, p in ends if scorer == "deepeval.answer_relevancy") >= 27
        versions = {s.metadata["library"]: s.metadata["library_version"] for s in sink.results[0].scores}
        assert set(versions) == set(LIBRARIES)

        # the texts reached the libraries: the contexts are the case's paragraphs
        assert any(cases[0].input["paragraphs"][1]["text"][:60] in prompt for prompt in judge.prompts)

        # the judge cache: a second run asks the judge only for the case that failed; the worker
        # outlives the first run (no run's process scope owns it) and serves the second
        pid = worker_for(PYTHON).pid
        assert pid is not None
        await run_eval(cases, target, HOTPOT_SPECS, sink=Results(), services=services, scorer_timeout_s=120)
        again = llm.requests[first_calls:]
        assert again, "the failed case is asked again"
        assert all(failing.input["question"] in json.dumps(r.body) for r in again if "tools" in (r.body or {}))
        assert worker_for(PYTHON).pid == pid


def _ctx(output: Any = "Paris", expected: Any = "Paris", judge: Any = None, cache: Any = None) -> ScoreContext:
    case = Case(id="c1", input="What is the capital of France?", expected=expected)
    return ScoreContext(
        case=case,
        output=output,
        run=RunRecord(case_id="c1", run_id="r1", trace_id="t1", output=output),
        judge=judge,
        judge_cache=cache,
    )


async def _scores(scorer: Scorer, ctx: ScoreContext) -> list[Score]:
    got = await scorer.score(ctx)
    return got if isinstance(got, list) else [got]


@needs("autoevals")
async def test_samples_vote_and_flag_instability() -> None:
    answers = iter(["C", "D", "C"])

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        choice = next(answers)
        arguments = {"reasons": f"picked {choice}", "choice": choice}
        return completion_body(None, tool_calls=[{"name": "select_choice", "arguments": arguments}])

    with StandInLLM(responder=responder) as llm:
        scorer = AutoevalsMetric(metric="Factuality", threshold=0.5, samples=3)
        [score] = await scorer.score(_ctx(judge=OpenAIChatModel("judge-x", base_url=llm.base_url)))
    assert score.error is None
    assert (score.value, score.passed) == (1.0, True)  # median of 1, 0, 1; two of three pass
    assert score.metadata["unstable"] is True
    assert [s["value"] for s in score.metadata["samples"]] == [1.0, 0.0, 1.0]
    assert score.explanation == "choice C: picked C"
    assert [r.body["temperature"] for r in llm.requests] == [0.0, 0.0, 0.0]


@needs("autoevals")
async def test_judge_cache_answers_a_second_time_and_thresholds_apply_after_it() -> None:
    cache = InMemoryJudgeCache()
    judge = LibraryJudge(unsupported=("Lyon",))
    with StandInLLM(responder=judge) as llm:
        model = OpenAIChatModel("judge-x", base_url=llm.base_url)
        [first] = await AutoevalsMetric(metric="Factuality", threshold=0.5).score(
            _ctx("Lyon", judge=model, cache=cache)
        )
        [second] = await AutoevalsMetric(metric="Factuality", threshold=0.0).score(
            _ctx("Lyon", judge=model, cache=cache)
        )
    assert len(llm.requests) == 1
    assert (first.value, first.passed, first.metadata["judge_cache_hits"]) == (0.0, False, 0)
    assert (second.value, second.passed, second.metadata["judge_cache_hits"]) == (0.0, True, 1)


async def test_a_python_without_the_library_gives_an_error_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    bare = sys.executable if "ragas" not in _installed(sys.executable) else None
    if bare is None:
        pytest.skip("this Python has ragas: no Python without it to point at")
    monkeypatch.setenv("EVALSITE_RAGAS_PYTHON", bare)
    assert library_python("ragas") == bare
    scorer = scorer_from_spec({"name": "ragas", "args": {"metric": "faithfulness", "threshold": 0.5}})
    judge = OpenAIChatModel("judge-x", base_url="http://127.0.0.1:9/v1")
    [score] = await _scores(scorer, _ctx(judge=judge))
    assert score.value is None and score.metadata["kind"] == "not_installed"
    assert "pip install 'evalsite[ragas]'" in (score.error or "")


async def test_no_judge_and_a_missing_field_are_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EVALSITE_JUDGE_MODEL", "EVALSITE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    scorer = scorer_from_spec({"name": "deepeval", "args": {"metric": "answer_relevancy", "threshold": 0.5}})
    [score] = await _scores(scorer, _ctx())
    assert score.metadata["kind"] == "no_judge" and "--judge-base-url" in (score.error or "")
    scorer = scorer_from_spec(
        {"name": "ragas", "args": {"metric": "faithfulness", "fields": {"contexts": "input.docs"}}}
    )
    [score] = await _scores(scorer, _ctx())
    assert score.metadata["kind"] == "bad_field" and "input.docs" in (score.error or "")


def test_specs_are_checked_and_round_trip() -> None:
    scorer = scorer_from_spec('{"name": "ragas", "args": {"metric": "faithfulness", "threshold": 0.7}}')
    assert scorer.score_names == ["ragas.faithfulness"]
    spec = scorer.spec()
    assert (spec.name, spec.args["metric"], spec.args["threshold"]) == ("ragas", "faithfulness", 0.7)
    assert "_paths" not in spec.args
    assert scorer_from_spec({"name": spec.name, "args": spec.args, "version": spec.version}) == scorer
    for bad in (
        {"metric": "faithfulness", "threshold": 1.5},
        {"metric": ""},
        {"metric": "faithfulness", "samples": 0},
        {"metric": "faithfulness", "fields": {"context": "input"}},
        {"metric": "faithfulness", "options": ["x"]},
    ):
        with pytest.raises(ScorerSpecError):
            scorer_from_spec({"name": "autoevals", "args": bad})


def test_read_path_maps_lists_and_names_what_is_missing() -> None:
    root = {"input": {"question": "q", "paragraphs": [{"text": "a"}, {"text": "b"}]}}
    assert read_path(root, "input.question") == "q"
    assert read_path(root, "input.paragraphs[*].text") == ["a", "b"]
    assert read_path(root, "input.paragraphs[1].text") == "b"
    with pytest.raises(KeyError, match="no 'docs' at input"):
        read_path(root, "input.docs")
    with pytest.raises(KeyError, match="has no item 5"):
        read_path(root, "input.paragraphs[5]")


GUARD_PROBE = """
import importlib.util, json, socket, sys
spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
worker._allow("http://127.0.0.1:9/v1")
sys.addaudithook(worker._audit)
seen = {}
for name, call in [
    ("lookup", lambda: socket.getaddrinfo("telemetry.example.invalid", 443)),
    ("other_host", lambda: socket.create_connection(("127.0.0.2", 9), timeout=2)),
    ("judge_host", lambda: socket.create_connection(("127.0.0.1", 9), timeout=2)),
]:
    try:
        call()
        seen[name] = "connected"
    except Exception as exc:
        seen[name] = type(exc).__name__
print(json.dumps({"seen": seen, "drained": worker._drain()}))
"""


def test_the_worker_refuses_every_connection_but_the_judges() -> None:
    from evalcore.scorers.libraries.process import WORKER_SCRIPT

    out = subprocess.run(
        [sys.executable, "-c", GUARD_PROBE, str(WORKER_SCRIPT)], capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(out.stdout)
    # refused before any packet leaves: no lookup of another name, no connection to another host
    assert result["seen"]["lookup"] == "PermissionError"
    assert result["seen"]["other_host"] == "PermissionError"
    assert result["seen"]["judge_host"] == "ConnectionRefusedError"  # allowed: nothing listens on port 9
    connections, blocked = result["drained"]
    assert connections == [["127.0.0.1", 9]]
    assert blocked == [["telemetry.example.invalid", 443], ["127.0.0.2", 9]]


@needs("autoevals")
async def test_a_worker_that_dies_mid_case_is_an_error_and_the_next_case_gets_a_new_one() -> None:
    import asyncio
    import signal
    import threading

    release = threading.Event()
    judge = LibraryJudge()

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        release.wait(timeout=60)
        return judge(body)

    with StandInLLM(responder=responder) as llm:
        model = OpenAIChatModel("judge-x", base_url=llm.base_url)
        scorer = AutoevalsMetric(metric="Factuality", threshold=0.5)
        pending = asyncio.create_task(_scores(scorer, _ctx(judge=model)))
        async with asyncio.timeout(60):
            while not llm.requests:  # the library's judge call has arrived: the worker is mid-case
                await asyncio.sleep(0.01)
        worker = worker_for(PYTHON)
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
        [score] = await pending
        release.set()
        assert score.value is None and score.metadata["kind"] == "worker_error"
        assert "exited with status -9" in (score.error or "")
        [again] = await _scores(scorer, _ctx(judge=model))
    assert (again.error, again.value, again.passed) == (None, 1.0, True)
