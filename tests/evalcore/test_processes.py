"""Nothing a case starts outlives it: a scorer or target abandoned at its timeout takes its
subprocesses and their children with it, strays of a finished call are ended, and what is still
running when the run ends (or the CLI exits) is killed. Real processes, no mocks."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from evalcore.processes import process_scope
from evalcore.runner import run_eval
from evalcore.scorers.base import ScoreContext, Scorer
from evalcore.store import InMemoryEvalStore
from evalcore.types import Case, Score

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")

ROOT = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 60.0
"""A liveness bound, not a timing claim: SIGKILL is immediate, a loaded machine may take a while to reap."""


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an unreaped corpse under a PID 1 that never waits)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def gone(pid: int) -> bool:
    """Wait (polling) until ``pid`` is gone; False if it is still there after a generous bound."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def read_pid(path: Path) -> int:
    """The pid a shell wrote to ``path`` (waiting for the write to land)."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text.endswith("\n") or text.isdigit():
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"no pid in {path}")


def hang_with_grandchild(pid_file: Path) -> list[str]:
    """A shell that starts a sleeping grandchild, writes its pid, and waits on it for good."""
    return ["sh", "-c", f"sleep 600 & echo $! > {pid_file}; wait"]


@dataclass
class HangingCodeCheck(Scorer):
    """A HumanEval-style check that runs the code in a subprocess that never ends."""

    name: ClassVar[str] = "hanging_code_check"
    pid_dir: str = ""

    def score(self, ctx: ScoreContext) -> Score:  # type: ignore[override]
        pid_file = Path(self.pid_dir) / f"{ctx.case.id}.pid"
        done = subprocess.run(hang_with_grandchild(pid_file), check=False)
        return Score(self.name, done.returncode == 0)


async def test_a_scorer_abandoned_at_its_timeout_takes_its_children_and_grandchildren_with_it(tmp_path):
    cases = [Case(f"c{i}", i, i) for i in range(4)]
    store = InMemoryEvalStore()
    scorer = HangingCodeCheck(pid_dir=str(tmp_path))
    report = await run_eval(
        cases, lambda x: x, [scorer], sink=store, eval_run_id="r", concurrency=4, scorer_timeout_s=1.0
    )
    assert report.n == 4
    for result in store.results["r"].values():
        (score,) = result.scores
        assert "exceeded the 1 s scorer timeout" in (score.error or "")
    pids = [read_pid(tmp_path / f"c{i}.pid") for i in range(4)]
    assert [pid for pid in pids if not gone(pid)] == []


async def test_an_async_scorers_subprocess_is_ended_at_its_timeout(tmp_path):
    pid_file = tmp_path / "a.pid"

    @dataclass
    class AsyncHang(Scorer):
        name: ClassVar[str] = "async_hang"

        async def score(self, ctx: ScoreContext) -> Score:
            proc = await asyncio.create_subprocess_exec(*hang_with_grandchild(pid_file))
            await proc.wait()
            return Score(self.name, True)

    await run_eval([Case("c", 1, 1)], lambda x: x, [AsyncHang()], scorer_timeout_s=1.0)
    assert gone(read_pid(pid_file))


async def test_a_target_abandoned_at_its_timeout_takes_its_children_with_it(tmp_path):
    pid_file = tmp_path / "t.pid"

    def target(x: int) -> int:
        subprocess.run(hang_with_grandchild(pid_file), check=False)
        return x

    store = InMemoryEvalStore()
    await run_eval([Case("c", 1, 1)], target, ["exact_match"], sink=store, eval_run_id="r", timeout_s=1.0)
    (result,) = store.results["r"].values()
    assert result.run.error is not None and result.run.error.type == "Timeout"
    assert gone(read_pid(pid_file))


async def test_a_finished_calls_strays_are_ended_but_a_server_it_keeps_lives_until_the_run_ends(tmp_path):
    servers: list[subprocess.Popen[bytes]] = []
    stray_file = tmp_path / "stray.pid"
    seen_alive: list[bool] = []

    def target(x: int) -> int:
        if not servers:  # started once, reused by the next cases (a local model server)
            servers.append(subprocess.Popen(["sleep", "600"]))
        # a tool that returns at once and leaves a background job behind
        subprocess.run(["sh", "-c", f"sleep 600 & echo $! > {stray_file}"], check=True)
        seen_alive.append(servers[0].poll() is None)
        return x

    await run_eval([Case(f"c{i}", i, i) for i in range(3)], target, ["exact_match"], concurrency=1)
    assert seen_alive == [True, True, True]  # the server outlived each call
    assert gone(read_pid(stray_file))
    assert servers[0].wait(timeout=GONE_WITHIN_S) == -9  # ended with the run


def test_a_process_that_chose_its_own_session_is_recorded_and_ended_alone(tmp_path):
    with process_scope() as scope:
        own = subprocess.Popen(["sleep", "600"], start_new_session=True)
        plain = subprocess.Popen(["sleep", "600"])
        assert os.getpgid(plain.pid) == plain.pid != os.getpgid(0)  # a group of its own
        assert sorted(scope.pids) == sorted([own.pid, plain.pid])
    assert own.wait(timeout=GONE_WITHIN_S) == -9 and plain.wait(timeout=GONE_WITHIN_S) == -9
    outside = subprocess.Popen(["true"])  # no scope open: untouched, in our group
    assert outside.wait(timeout=GONE_WITHIN_S) == 0


AGENTS = textwrap.dedent(
    """
    import subprocess
    from dataclasses import dataclass
    from pathlib import Path
    from typing import ClassVar

    from evalcore.discovery import TargetSpec
    from evalcore.scorers.base import Scorer
    from evalcore.types import Score

    PID_DIR = Path(__file__).parent


    @dataclass
    class CodeCheck(Scorer):
        name: ClassVar[str] = "code_check"

        def score(self, ctx):
            pid_file = PID_DIR / f"{ctx.case.id}.pid"
            subprocess.run(["sh", "-c", f"sleep 600 & echo $! > {pid_file}; wait"], check=False)
            return Score(self.name, True)


    echo = TargetSpec(id="echo", target=lambda x: x, scorers=[CodeCheck()])
    """
)


def test_the_cli_leaves_no_process_of_an_abandoned_scorer_running(tmp_path):
    """The report: 4 of 4 children alive under PID 1 after `evalsite eval` exited 0."""
    from tests.support.databases import subprocess_db_env

    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "code.py").write_text(AGENTS)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(f'{{"id": "c{i}", "input": {i}, "expected": {i}, "split": "dev"}}\n' for i in range(4)))
    env = {**os.environ, **subprocess_db_env(tmp_path / "e.sqlite3"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "evalsite.cli", "eval", str(agents), "--set", str(cases), "--scorer-timeout", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    reason = "  4 × code_check: Timeout: scorer 'code_check' exceeded the 1 s scorer timeout"
    assert reason in done.stdout.splitlines(), done.stdout + done.stderr
    pids = [read_pid(agents / f"c{i}.pid") for i in range(4)]
    assert [pid for pid in pids if not gone(pid)] == []
