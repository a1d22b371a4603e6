"""A work-horse keeps its concurrency full across shards, in one process on the test database
with a real RQ queue on a throwaway redis-server: it takes the next fresh shards of its run off
the queue's head (dropping stale deliveries on the way, stopping at another run's shard), each
shard marked done as its last result commits. Early stop across shards: the shards' writers stop
a sharded run whose first K stored results are all errors of one type. The status page and API
list RQ queue workers and the shard queue's depth from Redis.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from apps.agents.registry import load_target
from apps.evals.models import EvalRun, EvalShard
from apps.evals.runs.config import RunConfig
from apps.evals.runs.prepare import prepare_eval_run
from apps.evals.sets.cases import set_cases
from apps.evals.worker.queue import _parse_job_id, enqueue_shard, rq_queue, run_shard_job, start_sharded_run
from apps.evals.worker.shard_run import run_shard
from apps.evals.worker.shards import plan_shards
from tests.apps.evals.test_consumers import roles  # noqa: F401 - autouse: the groups after each flush
from tests.apps.evals.test_live_redis import redis_url  # noqa: F401 - a throwaway redis-server
from tests.apps.factories import make_eval_set

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = """
import re

from evalcore.discovery import TargetSpec


def _add(question):
    return str(2 * int(re.search(r"(\\d+) \\+", question["question"]).group(1)))


def _broken(question):
    raise ValueError("this target takes a string, not " + type(question).__name__)


def _mixed(question):
    n = int(re.search(r"(\\d+) \\+", question["question"]).group(1))
    if n % 2:
        raise KeyError("odd")
    raise ValueError("even")


adder = TargetSpec(id="adder", variants={"right": _add, "broken": _broken, "mixed": _mixed}, scorers=["exact_match"])
"""


@pytest.fixture
def agents_dir(tmp_path, settings):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "adder_agent.py").write_text(AGENTS)
    settings.EVALSITE_AGENTS_DIR = folder
    return folder


@pytest.fixture
def on_rq(settings, redis_url, monkeypatch):  # noqa: F811
    settings.EVALSITE_QUEUE = "rq"
    monkeypatch.setenv("EVALSITE_REDIS_URL", redis_url)
    return rq_queue()


def new_run(eval_set, variant="right", **config) -> EvalRun:
    return prepare_eval_run(
        eval_set=eval_set,
        spec=load_target("adder"),
        variant=variant,
        split="all",
        allow_test=True,
        config=RunConfig.parse(config),
    )


def take_first(queue) -> tuple[int, str]:
    """What a worker does: the job at the head of the queue, to run."""
    delivery = _parse_job_id(queue.connection.lpop(queue.key).decode())
    assert delivery is not None
    return delivery


def test_a_horse_takes_the_next_fresh_shards_of_its_run_off_the_queue(agents_dir, on_rq):
    eval_run = new_run(make_eval_set("arith", 9))
    jobs = start_sharded_run(eval_run, size=3)
    assert len(jobs) == 3
    assert on_rq.fetch_job(jobs[0]).meta == {"agents_dir": str(agents_dir)}  # warmed before the fork
    outcome = run_shard_job(*take_first(on_rq))
    assert outcome == {"shard": outcome["shard"], "status": "done", "shards": 3}
    assert on_rq.job_ids == []  # the two it took are gone from the queue (their jobs deleted)
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done, eval_run.n_passed) == ("finished", 9, 9)
    shards = list(EvalShard.objects.filter(eval_run=eval_run).values_list("status", "worker", "attempts"))
    assert {s for s, _, _ in shards} == {"done"} and len({w for _, w, _ in shards}) == 1
    assert all(a == 1 for _, _, a in shards)


def test_the_chain_drops_stale_deliveries_and_stops_at_another_runs_shard(agents_dir, on_rq):
    eval_set = make_eval_set("arith", 9)
    first = new_run(eval_set)
    pairs = plan_shards(first, size=3)
    other = new_run(eval_set)
    [(other_shard, other_token)] = plan_shards(other, size=9)
    (a0, t0), (a1, t1), (a2, t2) = pairs
    for pk, token in [(a0, t0), (a1, t1), (a2, t2), (other_shard, other_token)]:
        enqueue_shard(pk, token)
    EvalShard.objects.filter(pk=a1).update(token="redelivered")  # its queued job is stale now
    enqueue_shard(a1, "redelivered")
    outcome = run_shard_job(*take_first(on_rq))
    assert (outcome["status"], outcome["shards"]) == ("done", 2)  # a0, then a2 (a1's stale job dropped)
    assert on_rq.job_ids == [f"evalsite-shard-{other_shard}-{other_token}", f"evalsite-shard-{a1}-redelivered"]
    assert EvalShard.objects.get(pk=a1).status == "queued"
    assert EvalShard.objects.get(pk=other_shard).status == "queued"


def test_no_chain_when_the_limit_is_zero(agents_dir, on_rq, settings):
    settings.EVALSITE_SHARD_CHAIN = 0
    eval_run = new_run(make_eval_set("arith", 6))
    start_sharded_run(eval_run, size=3)
    assert run_shard_job(*take_first(on_rq))["shards"] == 1
    assert len(on_rq.job_ids) == 1


def test_a_job_a_horse_took_is_held_until_its_claim_and_reaped_once_its_hold_lapses(agents_dir, on_rq):
    """A stolen job's hash was deleted: a reaper looking between the steal and the horse's claim
    found the job lost and delivered the shard again, at the queue's tail (the run's last shard)."""
    from rq.job import Job

    from apps.evals.worker.queue import _rq_jobs_lost, steal_shard_job, stolen_job_ttl_s

    eval_run = new_run(make_eval_set("arith", 6))
    start_sharded_run(eval_run, size=3)
    take_first(on_rq)
    delivery = steal_shard_job(lambda shard_id, token: "take")
    assert delivery is not None and on_rq.job_ids == []
    key = Job.key_for(f"evalsite-shard-{delivery[0]}-{delivery[1]}")
    assert on_rq.connection.hget(key, "status") == b"started"
    assert 0 < on_rq.connection.ttl(key) <= stolen_job_ttl_s()
    assert _rq_jobs_lost([delivery]) == set()  # held: the claim follows
    on_rq.connection.delete(key)  # its hold lapsed (the horse died before claiming)
    assert _rq_jobs_lost([delivery]) == {delivery}


def test_the_chain_takes_the_next_shard_before_the_current_one_runs_dry(agents_dir, on_rq):
    """The engine pulls the stream under a lock: a shard taken only when the last case had been
    handed out held every freed case slot for the take's round trips, once per shard."""
    import asyncio
    import threading

    from apps.evals.worker.queue import steal_shard_job
    from apps.evals.worker.shard_run import ShardChain
    from apps.evals.worker.shard_writer import ShardStore

    eval_run = new_run(make_eval_set("arith", 6), concurrency=2)
    start_sharded_run(eval_run, size=3)
    first = take_first(on_rq)
    asked = threading.Event()

    def steal(classify):
        asked.set()
        return steal_shard_job(classify)

    store = ShardStore(*first, eval_run_id=eval_run.id)
    cases = set_cases(eval_run.eval_set, eval_run.split, case_ids=EvalShard.objects.get(pk=first[0]).case_ids)
    chain = ShardChain(eval_run, store, set(), steal, limit=5)

    async def consume() -> list[str]:
        got = []
        async for case in chain.stream(cases):
            got.append(case.id)
            if len(got) == len(cases):  # the last case of the first shard is out: the take was asked
                assert await asyncio.to_thread(asked.wait, 30)
        return got

    try:
        got = asyncio.run(consume())
    finally:
        chain.close()
    assert sorted(got) == sorted(f"c{i}" for i in range(6)) and chain.taken == 1
    assert set(store.deliveries()) == {first[0], *EvalShard.objects.exclude(pk=first[0]).values_list("pk", flat=True)}


def test_early_stop_holds_across_shards(agents_dir):
    eval_run = new_run(make_eval_set("arith", 10), variant="broken", early_stop=3)
    pairs = plan_shards(eval_run, size=2)
    assert run_shard(*pairs[0])["status"] == "done"  # 2 errors: fewer than K
    eval_run.refresh_from_db()
    assert eval_run.status == "running"
    assert run_shard(*pairs[1])["status"] == "stopped"  # 4 stored, all ValueError: stop
    eval_run.refresh_from_db()
    assert eval_run.status == "failed"
    assert "raised ValueError on every case" in eval_run.error and "Stopped early" in eval_run.error
    assert eval_run.summary["n"] == eval_run.n_done == eval_run.n_errored == 4
    statuses = dict(EvalShard.objects.filter(eval_run=eval_run).values_list("index", "status"))
    # shard 1's results were all stored before the check: done; the rest dropped
    assert statuses == {0: "done", 1: "done", 2: "cancelled", 3: "cancelled", 4: "cancelled"}
    assert run_shard(*pairs[2])["status"] == "skipped"  # its delivery is stale: nothing more runs


@pytest.mark.parametrize("variant", ["mixed", "right"])
def test_no_early_stop_when_errors_differ_or_a_case_passes(agents_dir, variant):
    eval_run = new_run(make_eval_set("arith", 6), variant=variant, early_stop=2)
    for pair in plan_shards(eval_run, size=2):
        assert run_shard(*pair)["status"] == "done"
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done) == ("finished", 6)


def test_status_page_and_api_list_rq_queue_workers_and_the_shard_queue(agents_dir, on_rq, viewer):
    from rq import Worker

    eval_run = new_run(make_eval_set("arith", 4))
    start_sharded_run(eval_run, size=2)
    worker = Worker([on_rq], connection=on_rq.connection, name="evalsite-test-w1")
    worker.register_birth()
    worker.heartbeat()
    worker.set_state("idle")
    client = Client()
    client.force_login(viewer)
    data = json.loads(client.get("/api/status").content)
    assert data["queue"] == "rq" and data["live_workers"] == 1
    [row] = data["queue_workers"]
    assert (row["name"], row["state"], row["queues"], row["shard"]) == ("evalsite-test-w1", "idle", "evalsite", "")
    assert row["pid"] and row["host"] and row["heartbeat_age_s"] is not None
    [queue] = [q for q in data["queues"] if q["backend"] == "RQ (Redis)"]
    assert (queue["ready"], queue["running"]) == (2, 0) and queue["oldest_enqueued_at"]
    page = client.get("/status/").content.decode()
    assert "Queue workers (RQ)" in page and "evalsite-test-w1" in page
    worker.register_death()
    data = json.loads(client.get("/api/status").content)
    assert data["queue_workers"] == []
    page = client.get("/status/").content.decode()
    assert "No queue worker: sharded runs stay queued until one runs" in page and "evalsite queue_worker" in page


def test_the_no_worker_hint_on_rq_names_the_queue_worker_command(on_rq):
    from apps.evals.cli.queued import no_worker_hint

    hint = no_worker_hint("r1")
    assert "no worker is running" in hint and "`evalsite queue_worker`" in hint and "EVALSITE_REDIS_URL" in hint


def test_an_unreachable_redis_is_one_line_and_leaves_no_run_queued(agents_dir, settings, monkeypatch):
    """`eval --executor queue` with Redis down printed a 77-line traceback and left the run
    `queued` with its shards, forever."""
    import socket

    from rich.console import Console

    from apps.evals.cli.console import UsageError
    from apps.evals.cli.queued import run_on_queue

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.EVALSITE_QUEUE = "rq"
    monkeypatch.setenv("EVALSITE_REDIS_URL", f"redis://127.0.0.1:{port}/0")
    eval_run = new_run(make_eval_set("arith", 4), executor="queue", shard_size=2)
    with pytest.raises(UsageError) as caught:
        run_on_queue(eval_run, Console(quiet=True), quiet=True, resume=False)
    assert f"could not enqueue the shards of eval run {eval_run.id} on the rq queue: ConnectionError" in str(
        caught.value
    )
    assert caught.value.returncode == 2
    eval_run.refresh_from_db()
    assert eval_run.status == "interrupted" and "its shards could not be enqueued" in eval_run.error
    assert set(EvalShard.objects.filter(eval_run=eval_run).values_list("status", flat=True)) == {"cancelled"}
