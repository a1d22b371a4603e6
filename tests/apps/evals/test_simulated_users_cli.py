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
from evalcore.simulator import STOP_SIGNAL
from tests.support.stand_in_llm import StandInLLM, completion_body

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


LLM_SCENARIO = {
    "id": "booking",
    "split": "dev",
    "scenario": {"opening": "Book me a table", "goal": "a table for two at 8pm Friday", "max_turns": 5},
}


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "shop.py").write_text(AGENTS)
    bank = tmp_path / "scenarios.jsonl"
    bank.write_text(json.dumps(SCENARIO) + "\n" + json.dumps(LLM_SCENARIO) + "\n")
    call_command("import", str(bank))
    return folder


def run(agents: Path, target: str, variant: str, report: Path, *more: str) -> tuple[EvalRun, dict[str, Any]]:
    call_command(
        "eval", str(agents), "--set", "scenarios", "--target", target, "--variant", variant, "--split", "dev",
        "--repeat", "2", "--json", str(report), "--quiet", *more,
    )  # fmt: skip
    return EvalRun.objects.filter(target_id=target, variant=variant).latest("started"), json.loads(report.read_text())


def users(eval_run: EvalRun, case_id: str = "refund") -> list[list[str]]:
    rows = EvalResult.objects.filter(eval_run=eval_run, case_id=case_id).select_related("run").order_by("repeat_index")
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
    case = next(c for c in report_a["cases"] if c["case_id"] == "refund")
    assert [turn["user"] for turn in case["turns"]] == script
    assert case["simulator"]["kind"] == "scripted" and case["simulator"]["stopped"]  # why it ended, per case
    # the scenario without a script needs an LLM user, and this run has none: errored, never passed
    booking = next(c for c in report_a["cases"] if c["case_id"] == "booking")
    assert booking["status"] == "errored" and booking["error"]["type"] == "SimulatorError"

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


def user_model(body: dict[str, Any]) -> dict[str, Any]:
    """The stand-in user: its reply depends only on the conversation it is shown."""
    agent_turns = [m["content"] for m in body["messages"] if m["role"] == "user"]
    if len(agent_turns) >= 5:
        return completion_body(STOP_SIGNAL, usage=(50, 2))
    return completion_body(f"then? (after {agent_turns[-1]!r})", usage=(50, 10))


@pytest.mark.django_db(transaction=True)
def test_a_seeded_llm_user_from_the_cli_meets_variant_b_as_variant_a_until_the_divergence(
    agents: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any, capsys: Any
) -> None:
    settings.DATA_DIR = tmp_path / "data"
    monkeypatch.setenv("STAND_IN_KEY", "sk-simulator-never-stored")
    monkeypatch.setenv("EVALSITE_MODEL_API_KEY_ENV", "STAND_IN_KEY")
    with StandInLLM(responder=user_model) as llm:
        options = ["--simulator-model", "user-model", "--simulator-base-url", llm.base_url, "--simulator-seed", "11"]
        run_a, report_a = run(agents, "shop", "A", tmp_path / "a.json", *options)
        calls_a = len(llm.chat_requests)
        run_b, report_b = run(agents, "shop", "B", tmp_path / "b.json", "--baseline", run_a.id, *options)
        calls_b = len(llm.chat_requests) - calls_a
        sent = llm.chat_requests[0].body
    assert sent["seed"] == 11 and sent["temperature"] == 0
    # A: the replies before turns 2-5 asked once (max_turns 5 ends it); its second repeat met the cached user
    assert calls_a == 4
    usage = report_a["simulator"]["usage"]
    assert (usage["calls"], usage["cached"], usage["tokens_in"], usage["tokens_out"]) == (4, 4, 200, 40)
    a_rows = {
        (r.case_id, r.repeat_index): r.run for r in EvalResult.objects.filter(eval_run=run_a).select_related("run")
    }
    b_rows = {
        (r.case_id, r.repeat_index): r.run for r in EvalResult.objects.filter(eval_run=run_b).select_related("run")
    }
    a_users = [t["user"] for t in a_rows[("booking", 0)].metadata["turns"]]
    b_users = [t["user"] for t in b_rows[("booking", 0)].metadata["turns"]]
    assert len(a_users) == len(b_users) == 5
    assert b_users[:3] == a_users[:3] and b_users[3] != a_users[3]  # B's 3rd answer differs: a new 4th user turn
    # B: the replies after turns 1 and 2 came from A's cache; after turns 3 and 4 they were new calls
    assert calls_b == 2
    # the agent's tokens are its own: the simulator's 50-token prompts are not in them
    assert a_rows[("booking", 0)].tokens_in in (None, 0)
    divergence = {(d["case_id"], d["repeat_index"]): d["turn"] for d in report_b["simulator"]["divergence"]}
    assert divergence == {("refund", 0): 3, ("refund", 1): 3, ("booking", 0): 3, ("booking", 1): 3}
    assert "sk-simulator-never-stored" not in (tmp_path / "b.json").read_text()
