"""The example suites run for real: example sets -> discovered targets -> run_eval -> report.

GSM8K replay must reproduce OpenAI's recorded ``is_correct`` labels exactly, case by case; the
HotpotQA pipeline must keep its retrieval and answer figures (see examples/README.md).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from evalcore.discovery import Discovery, TargetSpec, discover_targets
from evalcore.runner import run_eval
from evalcore.tracing import TraceEvent
from evalcore.types import Case, CaseResult
from tests.support.realdata import REALDATA

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
AGENTS = EXAMPLES / "agents"
GSM8K_SET = EXAMPLES / "sets" / "gsm8k_test.jsonl"
HOTPOT_SET = EXAMPLES / "sets" / "hotpotqa_dev100.jsonl"

# OpenAI's is_correct counts in example_model_solutions.jsonl (of 1,319).
GSM8K_RECORDED = {"6b_finetuning": 286, "6b_verification": 515, "175b_finetuning": 458, "175b_verification": 742}


def load_set(path: Path) -> list[Case]:
    """The example set through the engine's loader (or a plain JSONL read while it is not there)."""
    try:
        from evalcore.loaders import load_cases
    except ImportError:
        load_cases = None
    if load_cases is not None:
        return list(load_cases(path).cases)
    cases = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            cases.append(Case(**record))
    return cases


class CollectingSink:
    """A real sink that keeps every case result (for per-case assertions)."""

    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def on_event(self, event: TraceEvent) -> None:
        pass

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)

    def flush(self) -> None:
        pass


def load_module(path: Path) -> ModuleType:
    """Import an examples file by path (registered in sys.modules, as dataclasses need)."""
    name = f"examples_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def discovery() -> Discovery:
    return discover_targets(AGENTS)


@pytest.fixture(scope="module")
def gsm8k_cases() -> list[Case]:
    return load_set(GSM8K_SET)


@pytest.fixture(scope="module")
def hotpot_cases() -> list[Case]:
    return load_set(HOTPOT_SET)


@pytest.fixture(scope="module")
def hotpotqa() -> ModuleType:
    return load_module(AGENTS / "hotpotqa.py")


def test_discovery_declares_the_example_targets(discovery: Discovery) -> None:
    assert discovery.problems == []
    assert {"gsm8k-replay", "hotpotqa-retrieve", "hotpotqa-agent"} <= set(discovery.targets)
    assert list(discovery.targets["gsm8k-replay"].variants) == list(GSM8K_RECORDED)
    for target_id in ("hotpotqa-retrieve", "hotpotqa-agent"):
        assert list(discovery.targets[target_id].variants) == ["top2", "top4"]
    assert discovery.targets["hotpotqa-retrieve"].kind == "node"
    assert discovery.targets["hotpotqa-agent"].kind == "pipeline"
    for spec in discovery.targets.values():
        assert spec.default_set is not None and (AGENTS / spec.default_set).resolve().is_file()


def test_gsm8k_set_holds_every_test_question_with_its_labels(gsm8k_cases: list[Case]) -> None:
    assert len(gsm8k_cases) == 1319
    assert len({c.id for c in gsm8k_cases}) == 1319
    assert gsm8k_cases[0].id == "gsm8k-test-0001" and gsm8k_cases[-1].id == "gsm8k-test-1319"
    for case in gsm8k_cases:
        # expected is the reference answer's final number, commas dropped ("#### 2,125" -> "2125").
        assert case.expected == case.metadata["answer"].rpartition("####")[2].strip().replace(",", "")
    totals = {model: sum(c.metadata["labels"][model] for c in gsm8k_cases) for model in GSM8K_RECORDED}
    assert totals == GSM8K_RECORDED


@pytest.mark.parametrize(("variant", "recorded"), list(GSM8K_RECORDED.items()))
async def test_gsm8k_replay_reproduces_the_recorded_labels(
    discovery: Discovery, gsm8k_cases: list[Case], variant: str, recorded: int
) -> None:
    spec = discovery.targets["gsm8k-replay"]
    target, label = spec.resolve(variant)
    sink = CollectingSink()
    report = await run_eval(gsm8k_cases, target, spec.scorers, sink=sink, variant=label, concurrency=16)
    assert (report.n, report.passed, report.errored) == (1319, recorded, 0)
    # Case by case, not only in total: our verdict is OpenAI's label.
    assert all(r.passed == r.case.metadata["labels"][variant] for r in sink.results)
    assert {r.run.model for r in sink.results} == {variant}


async def test_gsm8k_replay_reports_an_unknown_question_as_an_error(discovery: Discovery) -> None:
    spec = discovery.targets["gsm8k-replay"]
    target, _ = spec.resolve("6b_finetuning")
    report = await run_eval([Case("new", "What is 2 + 2?", "4")], target, spec.scorers)
    assert (report.errored, report.target_errors) == (1, 1)


def test_hotpot_set_cases_carry_paragraphs_and_gold_titles(hotpot_cases: list[Case]) -> None:
    assert len(hotpot_cases) == 100
    assert [c.id for c in hotpot_cases[:2]] == ["hotpot-dev-001", "hotpot-dev-002"]
    for case in hotpot_cases:
        titles = [p["title"] for p in case.input["paragraphs"]]
        assert set(case.expected["supporting_titles"]) <= set(titles)
        assert len(case.expected["supporting_titles"]) == 2
        assert case.tags[0] in ("bridge", "comparison")
    assert hotpot_cases[0].expected == {"answer": "yes", "supporting_titles": ["Scott Derrickson", "Ed Wood"]}
    assert hotpot_cases[0].input["paragraphs"][1]["text"].startswith("Scott Derrickson (born July 16, 1966) is")


async def _run_variants(spec: TargetSpec, cases: list[Case]) -> dict[str, object]:
    reports = {}
    for variant in spec.variants:
        target, label = spec.resolve(variant)
        reports[variant] = await run_eval(cases, target, spec.scorers, variant=label)
    return reports


async def test_hotpot_retrieve_trades_precision_for_recall(discovery: Discovery, hotpot_cases: list[Case]) -> None:
    reports = await _run_variants(discovery.targets["hotpotqa-retrieve"], hotpot_cases)
    figures = {
        v: (r.metric_mean("citation_set.precision"), r.metric_mean("citation_set.recall"), r.errored)
        for v, r in reports.items()
    }
    assert figures["top2"] == pytest.approx((0.655, 0.655, 0))
    assert figures["top4"] == pytest.approx((0.4175, 0.825, 0))
    # citation_set passes when both gold pages are cited (recall 1 of 2, precision >= 0.4).
    assert (reports["top2"].passed, reports["top4"].passed) == (39, 66)


async def test_hotpot_agent_answers_end_to_end(discovery: Discovery, hotpot_cases: list[Case]) -> None:
    spec = discovery.targets["hotpotqa-agent"]
    reports = await _run_variants(spec, hotpot_cases)
    figures = {v: (r.metric_mean("answer_em"), r.metric_mean("answer_f1"), r.errored) for v, r in reports.items()}
    assert figures["top2"] == pytest.approx((0.17, 0.249, 0), abs=0.0005)
    assert figures["top4"] == pytest.approx((0.22, 0.312, 0), abs=0.0005)
    assert reports["top2"].passed == 17  # answer_em is the verdict; answer_f1 only measures

    target, _ = spec.resolve("top4")
    sink = CollectingSink()
    await run_eval(hotpot_cases[:1], target, spec.scorers, sink=sink)
    run = sink.results[0].run
    assert run.output["answer"] == "yes"
    assert len(run.output["citations"]) == 4
    assert run.metadata["steps"] == ["retrieve", "answer"]


def test_retriever_ranks_by_bm25_and_keeps_k(hotpotqa: ModuleType) -> None:
    paragraphs = [
        {"title": "Tea", "text": "Tea is a drink."},
        {"title": "Ed Wood", "text": "Ed Wood was an American filmmaker."},
        {"title": "Coffee", "text": "Coffee is a drink too."},
    ]
    out = hotpotqa.Bm25Retriever(2).run({"question": "Who was Ed Wood?", "paragraphs": paragraphs})
    assert out["citations"][0] == "Ed Wood"
    assert len(out["paragraphs"]) == 2 and out["question"] == "Who was Ed Wood?"
    assert hotpotqa.tokenize("The Ed Wood's 1994 film!") == ["ed", "wood", "s", "1994", "film"]
    with pytest.raises(ValueError):
        hotpotqa.Bm25Retriever(0)


def test_answer_rules(hotpotqa: ModuleType) -> None:
    answer = hotpotqa.ExtractiveAnswerer()
    older = answer.run(
        {
            "question": "Who is older, Ann Lee or Bo Smith?",
            "paragraphs": [
                {"title": "Ann Lee", "text": "Ann Lee (born 1970) is a model."},
                {"title": "Bo Smith (photographer)", "text": "Bo Smith (born 1965) is a photographer."},
            ],
        }
    )
    assert (older["answer"], older["rule"]) == ("Bo Smith", "choice")
    both = answer.run(
        {
            "question": "Are Verdi and Thomas both opera composers?",
            "paragraphs": [
                {"title": "Verdi", "text": "Verdi was an Italian opera composer."},
                {"title": "Thomas", "text": "Thomas was a French composer of operas."},
            ],
        }
    )
    assert (both["answer"], both["rule"]) == ("yes", "yes_no")
    year = answer.run(
        {
            "question": "In what year was the university founded?",
            "paragraphs": [{"title": "VCU", "text": "The university was founded in 1838 in Richmond."}],
        }
    )
    assert year["answer"] == "1838"


def test_answer_metrics_follow_the_official_hotpotqa_script(hotpotqa: ModuleType) -> None:
    assert hotpotqa.normalize_answer("The  Kansas Song!") == "kansas song"
    assert hotpotqa.answer_f1("yes", "no") == 0.0
    assert hotpotqa.answer_f1("no answer here", "no") == 0.0
    assert hotpotqa.answer_f1("yes", "Yes.") == 1.0
    assert hotpotqa.answer_f1("Virginia Woolf", "Adeline Virginia Woolf") == pytest.approx(0.8)
    assert hotpotqa.answer_f1("", "Rome") == 0.0


def test_examples_run_from_a_copy_of_the_agents_folder(tmp_path: Path, gsm8k_cases: list[Case]) -> None:
    # `make demo` runs from a fresh clone: the agents must need nothing outside their folder.
    copy = tmp_path / "agents"
    shutil.copytree(AGENTS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    found = discover_targets(copy)
    assert found.problems == []
    replay = found.targets["gsm8k-replay"].variants["175b_verification"]
    assert replay.path.is_relative_to(copy)


@pytest.mark.skipif(not REALDATA.is_dir(), reason="the raw public data is not mounted here")
def test_build_sets_reproduces_the_committed_files(tmp_path: Path) -> None:
    result = load_module(EXAMPLES / "build_sets.py").build(REALDATA, tmp_path)
    assert (result.gsm8k_cases, result.hotpotqa_cases) == (1319, 100)
    for built in (result.gsm8k_set, result.hotpotqa_set, result.gsm8k_solutions):
        committed = EXAMPLES / built.relative_to(tmp_path)
        assert built.read_bytes() == committed.read_bytes(), committed


async def test_gsm8k_replay_answers_an_unrecorded_question_with_a_plain_sentence(discovery: Discovery) -> None:
    """Asked something outside its recording (the playground, a conversation input): a clear
    message naming what it can answer, never a KeyError."""
    spec = discovery.targets["gsm8k-replay"]
    target, _ = spec.resolve("6b_finetuning")
    conversation = [{"role": "user", "content": "What is 2 + 2?"}]
    sink = CollectingSink()
    await run_eval([Case("chat", conversation, "4")], target, spec.scorers, sink=sink)
    error = sink.results[0].run.error
    assert error is not None and error.type == "NotRecordedError"
    assert "no recorded answer for that question" in error.message and "1,319 GSM8K test questions" in error.message


def test_hotpotqa_pipeline_names_the_missing_input_field(hotpotqa: ModuleType) -> None:
    """A JSON input that is not the pipeline's shape: a message naming the field, not a KeyError."""
    with pytest.raises(ValueError, match="the input has no 'paragraphs' list"):
        hotpotqa.Bm25Retriever(k=2).run({"question": "who?"})
    with pytest.raises(ValueError, match="the input has no 'question' str"):
        hotpotqa.ExtractiveAnswerer().run({"paragraphs": []})
