"""Conversation cases through `evalsite import` / `eval` (repro bh-43): stored by today's result
writer, the --json report's per-turn results, the pages on such a result, the CSV export's refusal,
and resume after a kill never storing half a conversation as done."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.evals.exports.downloads import ExportFormatError, set_download
from apps.evals.models import EvalResult, EvalRun, EvalSet
from tests.apps.evals.test_liveness import query, run_cli

ROOT = Path(__file__).resolve().parents[3]
REPROS = ROOT / "tests" / "fixtures" / "repros"
BH43 = REPROS / "bh-43-turns.evalset.json"


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    shutil.copy(REPROS / "bh-43-agents" / "targets.py", folder / "targets.py")
    return folder


def run_target(agents: Path, target: str, report: Path) -> EvalRun:
    call_command(
        "eval", str(agents), "--set", "bh-43-turns", "--target", target,
        "--split", "all", "--allow-test", "--quiet", "--json", str(report),
    )  # fmt: skip
    return EvalRun.objects.get(target_id=target)


@pytest.mark.django_db(transaction=True)
def test_bh43_through_the_cli_the_wrong_turn_fails_and_the_report_gives_the_turns(agents, tmp_path, client, viewer):
    call_command("import", str(BH43))
    for target, status, turns in (
        ("bh3-turns", "failed", ["failed", "failed"]),
        ("late-caller", "failed", ["failed", "failed"]),
        ("on-time", "passed", ["passed", "passed"]),
        ("bh3-turns-ok", "passed", ["passed", "passed"]),
    ):
        report = tmp_path / f"{target}.json"
        eval_run = run_target(agents, target, report)
        (case,) = json.loads(report.read_text())["cases"]
        assert case["status"] == status, target
        assert [t["status"] for t in case["turns"]] == turns, target
        assert [t["user"] for t in case["turns"]] == [
            "Switch off the lamp in the kitchen.",
            "And switch on the heater in the hall.",
        ]
        result = EvalResult.objects.get(eval_run=eval_run)
        assert result.status == status
        # the pages read such a result without trouble
        client.force_login(viewer)
        assert client.get(reverse("evals:eval_run", args=[eval_run.pk])).status_code == 200
        page = client.get(reverse("evals:result", args=[eval_run.pk, result.pk]))
        assert page.status_code == 200
        assert "tool_calls" in page.content.decode()
    late = json.loads((tmp_path / "late-caller.json").read_text())["cases"][0]
    assert late["turns"][0]["tool_calls"] == [] and len(late["turns"][1]["tool_calls"]) == 2
    first = late["turns"][0]["scores"][0]
    assert first["name"] == "tool_calls" and first["passed"] is False
    assert "was not made" in first["explanation"]


@pytest.mark.django_db
def test_the_csv_export_of_a_set_with_a_conversation_says_it_cannot(tmp_path):
    call_command("import", str(BH43))
    eval_set = EvalSet.objects.get(name="bh-43-turns")
    with pytest.raises(ExportFormatError, match="CSV cannot hold a conversation"):
        set_download(eval_set, "csv")
    jsonl = b"".join(set_download(eval_set, "jsonl").chunks).decode()
    assert json.loads(jsonl.splitlines()[0])["input"]["turns"][1] == "And switch on the heater in the hall."


KILLER = '''
import os
from pathlib import Path

from evalcore.discovery import target

LOG = Path(os.environ["CONV_LOG"])


@target(id="killer", scorers=["exact_match"])
def killer(message, session):
    """Answers in upper case; case c1's second turn ends the process the first time."""
    with LOG.open("a") as log:
        log.write(f"{session.case.id}:{session.turn}\\n")
    marker = LOG.with_suffix(".killed")
    if session.case.id == "c1" and session.turn == 1 and not marker.exists():
        marker.write_text("x")
        os._exit(3)
    return message.upper()
'''


def test_resume_after_a_kill_never_stores_half_a_conversation_as_done(tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "killer.py").write_text(KILLER)
    cases = tmp_path / "talks.jsonl"
    cases.write_text(
        "".join(
            json.dumps({"id": f"c{i}", "split": "dev", "turns": [
                {"user": "one", "final_response": "ONE"}, {"user": "two", "final_response": "TWO"}]}) + "\n"
            for i in range(3)
        )
    )  # fmt: skip
    db = tmp_path / "conv.sqlite3"
    log = tmp_path / "calls.log"
    env = {"CONV_LOG": str(log)}
    first = run_cli("eval", str(folder), "--set", str(cases), "--concurrency", "1", "--quiet", db=db, **env)
    assert first.returncode == 3, first.stdout + first.stderr
    # c0 finished whole; c1 died in its second turn and is not stored as done
    assert [r[0] for r in query(db, "SELECT case_id FROM evals_evalresult")] == ["c0"]
    ((run_id,),) = query(db, "SELECT id FROM evals_evalrun")

    resumed = run_cli("eval", str(folder), "--resume", run_id, "--quiet", db=db, **env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rows = dict(query(db, "SELECT case_id, status FROM evals_evalresult"))
    assert rows == {"c0": "passed", "c1": "errored", "c2": "passed"}
    # the finished conversation was never replayed; the one that ended the process is not run again
    calls = log.read_text().split()
    assert calls == ["c0:0", "c0:1", "c1:0", "c1:1", "c2:0", "c2:1"]


SLOW = """
import asyncio

from evalcore.discovery import target


@target(id="slow-second", scorers=["tool_calls"])
async def slow_second(message, session):
    if session.turn == 1:
        await asyncio.sleep(60)
    return {"final_response": "ok", "tool_calls": []}
"""


@pytest.mark.django_db(transaction=True)
def test_conversation_timeout_from_the_command_line_errors_the_case_at_its_turn(tmp_path):
    call_command("import", str(BH43))
    folder = tmp_path / "slow"
    folder.mkdir()
    (folder / "slow.py").write_text(SLOW)
    report = tmp_path / "slow.json"
    call_command(
        "eval", str(folder), "--set", "bh-43-turns", "--split", "all", "--allow-test", "--quiet",
        "--timeout", "60", "--conversation-timeout", "0.5", "--json", str(report),
    )  # fmt: skip
    eval_run = EvalRun.objects.get()
    assert eval_run.config["conversation_timeout_s"] == 0.5
    (case,) = json.loads(report.read_text())["cases"]
    assert case["status"] == "errored"
    assert case["error"]["message"] == "turn 2: the conversation exceeded the 0.5 s conversation timeout"
    assert [t.get("error") is None for t in case["turns"]] == [True, False]
