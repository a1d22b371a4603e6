"""Simulated users through ``evalsite eval``: a scripted user drives a 5-turn scenario for two
variants; the JSON report's ``simulator`` block gives the simulator's usage apart from the agent's,
the variance over repeats (coverage and Wilson interval) and, against a ``--baseline``, the turn
where each conversation left the baseline's (issue 25, simulated users)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from apps.evals.models import EvalResult, EvalRun

AGENTS = '''
import itertools

from evalcore.discovery import target

_calls = itertools.count()


@target(id="shop", scorers=["exact_match"])
def shop(message, ctx, session):
    """Answers "answer N"; variant B answers differently from turn 3 on."""
    number = session.turn + 1
    word = "other" if ctx.variant == "B" and number >= 3 else "answer"
    return f"{word} {number}"


@target(id="flaky", scorers=["exact_match"])
def flaky(message, ctx, session):
    """A different answer on every call: its repeats never meet the same conversation twice."""
    return f"answer {next(_calls)}"
'''

SCENARIO = {
    "id": "refund",
    "split": "dev",
    "scenario": {
        "opening": "I want a refund",
        "persona": "a polite customer",
        "script": ["order 42", "it arrived broken", "to my card please", "thanks"],
        "max_turns": 5,
    },
}


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "shop.py").write_text(AGENTS)
    bank = tmp_path / "scenarios.jsonl"
    bank.write_text(json.dumps(SCENARIO) + "\n")
    call_command("import", str(bank))
    return folder


def run(agents: Path, target: str, variant: str, report: Path, *more: str) -> tuple[EvalRun, dict[str, Any]]:
    call_command(
        "eval", str(agents), "--set", "scenarios", "--target", target, "--variant", variant, "--split", "dev",
        "--repeat", "2", "--json", str(report), "--quiet", *more,
    )  # fmt: skip
    return EvalRun.objects.filter(target_id=target, variant=variant).latest("started"), json.loads(report.read_text())


def users(eval_run: EvalRun) -> list[list[str]]:
    rows = EvalResult.objects.filter(eval_run=eval_run).select_related("run").order_by("repeat_index")
    return [[turn["user"] for turn in row.run.metadata["turns"]] for row in rows]


@pytest.mark.django_db(transaction=True)
def test_two_variants_meet_the_same_scripted_user_and_the_report_names_the_divergence(
    agents: Path, tmp_path: Path
) -> None:
    run_a, report_a = run(agents, "shop", "A", tmp_path / "a.json")
    script = ["I want a refund", "order 42", "it arrived broken", "to my card please", "thanks"]
    assert users(run_a) == [script, script]
    block = report_a["simulator"]
    assert block["cases"] == 1 and block["runs"] == 2
    assert block["usage"] == {"calls": 0, "cached": 0, "tokens_in": 0, "tokens_out": 0}  # scripted: no model
    assert block["variance"]["per_case"] == {"refund": {"repeats": 2, "distinct": 1}}
    assert block["variance"]["coverage"] == "n=0/1" and block["variance"]["share"] == 0.0
    assert "divergence" not in block  # no baseline
    case = report_a["cases"][0]
    assert [turn["user"] for turn in case["turns"]] == script

    run_b, report_b = run(agents, "shop", "B", tmp_path / "b.json", "--baseline", run_a.id)
    assert users(run_b) == [script, script]
    divergence = report_b["simulator"]["divergence"]
    assert divergence == [
        {"case_id": "refund", "repeat_index": index, "turn": 3, "flip": None, "within_variance": False}
        for index in (0, 1)
    ]


@pytest.mark.django_db(transaction=True)
def test_repeats_of_an_agent_that_answers_differently_count_as_simulator_variance(agents: Path, tmp_path: Path) -> None:
    _, report = run(agents, "flaky", "A", tmp_path / "f.json")
    variance = report["simulator"]["variance"]
    assert variance["per_case"] == {"refund": {"repeats": 2, "distinct": 2}}
    assert variance["coverage"] == "n=1/1" and variance["share"] == 1.0
    low, high = variance["interval"]
    assert high == 1.0 and 0.0 < low < 0.3  # Wilson at n=1: nearly the whole range
