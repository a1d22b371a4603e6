"""The run-level statement on flips between two runs with simulated users (issue 25 follow-up):
of the flipped simulated cases, how many met more than one distinct conversation across the
repeats of either run (so the flip may be the simulator's doing), with coverage n = k/N and a
Wilson interval, in the JSON report's ``simulator.flips`` and one console line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from apps.evals.cli.simulating import flipped_cases
from apps.evals.models import EvalRun
from evalcore.simulator import ConversationVariance

AGENTS = '''
import itertools

from evalcore.discovery import target

_calls = itertools.count()


@target(id="desk", scorers=["exact_match"])
def desk(message, ctx, session):
    """Variant A answers "answer N"; B answers "other N" on case steady (the same every repeat)
    and something new on every call on case noisy (its repeats never meet the same conversation)."""
    number = session.turn + 1
    if ctx.variant == "B" and session.case.id == "steady":
        return f"other {number}"
    if ctx.variant == "B" and session.case.id == "noisy":
        return f"answer {number} ({next(_calls)})"
    return f"answer {number}"
'''

EXPECTED = [{"final_response": f"answer {n}", "tool_calls": []} for n in (1, 2)]


def scenario(case_id: str) -> dict[str, Any]:
    return {
        "id": case_id,
        "split": "dev",
        "expected": EXPECTED,
        "scenario": {"opening": "hello", "script": ["and then?"], "max_turns": 2},
    }


@pytest.mark.django_db(transaction=True)
def test_flips_say_how_many_flipped_cases_met_more_than_one_conversation(tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "desk.py").write_text(AGENTS)
    bank = tmp_path / "desk.jsonl"
    bank.write_text("".join(json.dumps(scenario(c)) + "\n" for c in ("steady", "noisy", "same")))
    call_command("import", str(bank))
    common = ["eval", str(folder), "--set", "desk", "--split", "dev", "--repeat", "2", "--quiet"]
    call_command(*common, "--variant", "A")
    run_a = EvalRun.objects.get(variant="A")
    report = tmp_path / "b.json"
    call_command(*common, "--variant", "B", "--baseline", run_a.id, "--json", str(report))  # no gate: exit 0
    block = json.loads(report.read_text())["simulator"]
    flips = {(d["case_id"], d["repeat_index"]): d["flip"] for d in block["divergence"]}
    assert flips == {
        (c, i): ("regression" if c != "same" else None) for c in ("steady", "noisy", "same") for i in (0, 1)
    }
    statement = block["flips"]
    assert statement["cases"] == 2 and statement["within_variance"] == 1 and statement["case_ids"] == ["noisy"]
    assert statement["coverage"] == "n=1/2" and statement["share"] == 0.5 and statement["unmeasured"] == 0
    low, high = statement["interval"]
    assert 0.0 < low < 0.5 < high < 1.0
    out = capsys.readouterr().out
    assert (
        "simulated users vs baseline: 1/2 flipped case(s) met more than one distinct conversation in a run, "
        "so their flip may be the simulator's doing (50%, 95% CI 9%-91%)"
    ) in " ".join(out.split())


def test_a_flipped_case_run_once_in_both_runs_is_counted_unmeasured_never_within_variance() -> None:
    once = ConversationVariance(per_case={"a": {"repeats": 1, "distinct": 1}}, varying=0, cases=0, interval=None)
    statement = flipped_cases([{"case_id": "a", "flip": "regression"}], [once, once])
    assert (statement["cases"], statement["within_variance"], statement["unmeasured"]) == (1, 0, 1)
    assert statement["coverage"] == "n=0/1"
    none = flipped_cases([], [once])
    assert none["cases"] == 0 and none["share"] is None and none["interval"] is None
