"""Runs started from the API execute in the task worker (``db_worker``), end to end."""

from __future__ import annotations

import json
import subprocess

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps.agents.registry import load_target
from apps.evals.models import EvalRun
from apps.evals.results.executor import executor_fields
from apps.evals.runs.config import RunConfig
from apps.evals.runs.prepare import prepare_eval_run
from apps.evals.worker.tasks import enqueue_eval_run, mark_orphaned_runs
from tests.apps.evals.test_api import write_agents
from tests.apps.evals.test_consumers import roles  # noqa: F401 - autouse: the groups after each flush
from tests.apps.factories import make_eval_set
from tests.support.databases import subprocess_db_env
from tests.support.signals import default_signals_in_child

# The run's result writer is a thread with its own connection: it must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agents_dir(tmp_path, settings):
    settings.EVALSITE_AGENTS_DIR = write_agents(tmp_path / "agents")
    return settings.EVALSITE_AGENTS_DIR


def work_off_queue() -> None:
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)


def start(user, eval_set, **extra) -> dict:
    client = Client()
    client.force_login(user)
    payload = {"set_id": eval_set.pk, "target_id": "adder", "split": "train", **extra}
    response = client.post("/api/eval/runs", payload, content_type="application/json")
    assert response.status_code == 201, response.content
    return json.loads(response.content)


def test_run_started_from_the_api_executes_in_the_worker(member, agents_dir):
    eval_set = make_eval_set("arith", 9)
    right = start(member, eval_set, variant="right")
    zero = start(member, eval_set, variant="zero")
    work_off_queue()
    run_right = EvalRun.objects.get(pk=right["id"])
    assert run_right.status == "finished"
    assert (run_right.n_total, run_right.n_done, run_right.n_passed) == (3, 3, 3)
    assert sorted(run_right.results.values_list("case_id", flat=True)) == ["c0", "c3", "c6"]
    assert run_right.summary  # the report is stored
    run_zero = EvalRun.objects.get(pk=zero["id"])
    # c0 asks "0 + 0": the constant answer "0" is right once
    assert (run_zero.status, run_zero.n_done, run_zero.n_passed, run_zero.n_failed) == ("finished", 3, 1, 2)
    task = DBTaskResult.objects.get(id=right["task_id"])
    assert task.status == "SUCCESSFUL"
    assert task.return_value == {"eval_run_id": run_right.pk, "status": "finished", "n_done": 3, "n_passed": 3}


def test_a_task_delivered_twice_does_not_run_the_cases_again(member, agents_dir):
    eval_set = make_eval_set("arith", 3)
    started = start(member, eval_set, variant="right")
    work_off_queue()
    eval_run = EvalRun.objects.get(pk=started["id"])
    enqueue_eval_run(eval_run)
    work_off_queue()
    eval_run.refresh_from_db()
    assert eval_run.n_done == 1 and eval_run.results.count() == 1


def test_a_target_that_vanished_fails_the_run_with_the_reason(member, agents_dir):
    eval_set = make_eval_set("arith", 3)
    started = start(member, eval_set, variant="right")
    (agents_dir / "tiny.py").unlink()
    work_off_queue()
    eval_run = EvalRun.objects.get(pk=started["id"])
    assert eval_run.status == "failed"
    assert "no target 'adder'" in eval_run.error
    assert DBTaskResult.objects.get(id=started["task_id"]).status == "FAILED"


def test_runs_of_a_dead_worker_are_marked_interrupted(member, agents_dir):
    eval_set = make_eval_set("arith", 3)
    spec = load_target("adder", agents_dir)
    task_run = prepare_eval_run(
        eval_set=eval_set,
        spec=spec,
        variant="right",
        split="train",
        allow_test=False,
        config=RunConfig(executor="task"),
    )
    task_id = enqueue_eval_run(task_run)
    # the worker (a process of this host) claimed it and died mid-run, its heartbeat still fresh
    dead = subprocess.Popen(["true"])
    dead.wait()
    DBTaskResult.objects.filter(id=task_id).update(status="RUNNING", started_at=timezone.now())
    EvalRun.objects.filter(pk=task_run.pk).update(
        status="running", started=timezone.now(), in_flight=[f"{task_run.pk}:c1"], **executor_fields()
    )
    EvalRun.objects.filter(pk=task_run.pk).update(executor_pid=dead.pid)
    cli_run = prepare_eval_run(
        eval_set=eval_set, spec=spec, variant="zero", split="train", allow_test=False, status="running"
    )
    assert mark_orphaned_runs() == 1
    task_run.refresh_from_db()
    cli_run.refresh_from_db()
    assert task_run.status == "interrupted"
    assert f"PID {dead.pid}" in task_run.error and "ended" in task_run.error and "in flight: c1" in task_run.error
    assert cli_run.status == "running"  # its process (this one) is alive and its heartbeat fresh
    assert DBTaskResult.objects.get(id=task_id).status == "FAILED"


# -- `evalsite serve`: daphne + the worker, as a user runs it ------------------------------------

SETUP_SCRIPT = """
from django.contrib.auth.models import Group, User
from apps.core.auth import create_api_token
from apps.evals.sets.cases import import_cases
from evalcore.types import Case
user = User.objects.create_user("m", password="pw-123456789")
user.groups.add(Group.objects.get(name="member"))
cases = [
    Case(id=f"c{i}", input={"question": f"what is {i} + {i}?"}, expected=str(2 * i), split="dev") for i in range(4)
]
print(import_cases(name="arith", cases=cases).eval_set.pk)
print(create_api_token(user=user)[1])
"""


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


@pytest.mark.django_db(transaction=False)
def test_serve_runs_a_browser_started_run_and_stops_cleanly(tmp_path):
    import os
    import subprocess
    import sys
    import time

    from django.conf import settings

    env = {
        **os.environ,
        **subprocess_db_env(tmp_path / "serve.sqlite3"),
        "EVALSITE_AGENTS_DIR": str(write_agents(tmp_path / "agents")),
        "DJANGO_SETTINGS_MODULE": "evalsite.settings",
    }
    manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, timeout=120)
    setup = subprocess.run(
        [*manage, "shell", "-c", SETUP_SCRIPT], env=env, check=True, timeout=60, capture_output=True, text=True
    )
    set_id, token = setup.stdout.split()[-2:]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [*manage, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_signals_in_child,  # the test presses Ctrl-C: not ignored under nohup / in CI
    )
    try:
        # generous deadlines: they only bound a broken run, the test waits on the state itself
        deadline = time.monotonic() + 120
        while True:
            try:
                status, _ = _http("GET", f"{base}/api/eval/sets", token)
                break
            except OSError:
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
        assert status == 200
        status, created = _http(
            "POST", f"{base}/api/eval/runs", token, {"set_id": int(set_id), "target_id": "adder", "variant": "right"}
        )
        assert status == 201, created
        while True:
            _, detail = _http("GET", f"{base}/api/eval/runs/{created['id']}", token)
            if detail["run"]["status"] not in ("queued", "running"):
                break
            assert time.monotonic() < deadline + 120, "the worker did not run the eval"
            time.sleep(0.3)
        assert detail["run"]["status"] == "finished"
        assert (detail["run"]["n_done"], detail["run"]["n_passed"]) == (4, 4)
        children = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 1  # the worker
    finally:
        server.send_signal(2)  # Ctrl-C
        output, _ = server.communicate(timeout=120)
    assert server.returncode == 0, output
    assert f"serving at http://127.0.0.1:{port}/" in output and "Log in at" in output
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
