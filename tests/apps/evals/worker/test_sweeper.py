"""The clocked sweeper (issue 24 §3): what reads no longer do, done off the request path by a
thread of ``serve``'s supervisor and of each worker. A dead run becomes resumable, a lapsed shard
is delivered again, a finished run is indexed; a real ``evalsite worker`` does it with no page
open. Every wait is on a state, never a fixed sleep."""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.evals.models import EvalRun, EvalRunStatus, SearchIndexState
from apps.evals.models.shards import EvalShard, ShardStatus
from apps.evals.results.executor import executor_fields
from apps.evals.worker.sweeper import Sweeper, lagging_runs, sweep
from tests.apps.evals.test_liveness import EVALSITE, ROOT, cli_env, run_cli, scalar, wait_for
from tests.apps.factories import make_eval_run, make_eval_set


def _dead_run(eval_set, **fields) -> EvalRun:
    old = timezone.now() - timedelta(minutes=5)
    return EvalRun.objects.create(
        eval_set=eval_set,
        target_id="t",
        split="dev",
        status=EvalRunStatus.RUNNING,
        started=old,
        executor_host="elsewhere",
        executor_pid=7,
        heartbeat_at=old,
        **fields,
    )


@pytest.mark.django_db
def test_one_sweep_marks_dead_runs_redelivers_lapsed_shards_and_indexes_one_finished_run():
    eval_set = make_eval_set("sweep", 4, splits=("dev",))
    dead = _dead_run(eval_set, in_flight=["x:c2"])
    alive = EvalRun.objects.create(
        eval_set=eval_set, target_id="t", split="dev", status="running", started=timezone.now(), **executor_fields()
    )
    finished = make_eval_run(eval_set, [True, False], outputs=["one", "two"])
    sharded = EvalRun.objects.create(eval_set=eval_set, target_id="t", status="running", n_shards=1, n_total=4)
    shard = EvalShard.objects.create(
        eval_run=sharded,
        index=0,
        case_ids=["c0"],
        status=ShardStatus.RUNNING,
        token="old",
        lease_until=timezone.now() - timedelta(seconds=1),
    )
    assert lagging_runs() == [finished.pk]  # the live runs are not indexed while they run

    report = sweep()

    assert (report.interrupted, report.redelivered, report.indexed) == (1, 1, finished.pk)
    dead.refresh_from_db()
    assert dead.status == "interrupted" and "no heartbeat from PID 7 on elsewhere" in dead.error
    assert "case(s) in flight: x:c2" in dead.error
    assert EvalRun.objects.get(pk=alive.pk).status == "running"
    shard.refresh_from_db()
    assert (shard.status, shard.token != "old") == (ShardStatus.QUEUED, True)
    assert SearchIndexState.objects.get(eval_run=finished).indexed_upto > 0
    assert lagging_runs() == []
    again = sweep()  # nothing left: a sweep with nothing to do changes nothing
    assert (again.interrupted, again.redelivered, again.indexed) == (0, 0, None)


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_thread_sweeps_on_its_clock_until_stopped():
    eval_set = make_eval_set("clock", 2, splits=("dev",))
    first = _dead_run(eval_set)
    sweeper = Sweeper(every_s=0.05)
    sweeper.start()
    try:
        wait_for(lambda: EvalRun.objects.get(pk=first.pk).status == "interrupted", "the first sweep")
        second = _dead_run(eval_set)  # died after the first sweep: a later tick finds it
        wait_for(lambda: EvalRun.objects.get(pk=second.pk).status == "interrupted", "a later sweep")
    finally:
        sweeper.stop()
    assert not sweeper._thread.is_alive()
    third = _dead_run(eval_set)
    assert sweeper.tick() is not None  # a tick is a step tests and callers may run themselves
    assert EvalRun.objects.get(pk=third.pk).status == "interrupted"


SETUP = """
from datetime import timedelta
from django.utils import timezone
from apps.evals.models import EvalRun
from tests.apps.factories import make_eval_run, make_eval_set
eval_set = make_eval_set("w", 3, splits=("dev",))
old = timezone.now() - timedelta(minutes=5)
EvalRun.objects.create(id="deadrun", eval_set=eval_set, target_id="t", split="dev", status="running",
    started=old, executor_host="elsewhere", executor_pid=9, heartbeat_at=old)
make_eval_run(eval_set, [True, True], outputs=["alpha", "beta"])
"""


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="a SQLite file of its own")
def test_a_task_worker_alone_sweeps_with_no_page_read(tmp_path):
    """``evalsite worker`` started by hand (no ``serve``, nobody reading a page): the dead run
    becomes interrupted (so it can be resumed) and the finished run is indexed."""
    db = tmp_path / "sweep.sqlite3"
    assert run_cli("migrate", "--verbosity", "0", db=db).returncode == 0
    setup = run_cli("shell", "-c", SETUP, db=db, PYTHONPATH=str(ROOT))  # the factories of tests/
    assert setup.returncode == 0, setup.stderr
    worker = subprocess.Popen(
        [str(EVALSITE), "worker", "--verbosity", "0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(db, EVALSITE_SWEEP_S="0.2"),
    )
    try:
        wait_for(
            lambda: scalar(db, "SELECT status FROM evals_evalrun WHERE id = 'deadrun'") == "interrupted",
            "the worker's sweep to interrupt the dead run",
        )
        wait_for(
            lambda: (scalar(db, "SELECT indexed_upto FROM evals_searchindexstate") or 0) > 0,
            "the worker's sweep to index the finished run",
        )
        error = scalar(db, "SELECT error FROM evals_evalrun WHERE id = 'deadrun'")
        assert "no heartbeat from PID 9 on elsewhere" in error
    finally:
        worker.send_signal(signal.SIGTERM)
        _out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err[-2000:]
