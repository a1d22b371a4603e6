"""The BFCL example: case banks, and the oracle / no-tools sanity pair over every category."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from evalcore.discovery import TargetSpec, discover_targets
from evalcore.report import EvalReport
from evalcore.runner import run_eval
from evalcore.store import InMemoryEvalStore
from evalcore.types import Case
from tests.support.realdata import REALDATA as REALDATA_ROOT

ROOT = Path(__file__).resolve().parents[2]
SETS = ROOT / "examples" / "sets"
AGENTS = ROOT / "examples" / "agents"
REALDATA = REALDATA_ROOT / "bfcl"

COUNTS = {
    "simple_python": 400,
    "multiple": 200,
    "parallel": 200,
    "parallel_multiple": 200,
    "live_simple": 258,
    "irrelevance": 240,
}


def load_set(category: str) -> list[Case]:
    with (SETS / f"bfcl_{category}.jsonl").open(encoding="utf-8") as handle:
        return [Case(**json.loads(line)) for line in handle]


@pytest.fixture(scope="module")
def targets() -> dict[str, TargetSpec]:
    found = discover_targets(AGENTS).targets
    return {k: v for k, v in found.items() if k.startswith("bfcl-")}


async def run(spec: TargetSpec, category: str, variant: str | None = None, **kwargs: Any) -> EvalReport:
    target, label = spec.resolve(variant)
    return await run_eval(load_set(category), target, spec.scorers, variant=label, concurrency=16, **kwargs)


def pass_rate(report: EvalReport) -> float:
    metric = report.metrics["tool_calls"]
    assert metric.errors == 0
    assert metric.mean is not None
    return metric.mean


@pytest.mark.parametrize(("category", "count"), sorted(COUNTS.items()))
def test_case_banks(category: str, count: int) -> None:
    cases = load_set(category)
    assert len(cases) == count
    assert len({c.id for c in cases}) == count
    assert all(c.tags == [category] and c.id.startswith(category) for c in cases)
    first = cases[0]
    assert first.input["question"][-1]["role"] == "user"
    assert first.input["functions"][0]["parameters"]["type"] == "dict"
    if category == "irrelevance":
        assert all(c.expected == [] for c in cases)
    else:
        assert all(c.expected and all(len(call) == 1 for call in c.expected) for c in cases)


@pytest.mark.skipif(not REALDATA.is_dir(), reason="BFCL source data not available")
@pytest.mark.parametrize("category", ["parallel", "irrelevance"])
def test_case_banks_are_reproducible(category: str) -> None:
    spec = importlib.util.spec_from_file_location("build_bfcl_sets", ROOT / "examples" / "build_bfcl_sets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rebuilt = module.build_category(category, REALDATA)
    stored = [json.loads(line) for line in (SETS / f"bfcl_{category}.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rebuilt == stored


def test_targets_are_declared(targets: dict[str, TargetSpec]) -> None:
    assert set(targets) == {"bfcl-rules", "bfcl-oracle", "bfcl-no-tools"}
    assert list(targets["bfcl-rules"].variants) == ["keyword", "strict"]
    assert all(spec.scorers == ["tool_calls:mode=any_order,strings=bfcl"] for spec in targets.values())
    assert all(spec.kind == "agent" for spec in targets.values())


@pytest.mark.parametrize("category", sorted(COUNTS))
async def test_oracle_passes_every_case(targets: dict[str, TargetSpec], category: str) -> None:
    report = await run(targets["bfcl-oracle"], category)
    assert pass_rate(report) == 1.0
    assert report.metrics["tool_calls.f1"].mean == 1.0


@pytest.mark.parametrize("category", sorted(COUNTS))
async def test_no_tools_passes_only_irrelevance(targets: dict[str, TargetSpec], category: str) -> None:
    report = await run(targets["bfcl-no-tools"], category)
    assert pass_rate(report) == (1.0 if category == "irrelevance" else 0.0)


async def test_rule_agent_variants_trade_abstention_for_coverage(targets: dict[str, TargetSpec]) -> None:
    spec = targets["bfcl-rules"]
    keyword_irrelevance = pass_rate(await run(spec, "irrelevance", "keyword"))
    strict_irrelevance = pass_rate(await run(spec, "irrelevance", "strict"))
    keyword_simple = pass_rate(await run(spec, "simple_python", "keyword"))
    strict_simple = pass_rate(await run(spec, "simple_python", "strict"))
    assert keyword_irrelevance == 0.0  # it always calls something
    assert strict_irrelevance > 0.5
    assert 0.2 < strict_simple <= keyword_simple < 1.0


async def test_rule_agent_records_execute_tool_spans_the_scorer_can_read(targets: dict[str, TargetSpec]) -> None:
    store = InMemoryEvalStore()
    cases = load_set("simple_python")[:5]
    target, _ = targets["bfcl-rules"].resolve("keyword")
    await run_eval(cases, target, [], sink=store, eval_run_id="e1")
    runs = list(store.iter_runs("e1"))
    assert len(runs) == 5
    for _case, record in runs:
        spans = [
            e for e in store.events_for(record.run_id) if e.type == "span_begin" and e.payload["kind"] == "execute_tool"
        ]
        assert [e.name for e in spans] == [c["name"] for c in record.metadata["tool_calls"]]
        assert [e.payload["arguments"] for e in spans] == [c["arguments"] for c in record.metadata["tool_calls"]]
        assert record.output == [{c["name"]: c["arguments"]} for c in record.metadata["tool_calls"]]
