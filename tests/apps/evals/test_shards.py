"""Sharded runs in one process, on the test database (SQLite, or PostgreSQL under
scripts/test-postgres.sh): shard split and merge, idempotent writes, lease re-delivery running
only the missing cases, a case that ended its process errored on re-delivery, cancel, resume.
Shards are executed by calling the queue job's body (``run_shard``) directly; the real queue
(RQ on Redis, workers on PostgreSQL) is exercised by ``tests/apps/evals/test_cluster.py``."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apps.agents.registry import load_target
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, EvalShard, ShardStatus
from apps.evals.results.batches import recount
from apps.evals.runs.config import RunConfig
from apps.evals.runs.prepare import prepare_eval_run
from apps.evals.worker.queue import resume_sharded, start_sharded_run
from apps.evals.worker.shard_run import record_shard_exit, run_shard
from apps.evals.worker.shards import cancel_run, claim_shard, finish_shard, plan_shards, requeue_expired, split_ids
from evalcore.interrupts import two_stage_ctrl_c
from tests.apps.evals.test_api import write_agents
from tests.apps.evals.test_consumers import roles  # noqa: F401 - autouse: the groups after each flush
from tests.apps.evals.test_live_redis import redis_url  # noqa: F401 - a throwaway redis-server
from tests.apps.factories import make_eval_set

# the result writer is a thread with its own connection: it must see committed rows
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agents_dir(tmp_path, settings):
    settings.EVALSITE_AGENTS_DIR = write_agents(tmp_path / "agents")
    return settings.EVALSITE_AGENTS_DIR


def new_run(eval_set, variant="right", **config) -> EvalRun:
    return prepare_eval_run(
        eval_set=eval_set,
        spec=load_target("adder"),
        variant=variant,
        split="all",
        allow_test=True,
        config=RunConfig.parse(config),
    )


def shards_of(eval_run) -> list[EvalShard]:
    return list(EvalShard.objects.filter(eval_run=eval_run).order_by("index"))


def test_split_ids_keeps_order_and_covers_every_id_once():
    ids = [f"c{i}" for i in range(11)]
    chunks = split_ids(ids, 4)
    assert [len(c) for c in chunks] == [4, 4, 3]
    assert [i for chunk in chunks for i in chunk] == ids
    assert split_ids([], 4) == []
    with pytest.raises(ValueError):
        split_ids(ids, 0)


def test_a_long_run_ends_in_smaller_shards_so_the_workers_end_together():
    from apps.evals.worker.shards import shard_chunks

    ids = [f"c{i}" for i in range(1000)]
    chunks = shard_chunks(ids, 50)
    assert [len(c) for c in chunks] == [50] * 18 + [10] * 10  # the last tenth in fifths of a shard
    assert [i for chunk in chunks for i in chunk] == ids
    assert [len(c) for c in shard_chunks(ids[:399], 50)] == [50] * 7 + [49]  # under 8 shards: as before
    assert [len(c) for c in shard_chunks(ids, 4)] == [4] * 250  # shards too small to split
    with pytest.raises(ValueError):
        shard_chunks(ids, 0)


def test_a_run_split_into_shards_merges_into_one_report(agents_dir):
    eval_set = make_eval_set("arith", 10)
    eval_run = new_run(eval_set)
    pairs = plan_shards(eval_run, size=4)
    assert [len(s.case_ids) for s in shards_of(eval_run)] == [4, 4, 2]
    assert eval_run.status == "queued" and eval_run.n_shards == 3
    for shard_id, token in reversed(pairs):  # any order: the last one to end finishes the run
        assert run_shard(shard_id, token)["status"] == "done"
    eval_run.refresh_from_db()
    assert eval_run.status == "finished"
    assert (eval_run.n_total, eval_run.n_done, eval_run.n_passed) == (10, 10, 10)
    assert eval_run.summary["n"] == 10 and eval_run.summary["pass_rate"] == 1.0
    assert sorted(eval_run.results.values_list("case_id", flat=True)) == sorted(f"c{i}" for i in range(10))


def test_a_stale_or_duplicate_delivery_does_nothing(agents_dir):
    eval_set = make_eval_set("arith", 4)
    eval_run = new_run(eval_set)
    [(shard_id, token)] = plan_shards(eval_run, size=10)
    assert run_shard(shard_id, "not-the-token")["status"] == "skipped"
    assert run_shard(shard_id, token)["status"] == "done"
    assert run_shard(shard_id, token)["status"] == "skipped"  # delivered twice
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done, eval_run.results.count()) == ("finished", 4, 4)


def test_results_written_twice_are_stored_once_and_counted_once(agents_dir):
    eval_set = make_eval_set("arith", 6)
    eval_run = new_run(eval_set)
    [(shard_id, token)] = plan_shards(eval_run, size=10)
    assert run_shard(shard_id, token)["status"] == "done"
    # a presumed-dead worker that was only slow writes the same shard again
    EvalShard.objects.filter(pk=shard_id).update(status=ShardStatus.QUEUED, token="again")
    EvalResult.objects.filter(eval_run=eval_run, case_id__in=["c0", "c1"]).delete()
    recount(eval_run.pk)
    EvalRun.objects.filter(pk=eval_run.pk).update(status=EvalRunStatus.RUNNING)
    assert run_shard(shard_id, "again")["status"] == "done"
    eval_run.refresh_from_db()
    assert eval_run.results.count() == 6 and eval_run.n_done == 6 and eval_run.n_passed == 6


def test_a_lapsed_lease_is_delivered_again_and_runs_only_the_missing_cases(agents_dir):
    eval_set = make_eval_set("arith", 8)
    eval_run = new_run(eval_set)
    [(shard_id, token)] = plan_shards(eval_run, size=8)
    # a worker claimed the shard, stored c0..c4, had c5 in flight, and died (no heartbeat)
    assert claim_shard(shard_id, token, "gone-host:1") is not None
    done_ids = ["c0", "c1", "c2", "c3", "c4"]  # stored by a real delivery of a smaller shard
    partial = EvalShard.objects.create(eval_run=eval_run, index=99, case_ids=done_ids, token="p")
    assert run_shard(partial.pk, "p")["status"] == "done"
    partial.delete()
    stored_before = dict(EvalResult.objects.filter(eval_run=eval_run).values_list("case_id", "id"))
    EvalShard.objects.filter(pk=shard_id).update(
        in_flight=[f"{eval_run.id}:c5"], lease_until=timezone.now() - timedelta(seconds=1)
    )
    [(again, new_token)] = requeue_expired()
    assert again == shard_id and new_token != token
    assert requeue_expired() == []  # taken once
    assert run_shard(shard_id, token)["status"] == "skipped"  # the dead worker's delivery is stale
    assert run_shard(shard_id, new_token)["status"] == "done"
    eval_run.refresh_from_db()
    assert eval_run.status == "finished" and eval_run.n_done == 8 and eval_run.results.count() == 8
    after = dict(EvalResult.objects.filter(eval_run=eval_run).values_list("case_id", "id"))
    assert all(after[c] == stored_before[c] for c in done_ids)  # not run again
    shard = EvalShard.objects.get(pk=shard_id)
    assert shard.attempts == 2 and shard.crash_suspects == {f"{eval_run.id}:c5": 1}


def test_a_case_that_ended_its_process_is_errored_on_redelivery(agents_dir):
    eval_set = make_eval_set("arith", 5)
    eval_run = new_run(eval_set)
    [(shard_id, token)] = plan_shards(eval_run, size=5)
    assert claim_shard(shard_id, token, "host:1") is not None
    culprit = f"{eval_run.id}:c2"
    EvalShard.objects.filter(pk=shard_id).update(in_flight=[culprit, f"{eval_run.id}:c3"])
    record_shard_exit(shard_id, token, culprit)  # what the guard records before os._exit ends the process
    [(_, new_token)] = requeue_expired()  # the lease was ended at once: delivered again now
    assert run_shard(shard_id, new_token)["status"] == "done"
    eval_run.refresh_from_db()
    assert eval_run.status == "finished" and eval_run.n_done == 5
    errored = eval_run.results.get(case_id="c2")
    assert errored.status == "errored" and "process ended" in errored.run.error["message"]
    assert eval_run.results.get(case_id="c3").status == "passed"  # in flight too, but run again


def test_cancel_drops_the_remaining_shards_and_keeps_the_finished_cases_then_resume(agents_dir, member):
    eval_set = make_eval_set("arith", 9)
    eval_run = new_run(eval_set)
    pairs = plan_shards(eval_run, size=3)
    assert run_shard(*pairs[0])["status"] == "done"
    client = Client()
    client.force_login(member)
    response = client.post(f"/runs/{eval_run.pk}/cancel/")
    assert response.status_code == 302
    eval_run.refresh_from_db()
    assert eval_run.status == "interrupted" and "cancelled by member" in eval_run.error
    assert eval_run.n_done == 3
    assert [s.status for s in shards_of(eval_run)] == ["done", "cancelled", "cancelled"]
    assert run_shard(*pairs[1])["status"] == "skipped"  # a delivery already in the queue is dropped
    assert eval_run.results.count() == 3
    # resume from the portal: the cancelled shards go back to the queue (the database task worker)
    assert client.post(f"/runs/{eval_run.pk}/resume/").status_code == 302
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done, eval_run.results.count()) == ("finished", 9, 9)


def test_a_worker_holding_a_cancelled_shard_stops_at_its_heartbeat(agents_dir):
    eval_set = make_eval_set("arith", 3)
    eval_run = new_run(eval_set)
    [(shard_id, token)] = plan_shards(eval_run, size=3)
    assert claim_shard(shard_id, token, "host:1") is not None
    cancel_run(eval_run)
    assert finish_shard(shard_id, token) is False  # its token is no longer current
    assert EvalRun.objects.get(pk=eval_run.pk).status == "interrupted"


def test_portal_runs_are_sharded_when_configured(agents_dir, member, settings):
    settings.EVALSITE_SHARDED_RUNS = True
    settings.EVALSITE_SHARD_SIZE = 2
    eval_set = make_eval_set("arith", 5)
    client = Client()
    client.force_login(member)
    payload = {"set_id": eval_set.pk, "target_id": "adder", "variant": "right", "split": "all", "allow_test": True}
    response = client.post("/api/eval/runs", payload, content_type="application/json")
    assert response.status_code == 201, response.content
    eval_run = EvalRun.objects.get(pk=response.json()["id"])
    assert eval_run.n_shards == 3
    page = client.get(f"/runs/{eval_run.pk}/")
    assert b"3 shards: 0 done" in page.content and b"Cancel this run" in page.content
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done, eval_run.n_passed) == ("finished", 5, 5)
    cancel = client.post(f"/api/eval/runs/{eval_run.pk}/cancel", content_type="application/json")
    assert cancel.status_code == 409  # finished: nothing to cancel


def test_resume_of_a_sharded_run_whose_shards_were_all_done_only_finishes_it(agents_dir):
    eval_set = make_eval_set("arith", 2)
    eval_run = new_run(eval_set)
    start_sharded_run(eval_run, size=5)
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    EvalRun.objects.filter(pk=eval_run.pk).update(status=EvalRunStatus.FAILED)
    eval_run.refresh_from_db()
    assert resume_sharded(eval_run) == []
    eval_run.refresh_from_db()
    assert eval_run.status == "finished"


def test_the_live_summary_of_a_sharded_run_shows_its_shards_and_heartbeat(agents_dir):
    from apps.evals.views.live import fetch_after, render_messages

    eval_set = make_eval_set("arith", 6)
    eval_run = new_run(eval_set)
    pairs = plan_shards(eval_run, size=2)
    assert run_shard(*pairs[0])["status"] == "done"
    frames = render_messages(fetch_after(eval_run.pk, 0, latest=20), final=False)
    summary = frames[-1]
    assert "3 shards: 1 done · 0 running on 0 workers · 2 queued" in summary
    assert "last heartbeat" in summary and ">2<" in summary  # 2 cases done


def test_a_queued_shard_whose_rq_job_was_lost_is_delivered_again(agents_dir, settings, redis_url, monkeypatch):  # noqa: F811
    from rq import SimpleWorker

    from apps.evals.worker.queue import reap, rq_queue

    settings.EVALSITE_QUEUE = "rq"
    settings.EVALSITE_SHARD_LEASE_S = 0.001  # "queued for longer than a lease" at once
    monkeypatch.setenv("EVALSITE_REDIS_URL", redis_url)
    eval_set = make_eval_set("arith", 3)
    eval_run = new_run(eval_set)
    [job_id] = start_sharded_run(eval_run, size=10)
    queue = rq_queue()
    assert queue.job_ids == [job_id]
    assert reap() == 0  # its job is waiting in RQ: not lost
    queue.empty()  # e.g. a Redis restarted without its data
    assert reap() == 1
    [shard] = shards_of(eval_run)
    assert queue.job_ids == [f"evalsite-shard-{shard.pk}-{shard.token}"] != [job_id]
    SimpleWorker([queue], connection=queue.connection, serializer=queue.serializer).work(burst=True)
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done) == ("finished", 3)


@pytest.mark.parametrize(
    ("when", "signame"), [("enqueueing", "SIGINT"), ("waiting", "SIGINT"), ("enqueueing", "SIGTERM")]
)
def test_ctrl_c_in_the_cli_cancels_a_queued_run_also_while_its_shards_are_enqueued(
    agents_dir, monkeypatch, when, signame
):
    """`evalsite eval --executor queue`: the first Ctrl-C cancels the run wherever it lands. It
    once escaped as an exception from the middle of the enqueueing, leaving the run queued with
    no one to cancel it (a CI failure: the cluster test waited for its shards forever)."""
    import os
    import signal

    from django_tasks_db.models import DBTaskResult
    from rich.console import Console

    from apps.evals.cli import queued
    from apps.evals.worker import queue
    from evalcore.interrupts import two_stage_ctrl_c

    def interrupting(real):
        def call(*args, **kwargs):
            if not calls:
                os.kill(os.getpid(), getattr(signal, signame))  # the user's Ctrl-C, in the middle of this call
            calls.append(args)
            return real(*args, **kwargs)

        return call

    calls: list[tuple] = []
    if when == "enqueueing":
        monkeypatch.setattr(queue, "enqueue_shard", interrupting(queue.enqueue_shard))
    else:
        monkeypatch.setattr(queued, "reap", interrupting(queued.reap))
    eval_run = new_run(make_eval_set("arith", 6), executor="queue", shard_size=2)
    with two_stage_ctrl_c(), pytest.raises(KeyboardInterrupt):
        queued.run_on_queue(eval_run, Console(quiet=True), quiet=True, resume=False)
    eval_run.refresh_from_db()
    said = "Ctrl-C" if signame == "SIGINT" else "SIGTERM"
    assert eval_run.status == "interrupted" and f"cancelled by {said} in the CLI" in eval_run.error
    assert [s.status for s in shards_of(eval_run)] == ["cancelled"] * 3
    assert DBTaskResult.objects.count() == 3  # every shard was enqueued whole before the cancel
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done) == ("interrupted", 0)  # the queued jobs run nothing


def test_a_queued_run_no_worker_takes_says_how_to_start_one(agents_dir, monkeypatch, capfd):
    """`evalsite eval --executor queue` with no worker running used to wait in silence, forever.
    After NO_WORKER_HINT_S it says, once, on stderr (also with --quiet), that no worker runs and
    which command starts one; with a live worker, that the run waits its turn."""
    import os
    import socket

    from rich.console import Console

    from apps.evals.cli import queued
    from apps.evals.models import TaskWorker

    monkeypatch.setattr(queued, "NO_WORKER_HINT_S", 0.0)
    polls: list[int] = []

    def reap_then_stop_on_the_third_poll():
        polls.append(1)
        if len(polls) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # the user gives up: the run is cancelled
        return 0

    monkeypatch.setattr(queued, "reap", reap_then_stop_on_the_third_poll)
    monkeypatch.setattr(queued, "lease_s", lambda: 0.0)  # reap on every poll
    eval_run = new_run(make_eval_set("arith", 4), executor="queue", shard_size=2)
    with two_stage_ctrl_c(), pytest.raises(KeyboardInterrupt):
        queued.run_on_queue(eval_run, Console(quiet=True), quiet=True, resume=False)
    err = capfd.readouterr().err
    assert err.count("no worker has taken a shard") == 1, err
    assert f"eval run {eval_run.id}" in err and "no worker is running" in err
    assert "`evalsite worker`" in err

    now = timezone.now()
    TaskWorker.objects.create(id="w1", host=socket.gethostname(), pid=os.getpid(), started=now, heartbeat_at=now)
    hint = queued.no_worker_hint(eval_run.id)
    assert "1 worker(s) alive, busy with earlier work: the run waits its turn" in hint
    TaskWorker.objects.filter(pk="w1").update(stopped=now)
    assert "no worker is running" in queued.no_worker_hint(eval_run.id)


def test_a_running_queued_run_whose_worker_died_says_so_and_the_command_names_the_database(
    agents_dir, monkeypatch, capfd
):
    """A worker that died after taking a shard left the CLI waiting with only "delivering it
    again" lines; and the hint's `evalsite worker` lacked the `--db` the run was started with (a
    worker started as printed served another database)."""
    import threading

    from rich.console import Console

    from apps.evals.cli import queued

    monkeypatch.setattr(queued, "NO_WORKER_HINT_S", 0.0)
    monkeypatch.setenv("EVALSITE_DB", "/data/my runs.sqlite3")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    eval_run = new_run(make_eval_set("arith", 4), executor="queue", shard_size=2)
    plan_shards(eval_run)
    EvalRun.objects.filter(pk=eval_run.pk).update(status=EvalRunStatus.RUNNING)  # its worker took a shard, then died
    stop = threading.Event()
    polls: list[int] = []

    def reap_then_stop_on_the_fourth_poll():
        polls.append(1)
        if len(polls) == 4:
            stop.set()
        return 0

    monkeypatch.setattr(queued, "reap", reap_then_stop_on_the_fourth_poll)
    monkeypatch.setattr(queued, "lease_s", lambda: 0.0)
    queued._wait(eval_run, Console(quiet=True), quiet=True, stop=stop)
    err = capfd.readouterr().err
    assert err.count("is waiting for its shards to be delivered again: no worker is running") == 1, err
    assert "`evalsite worker --db '/data/my runs.sqlite3'`" in err, err
    monkeypatch.setenv("DATABASE_URL", "postgres://x@localhost/db")
    assert "with this DATABASE_URL" in queued.worker_command()


MIXED_AGENT = """
from evalcore.discovery import target


@target(id="mixed", scorers=["exact_match", "contains"])
def mixed(question):
    n = int(question["question"].split()[2])
    if n % 5 == 4:
        raise RuntimeError(f"case {n} fails")
    return str(2 * n) if n % 3 else "wrong"
"""


def test_the_report_rebuilt_from_the_database_is_the_engines_own(tmp_path, settings):
    """A sharded run's summary (and a resumed one's) is rebuilt from the stored rows by
    ``report_from_db``: it must equal the report the engine built in memory for the same results
    (passes, failures, target errors, both scorers, splits, repeats, tokens)."""
    from apps.evals.results.readback import report_from_db
    from apps.evals.runs.execution import execute_eval_run
    from evalcore.serial import to_record

    folder = tmp_path / "mixed-agents"
    folder.mkdir()
    (folder / "mixed.py").write_text(MIXED_AGENT)
    settings.EVALSITE_AGENTS_DIR = folder
    spec = load_target("mixed")
    eval_run = prepare_eval_run(
        eval_set=make_eval_set("mixed", 12),
        spec=spec,
        variant=None,
        split="all",
        allow_test=True,
        config=RunConfig.parse({"repeat": 2}),
    )
    execute_eval_run(eval_run, spec)
    eval_run.refresh_from_db()
    rebuilt = to_record(report_from_db(eval_run.id), json_mode=True)
    stored = {key: eval_run.summary[key] for key in rebuilt if key != "elapsed_s"}
    assert {key: value for key, value in rebuilt.items() if key != "elapsed_s"} == stored
    assert (rebuilt["n"], rebuilt["errored"], rebuilt["target_errors"]) == (24, 4, 4)
    assert 0 < rebuilt["passed"] < 20 and set(rebuilt["splits"]) == {"train", "dev", "test"}
