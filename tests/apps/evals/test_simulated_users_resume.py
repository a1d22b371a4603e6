"""Simulated users across a run's life (issue 25 follow-ups): the simulator is stored in the run's
typed config (no API key), a resume plays on with it without the options given again and refuses
another model or seed, and a ``kill -9`` mid-conversation never replays a finished simulated
conversation nor stores half of one as done."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalRun
from apps.evals.runs.config import SCHEMA_VERSION, read_run_config
from evalcore.simulator import STOP_SIGNAL
from tests.apps.evals.test_liveness import query, start_cli, wait_for
from tests.support.stand_in_llm import StandInLLM, completion_body

AGENTS = '''
import os
import time
from pathlib import Path

from evalcore.discovery import target

LOG = Path(os.environ.get("SIM_LOG", os.devnull))


@target(id="desk", scorers=["exact_match"])
def desk(message, ctx, session):
    """Answers "answer N"; with $SIM_LOG, logs each turn and hangs in case s1's third turn the
    first time (until the test kills the process)."""
    with LOG.open("a") as log:
        log.write(f"{session.case.id}:{session.turn}\\n")
    marker = LOG.with_suffix(".hung")
    if os.environ.get("SIM_LOG") and session.case.id == "s1" and session.turn == 2 and not marker.exists():
        marker.write_text("x")
        time.sleep(3600)  # the test kills the process meanwhile
    return f"answer {session.turn + 1}"
'''


def scenario(case_id: str) -> dict[str, Any]:
    return {
        "id": case_id,
        "split": "dev",
        "expected": None,
        "scenario": {"opening": "Book me a table", "goal": "a table for two at 8pm Friday", "max_turns": 6},
    }


def user_model(body: dict[str, Any]) -> dict[str, Any]:
    """The stand-in user: a reply that depends only on the conversation; done after 4 answers."""
    answers = [m["content"] for m in body["messages"] if m["role"] == "user"]
    if len(answers) >= 4:
        return completion_body(STOP_SIGNAL, usage=(20, 2))
    return completion_body(f"and then? (after {answers[-1]})", usage=(20, 5))


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "desk.py").write_text(AGENTS)
    return folder


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    path = tmp_path / "bookings.jsonl"
    path.write_text("".join(json.dumps(scenario(f"s{i}")) + "\n" for i in range(3)))
    return path


@pytest.mark.django_db(transaction=True)
def test_the_simulator_is_stored_without_its_key_and_a_resume_refuses_another_model_or_seed(
    agents: Path, bank: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.DATA_DIR = tmp_path / "data"
    monkeypatch.setenv("STAND_IN_KEY", "sk-simulator-never-stored")
    monkeypatch.setenv("EVALSITE_MODEL_API_KEY_ENV", "STAND_IN_KEY")
    with StandInLLM(responder=user_model) as llm:
        url_with_password = llm.base_url.replace("http://", "http://me:hunter2@")
        call_command(
            "eval", str(agents), "--set", str(bank), "--quiet", "--simulator-model", "user-model",
            "--simulator-base-url", url_with_password, "--simulator-seed", "11",
        )  # fmt: skip
        assert len(llm.chat_requests) == 4  # s0's three replies and its stop; s1, s2 met the cache
        base_url = llm.base_url
    eval_run = EvalRun.objects.get()
    assert eval_run.config["simulator"] == {"model": "user-model", "base_url": base_url, "seed": 11, "cache": True}
    stored = json.dumps(eval_run.config)
    assert "sk-simulator-never-stored" not in stored and "hunter2" not in stored
    assert read_run_config(eval_run.config).simulator is not None

    for more, differ in (
        (["--simulator-model", "another-model", "--simulator-seed", "11"], "model"),
        (["--simulator-model", "user-model"], "seed"),  # no seed given: 0, not the run's 11
    ):
        with pytest.raises(CommandError) as refused:
            call_command("eval", str(agents), "--resume", eval_run.id, "--quiet", *more)
        assert str(refused.value) == (
            f"--resume {eval_run.id}: the run's simulated users were played by another simulator ({differ} differ); "
            "resume it with the same one: --simulator-model user-model --simulator-seed 11 "
            "(or give no --simulator-* option: the run's own is used)"
        )


@pytest.mark.django_db(transaction=True)
def test_a_resume_refuses_a_simulator_on_a_run_started_without_one(agents: Path, bank: Path) -> None:
    call_command("eval", str(agents), "--set", str(bank), "--quiet")
    eval_run = EvalRun.objects.get()
    assert "simulator" not in eval_run.config
    with pytest.raises(CommandError, match="started without an LLM-backed user simulator; drop --simulator-model"):
        call_command("eval", str(agents), "--resume", eval_run.id, "--quiet", "--simulator-model", "m")


def test_rows_written_before_the_simulator_was_stored_still_read() -> None:
    assert read_run_config({"concurrency": 2}).simulator is None  # version 0: no version key
    assert read_run_config({"schema_version": SCHEMA_VERSION, "repeat": 3}).simulator is None
    typed = read_run_config({"simulator": {"model": "m", "seed": 4}})
    assert typed.simulator is not None and (typed.simulator.base_url, typed.simulator.cache) == ("", True)
    with pytest.raises(ValueError, match="seed must be >= 0"):
        read_run_config({"simulator": {"model": "m", "seed": -1}})


def test_kill_9_mid_simulated_conversation_resumes_with_the_stored_simulator_and_replays_nothing_finished(
    agents: Path, bank: Path, tmp_path: Path
) -> None:
    db = tmp_path / "sim.sqlite3"
    log = tmp_path / "turns.log"
    env = {
        "SIM_LOG": str(log),
        "STAND_IN_KEY": "sk-standin",
        "EVALSITE_MODEL_API_KEY_ENV": "STAND_IN_KEY",
        "EVALSITE_DATA_DIR": str(tmp_path / "data"),
    }
    with StandInLLM(responder=user_model) as llm:
        cli = start_cli(
            "eval", str(agents), "--set", str(bank), "--concurrency", "1", "--quiet", "--simulator-model",
            "user-model", "--simulator-base-url", llm.base_url, "--no-simulator-cache", db=db, **env,
        )  # fmt: skip
        try:
            wait_for(lambda: log.with_suffix(".hung").exists() or cli.poll() is not None, "s1's third turn")
            assert cli.poll() is None, cli.communicate()
        finally:
            os.kill(cli.pid, signal.SIGKILL)
            cli.communicate()
        # s0 finished whole; s1 died in its third turn and is not stored as done
        assert [r[0] for r in query(db, "SELECT case_id FROM evals_evalresult")] == ["s0"]
        ((run_id,),) = query(db, "SELECT id FROM evals_evalrun")
        asked_before = len(llm.chat_requests)
        assert asked_before == 4 + 2  # s0: three replies and the stop; s1: the replies before turns 2 and 3

        # no --simulator-* option: the run's own simulator (its stored config) plays on
        resumed = start_cli("eval", str(agents), "--resume", run_id, "--quiet", db=db, **env)
        out, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out + err
        assert len(llm.chat_requests) - asked_before == 4 + 4  # s1 again from its start, then s2; s0 never
    rows = query(
        db,
        "SELECT r.case_id, t.metadata FROM evals_evalresult r JOIN traces_run t ON t.id = r.run_id ORDER BY r.case_id",
    )
    assert [case_id for case_id, _ in rows] == ["s0", "s1", "s2"]
    for case_id, metadata in rows:
        played = json.loads(metadata)
        assert len(played["turns"]) == 4 and all("error" not in t for t in played["turns"]), case_id
        assert played["simulator"]["stopped"]["reason"] == "stop_signal"
    calls = log.read_text().split()
    # the finished conversation was never replayed; the half-played one was played again whole
    assert calls == [f"s0:{t}" for t in range(4)] + ["s1:0", "s1:1", "s1:2"] + [
        f"{c}:{t}" for c in ("s1", "s2") for t in range(4)
    ]
