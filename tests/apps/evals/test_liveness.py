"""A run always ends and its state is true: durability, heartbeats, resume, process and DB faults.

Repros ho-10, bh-15, bh-17, rs-02, rs-12, rs-13 (data copied in ``tests/fixtures/repros``). Every
subprocess gets its own SQLite file; every wait is on a state (polled with a generous deadline),
never on a fixed sleep.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps.evals.models import EvalResult, EvalRun
from apps.evals.results.executor import executor_fields
from apps.evals.runs.liveness import mark_stale_runs
from tests.apps.evals.test_consumers import roles  # noqa: F401 - autouse: the groups after each flush
from tests.apps.factories import make_eval_set

ROOT = Path(__file__).resolve().parents[3]
REPROS = ROOT / "tests" / "fixtures" / "repros"
EVALSITE = Path(sys.executable).with_name("evalsite")
pytestmark = pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="SQLite file faults")


def cli_env(db: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "EVALSITE_DB": str(db), "COLUMNS": "200", **extra}


def run_cli(*args: str, db: Path, timeout: float = 180, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=cli_env(db, **extra), timeout=timeout
    )


def start_cli(*args: str, db: Path, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(EVALSITE), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(db, **extra),
    )


def wait_for(check: Callable[[], Any], what: str, deadline_s: float = 90) -> Any:
    """Poll ``check`` until it returns something truthy (generous deadline: a loaded machine)."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # tables not created yet
            return []


def scalar(db: Path, sql: str, *params: Any) -> Any:
    """The first column of the first row, ``None`` before the table or the row exists."""
    rows = query(db, sql, *params)
    return rows[0][0] if rows else None


def write_cases(path: Path, n: int, prefix: str = "c") -> Path:
    path.write_text(
        "".join(json.dumps({"id": f"{prefix}{i:04d}", "input": f"q{i}", "expected": f"q{i}"}) + "\n" for i in range(n))
    )
    return path


# -- ho-10: a crash loses nothing finished; the case that ended the process is not run again ------


def test_ho10_finished_cases_survive_os_exit_and_resume_errors_the_case_instead_of_dying(tmp_path):
    folder = REPROS / "ho-10-crash-loses-finished-cases"
    db = tmp_path / "ho10.sqlite3"
    first = run_cli("eval", str(folder), "--set", str(folder / "cases.jsonl"), "--concurrency", "1", "--quiet", db=db)
    assert first.returncode == 3  # the target's os._exit(3)
    assert sorted(r[0] for r in query(db, "SELECT case_id FROM evals_evalresult")) == ["c0", "c1", "c2"]
    ((run_id, status, error),) = query(db, "SELECT id, status, error FROM evals_evalrun")
    assert status == "interrupted" and "os._exit(3)" in error and "in flight: c3" in error
    # the process ended, but not in silence: the reason, and the command that finishes the run
    said = first.stderr
    assert (
        f"evalsite: eval run {run_id} interrupted: the target of case c3 called os._exit(3); case(s) in flight: c3"
        in said
    )
    assert f"--resume {run_id} --db {db}" in said, said

    resumed = run_cli("eval", str(folder), "--resume", run_id, "--quiet", db=db)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rows = dict(query(db, "SELECT case_id, status FROM evals_evalresult"))
    assert rows == {**{f"c{i}": "passed" for i in range(8) if i != 3}, "c3": "errored"}
    ((error_json,),) = query(
        db, "SELECT r.error FROM traces_run r JOIN evals_evalresult e ON e.run_id = r.id WHERE e.case_id = 'c3'"
    )
    assert "the process ended while this case ran" in json.loads(error_json)["message"]
    assert query(db, "SELECT status, n_done, n_errored FROM evals_evalrun") == [("finished", 8, 1)]


ASYNC_EXIT_AGENT = """
import asyncio, os

from evalcore.discovery import target


@target(id="exits", scorers=["exact_match"])
async def exits(question):
    await asyncio.sleep(0.01)
    if question == "boom":
        os._exit(0)  # status 0: the run must still not look like a success
    return question
"""


def test_an_async_target_calling_os_exit_0_is_named_and_the_cli_does_not_exit_0(tmp_path):
    """From an async target (on the event loop's thread), recording the exit raised Django's
    SynchronousOnlyOperation: a traceback, no reason, the case not counted (resumes died again).
    And ``os._exit(0)`` made ``evalsite eval`` exit 0 for an interrupted run."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "exits.py").write_text(ASYNC_EXIT_AGENT)
    cases = tmp_path / "boom.jsonl"
    cases.write_text(
        "".join(json.dumps({"id": i, "input": i if i != "b" else "boom", "expected": i}) + "\n" for i in "abcdef")
    )
    db = tmp_path / "async.sqlite3"
    first = run_cli(
        "eval", str(agents), "--set", str(cases), "--split", "all", "--allow-test", "--concurrency", "6", db=db
    )
    assert first.returncode == 3, first.stdout + first.stderr
    assert "Traceback" not in first.stderr and "SynchronousOnlyOperation" not in first.stderr, first.stderr
    ((run_id, status, error),) = query(db, "SELECT id, status, error FROM evals_evalrun")
    assert status == "interrupted" and "the target of case b called os._exit(0)" in error
    assert f"evalsite: eval run {run_id} interrupted: the target of case b called os._exit(0)" in first.stderr
    # the command on a line of its own, whole (a terminal's wrapping must not cut it)
    assert f"\n  evalsite eval {agents} --resume {run_id} --db {db}\n" in first.stderr, first.stderr
    in_flight_at_exit = scalar(db, "SELECT in_flight FROM evals_evalrun")
    report = tmp_path / "resumed.json"
    resumed = run_cli("eval", str(agents), "--resume", run_id, "--quiet", "--json", str(report), db=db)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr  # one resume finishes it
    # the cases in flight at the exit ran again one at a time (>= 10 ms each): the resume's time
    # counts them (it counted only the run after them, ~0 s when none was left)
    suspects = len(json.loads(in_flight_at_exit)) - 1  # b itself is errored without running
    assert json.loads(report.read_text())["report"]["elapsed_s"] >= 0.009 * suspects
    assert dict(query(db, "SELECT case_id, status FROM evals_evalresult")) == {
        **{i: "passed" for i in "acdef"},
        "b": "errored",
    }


def test_a_segfaulting_case_in_a_concurrent_run_is_isolated_then_errored(tmp_path):
    """rs-00 ``segfault``: cases in flight at a death run again alone; the one that crashes
    alone twice is errored; no other case is ever errored; each resume makes progress."""
    db = tmp_path / "segv.sqlite3"
    cases = tmp_path / "segv.jsonl"
    cases.write_text(
        "".join(json.dumps({"id": f"s{i}", "input": f"q{i}", "expected": f"q{i}"}) + "\n" for i in range(12))
    )
    agents = str(REPROS / "rs-00-agents")
    first = run_cli(
        "eval",
        agents,
        "--set",
        str(cases),
        "--target",
        "segfault",
        "--split",
        "all",
        "--allow-test",
        "--concurrency",
        "3",
        "--quiet",
        db=db,
    )
    assert first.returncode == -signal.SIGSEGV
    ((run_id,),) = query(db, "SELECT id FROM evals_evalrun")
    for _ in range(4):  # at most: isolate, crash alone, crash alone again, finish
        resumed = run_cli("eval", agents, "--resume", run_id, "--quiet", db=db)
        if resumed.returncode == 0:
            break
        assert resumed.returncode == -signal.SIGSEGV, resumed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    rows = dict(query(db, "SELECT case_id, status FROM evals_evalresult"))
    assert rows == {**{f"s{i}": "passed" for i in range(12) if i != 7}, "s7": "errored"}


# -- bh-15: a killed run is shown interrupted within seconds, by whoever reads it ----------------


def _member_token(db: Path) -> str:
    assert run_cli("demo_users", db=db).returncode == 0
    out = run_cli("token", "create", "--user", "member", db=db)
    return next(word for word in out.stdout.split() if word.startswith("esk_"))


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _http(method: str, url: str, token: str, payload: dict | None = None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"Bearer {token}"})
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Server:
    """``evalsite serve`` on a free port with its worker, stopped with SIGTERM."""

    def __init__(self, db: Path, agents: Path, **extra: str) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = db.with_suffix(".serve.log")
        self.proc = subprocess.Popen(
            [str(EVALSITE), "serve", "--port", str(self.port)],
            cwd=ROOT,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            env=cli_env(db, EVALSITE_AGENTS_DIR=str(agents), **extra),
        )

    def wait_ready(self, token: str) -> None:
        def up() -> bool:
            try:
                return _http("GET", f"{self.base}/api/eval/sets", token)[0] == 200
            except OSError:
                assert self.proc.poll() is None, self.log.read_text()
                return False

        wait_for(up, "serve to answer")

    def run(self, run_id: str, token: str) -> dict:
        return _http("GET", f"{self.base}/api/eval/runs/{run_id}?page_size=1", token)[1]["run"]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_bh15_a_killed_cli_run_is_interrupted_on_the_api_within_seconds_and_resumes_from_the_page(tmp_path):
    db = tmp_path / "bh15.sqlite3"
    agents = REPROS / "agents"
    assert run_cli("import", str(REPROS / "bh-15-kill.jsonl"), db=db).returncode == 0
    token = _member_token(db)
    server = Server(db, agents)
    try:
        server.wait_ready(token)
        cli = start_cli(
            "eval",
            str(agents),
            "--set",
            "bh-15-kill",
            "--target",
            "slow",
            "--concurrency",
            "4",
            "--quiet",
            db=db,
            BH_SLEEP="0.2",
        )
        wait_for(lambda: (scalar(db, "SELECT count(*) FROM evals_evalresult") or 0) >= 8, "some finished cases")
        ((run_id,),) = query(db, "SELECT id FROM evals_evalrun")
        cli.kill()
        cli.wait()
        run = wait_for(
            lambda: (r := server.run(run_id, token))["status"] != "running" and r, "the API to show the run ended"
        )
        assert run["status"] == "interrupted" and f"PID {cli.pid}" in run["error"] and "in flight" in run["error"]
        # found by the portal's own check of the dead PID (no CLI started since), not by waiting out
        # the heartbeat's staleness
        assert f"(PID {cli.pid} on " in run["error"] and "ended" in run["error"], run["error"]
        assert "no heartbeat" not in run["error"], run["error"]

        # a member resumes it from the page: the remaining cases go through the task worker
        status, resumed = _http("POST", f"{server.base}/api/eval/runs/{run_id}/resume", token)
        assert status == 202, resumed
        run = wait_for(
            lambda: (r := server.run(run_id, token))["status"] not in ("queued", "running") and r,
            "the worker to finish the resumed run",
            deadline_s=120,
        )
        assert run["status"] == "finished", run
        assert (run["n_done"], run["n_passed"]) == (200, 200)
        assert query(db, "SELECT count(*), count(DISTINCT case_id) FROM evals_evalresult") == [(200, 200)]
    finally:
        server.stop()


def test_a_silent_executor_is_interrupted_by_its_stale_heartbeat_and_takes_the_run_back(tmp_path):
    """Any host: a process that stops beating (frozen, network gone) is interrupted once its
    heartbeat is stale, even though its PID exists; when it wakes up it claims the run again."""
    db = tmp_path / "stale.sqlite3"
    agents = REPROS / "agents"
    # stale after 30 missed beats: a loaded machine never misses that many while the CLI runs
    fast = {"EVALSITE_HEARTBEAT_S": "0.2", "EVALSITE_STALE_AFTER_S": "6"}
    assert run_cli("import", str(REPROS / "bh-15-kill.jsonl"), db=db).returncode == 0
    cli = start_cli(
        "eval",
        str(agents),
        "--set",
        "bh-15-kill",
        "--target",
        "slow",
        "--concurrency",
        "8",
        "--quiet",
        db=db,
        BH_SLEEP="0.05",
        **fast,
    )
    try:
        wait_for(lambda: (scalar(db, "SELECT count(*) FROM evals_evalresult") or 0) >= 8, "some finished cases")
        ((run_id,),) = query(db, "SELECT id FROM evals_evalrun")
        stop_outside_a_write(cli, db)

        def marked() -> bool:
            # another process checks liveness, as the sweeper of serve and of each worker does
            probe = run_cli("shell", "-c", "from apps.evals.worker.sweeper import sweep; sweep()", db=db, **fast)
            assert probe.returncode == 0, probe.stderr
            return scalar(db, "SELECT status FROM evals_evalrun") == "interrupted"

        wait_for(marked, "the stale heartbeat to interrupt the run")
        ((error,),) = query(db, "SELECT error FROM evals_evalrun")
        assert "no heartbeat from" in error and f"PID {cli.pid}" in error
    finally:
        cli.send_signal(signal.SIGCONT)
    _out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err[-2000:]
    assert query(db, "SELECT status, n_done FROM evals_evalrun WHERE id = ?", run_id) == [("finished", 200)]


def write_locked(db: Path) -> bool:
    """Whether a process holds SQLite's write lock on ``db`` now."""
    conn = sqlite3.connect(db, timeout=0)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.rollback()
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


def stop_outside_a_write(cli: subprocess.Popen[str], db: Path) -> None:
    """SIGSTOP ``cli`` at a moment it holds no write lock. A process frozen inside a write
    transaction holds SQLite's one write lock for as long as it is frozen: no other process can
    write then (marking it interrupted included), a limit of SQLite that no sweep can lift. On a
    loaded machine a stop lands inside one often; let it go on to its next result and stop again."""
    while True:
        cli.send_signal(signal.SIGSTOP)
        if not write_locked(db):
            return
        done = scalar(db, "SELECT count(*) FROM evals_evalresult") or 0
        cli.send_signal(signal.SIGCONT)
        wait_for(lambda done=done: (scalar(db, "SELECT count(*) FROM evals_evalresult") or 0) > done, "the next result")


@pytest.mark.django_db
def test_mark_stale_runs_reads_heartbeats_of_any_host():
    eval_set = make_eval_set("hb", 2)
    old = timezone.now() - timedelta(minutes=5)
    stale = EvalRun.objects.create(
        eval_set=eval_set,
        target_id="t",
        split="dev",
        status="running",
        started=old,
        executor_host="elsewhere",
        executor_pid=1,
        heartbeat_at=old,
        in_flight=["x:c1", "x:c2"],
    )
    alive = EvalRun.objects.create(
        eval_set=eval_set, target_id="t", split="dev", status="running", started=old, **executor_fields()
    )
    assert mark_stale_runs(force=True) == 1
    stale.refresh_from_db()
    alive.refresh_from_db()
    assert stale.status == "interrupted" and "no heartbeat from PID 1 on elsewhere" in stale.error
    assert alive.status == "running"


# -- resume from the page ------------------------------------------------------------------------


AGENT = """
from evalcore.discovery import target

@target(id="echo", scorers=["exact_match"])
def echo(question):
    return question
"""


@pytest.mark.django_db(transaction=True)
def test_a_member_resumes_a_cli_run_from_its_page_through_the_task_queue(tmp_path, member, viewer):
    from django.core.management import call_command

    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "echo.py").write_text(AGENT)
    cases = write_cases(tmp_path / "page.jsonl", 6)
    call_command("eval", str(folder), "--set", str(cases), "--split", "all", "--allow-test", "--quiet")
    eval_run = EvalRun.objects.get()
    assert eval_run.config["agents_dir"] == str(folder.resolve())
    # as if the CLI process died after 2 cases
    EvalResult.objects.filter(eval_run=eval_run).exclude(case_id__in=["c0000", "c0001"]).delete()
    EvalRun.objects.filter(pk=eval_run.pk).update(status="interrupted", n_done=2, n_passed=2)
    url = f"/runs/{eval_run.pk}/resume/"

    page = Client()
    page.force_login(member)
    assert b"Resume this run" in page.get(f"/runs/{eval_run.pk}/").content
    viewer_client = Client()
    viewer_client.force_login(viewer)
    assert b"Resume this run" not in viewer_client.get(f"/runs/{eval_run.pk}/").content
    assert viewer_client.post(url).status_code == 403
    assert page.get(url).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(member)
    assert strict.post(url).status_code == 403  # no CSRF token

    response = page.post(url)
    assert response.status_code == 302 and response["Location"] == f"/runs/{eval_run.pk}/"
    eval_run.refresh_from_db()
    assert eval_run.status == "queued" and eval_run.config["executor"] == "task"
    assert page.post(url).status_code == 302  # a second click is refused with a message, not queued twice
    assert DBTaskResult.objects.count() == 1

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)}
    try:
        call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    finally:  # the worker installs its own handlers: later tests get this process's back
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    eval_run.refresh_from_db()
    assert eval_run.status == "finished" and (eval_run.n_done, eval_run.n_passed) == (6, 6)
    assert EvalResult.objects.filter(eval_run=eval_run).count() == 6


# -- rs-02 (a target that kills the portal's worker): tests/apps/evals/test_supervision.py ------


# -- rs-12: two resumes of one run --------------------------------------------------------------


def test_rs12_a_second_resume_is_refused_while_the_first_is_alive(tmp_path):
    db = tmp_path / "rs12.sqlite3"
    agents = str(REPROS / "rs-00-agents")
    cases = write_cases(tmp_path / "rs12.jsonl", 400)
    common = ["--split", "all", "--quiet", "--concurrency", "1"]
    first = start_cli("eval", agents, "--set", str(cases), "--target", "sleep20", "--allow-test", *common, db=db)
    wait_for(lambda: (scalar(db, "SELECT count(*) FROM evals_evalresult") or 0) >= 5, "some finished cases")
    first.kill()
    first.wait()
    ((run_id,),) = query(db, "SELECT id FROM evals_evalrun")
    a = start_cli("eval", agents, "--resume", run_id, *common, db=db)
    wait_for(lambda: scalar(db, "SELECT executor_pid FROM evals_evalrun") == a.pid, "the first resume to claim it")
    b = run_cli("eval", agents, "--resume", run_id, *common, db=db)
    assert b.returncode == 2
    assert f"already being resumed by PID {a.pid} on" in b.stderr and len(b.stderr.strip().splitlines()) == 1
    _out, err = a.communicate(timeout=180)
    assert a.returncode == 0, err[-2000:]
    assert query(db, "SELECT status, n_done, error FROM evals_evalrun") == [("finished", 400, "")]
    assert query(db, "SELECT count(*), count(DISTINCT case_id) FROM evals_evalresult") == [(400, 400)]


# -- rs-13: database faults -----------------------------------------------------------------------


def test_rs13_a_database_deleted_under_a_run_is_exit_3(tmp_path):
    db = tmp_path / "rs13.sqlite3"
    cases = write_cases(tmp_path / "rs13.jsonl", 2000)
    cli = start_cli(
        "eval",
        str(REPROS / "rs-00-agents"),
        "--set",
        str(cases),
        "--target",
        "sleep20",
        "--split",
        "all",
        "--allow-test",
        "--quiet",
        db=db,
        EVALSITE_HEARTBEAT_S="0.2",
    )
    wait_for(lambda: (scalar(db, "SELECT count(*) FROM evals_evalresult") or 0) >= 5, "some finished cases")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    _out, err = cli.communicate(timeout=120)
    assert cli.returncode == 3, err[-2000:]
    assert f"the database file {db} was deleted or replaced during the run" in err


def test_rs13_a_file_that_is_not_a_database_is_one_line_exit_2_for_eval_and_serve(tmp_path):
    bad = tmp_path / "notadb.sqlite3"
    bad.write_text("not a database\n")
    cases = write_cases(tmp_path / "c.jsonl", 3)
    for args in (
        ["eval", str(REPROS / "rs-00-agents"), "--set", str(cases), "--target", "echo"],
        ["import", str(cases)],
        ["serve", "--port", str(_free_port())],
    ):
        out = run_cli(*args, db=bad, timeout=60)
        assert out.returncode == 2, (args, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and str(bad) in lines[0] and "file is not a database" in lines[0], out.stderr


# -- bh-17: several processes on a database that does not exist yet ------------------------------


def test_bh17_four_runs_at_once_on_a_fresh_database_all_succeed(tmp_path):
    db = tmp_path / "fresh" / "bh17.sqlite3"
    procs = [
        start_cli(
            "eval",
            str(REPROS / "agents"),
            "--set",
            str(REPROS / "bh-17-concurrent.jsonl"),
            "--target",
            "slow",
            "--variant",
            f"v{i}",
            "--quiet",
            db=db,
            BH_SLEEP="0",
        )
        for i in range(4)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-2000:]
    assert query(db, "SELECT count(*) FROM evals_evalrun WHERE status = 'finished'") == [(4,)]


def test_mark_stale_runs_is_cheap_enough_for_every_sweep(django_assert_max_num_queries, db):
    make_eval_set("cheap", 1)
    mark_stale_runs(force=True)
    with django_assert_max_num_queries(0):
        mark_stale_runs()  # throttled: at most one query a second per process
    with django_assert_max_num_queries(1):
        mark_stale_runs(force=True)  # nothing running: one query


@pytest.mark.django_db(transaction=True)
def test_every_running_run_has_an_executor_and_a_heartbeat(tmp_path):
    """Runs created running (the CLI's) and re-scored runs beat too: a reader never takes
    a live one for dead."""
    from django.core.management import call_command

    from apps.evals.runs.prepare import prepare_eval_run
    from evalcore.discovery import TargetSpec

    eval_set = make_eval_set("beat", 2)
    spec = TargetSpec(id="t", target=lambda x: x, scorers=["exact_match"])
    row = prepare_eval_run(eval_set=eval_set, spec=spec, variant=None, split="all", allow_test=True, status="running")
    assert (row.executor_pid, row.status) == (os.getpid(), "running") and row.heartbeat_at is not None

    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "echo.py").write_text(AGENT)
    cases = write_cases(tmp_path / "b.jsonl", 3)
    call_command("eval", str(folder), "--set", str(cases), "--split", "all", "--allow-test", "--quiet")
    source = EvalRun.objects.get(target_id="echo")
    call_command("rescore", source.pk, "--scorer", "exact_match")
    rescored = EvalRun.objects.get(source_eval_run=source)
    assert rescored.status == "finished" and rescored.executor_pid == os.getpid() and rescored.heartbeat_at


def test_a_worker_on_a_new_database_file_migrates_it_first(tmp_path):
    """`evalsite worker --db NEW` ended in a 72-line traceback (no such table: evals_taskworker);
    eval and import migrate a new file by themselves, and so does the worker now."""
    db = tmp_path / "fresh.sqlite3"
    done = run_cli("worker", "--batch", db=db)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert scalar(db, "SELECT COUNT(*) FROM evals_taskworker") == 1


def test_os_exit_under_the_progress_bar_shows_the_cursor_again(tmp_path):
    """The live bar hides the terminal's cursor and ``os._exit`` skips rich's clean-up: the cursor
    stayed hidden (the code was written through rich's stdout proxy, which drops it)."""
    import os
    import pty
    import select

    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "exits.py").write_text(ASYNC_EXIT_AGENT)
    cases = tmp_path / "boom.jsonl"
    cases.write_text("".join(json.dumps({"id": i, "input": "boom" if i == "b" else i}) + "\n" for i in "abc"))
    db = tmp_path / "tty.sqlite3"
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [str(EVALSITE), "eval", str(agents), "--set", str(cases), "--split", "all", "--allow-test"],
        cwd=ROOT,
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE,
        env={**cli_env(db), "TERM": "xterm", "COLUMNS": "80"},
    )
    os.close(slave)
    shown = b""
    while True:  # read until the process is gone and its terminal output drained (EOF / EIO)
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        elif process.poll() is not None:
            break
    os.close(master)
    process.wait(timeout=60)
    assert process.returncode == 3
    assert b"\x1b[?25l" in shown, shown  # the bar hid it
    assert shown.rfind(b"\x1b[?25h") > shown.find(b"\x1b[?25l"), shown[-500:]
