"""rs3-13 (B): a run submitted while the queue's Redis is down answered 500, yet the run existed
and started by itself once Redis was back (the reaper enqueued its "lost" shards), so a client
that retried got two. Now the answer is a 503 saying so and nothing is created; with Redis back
the same request starts exactly one run.

Redis is real: a port nothing listens on while it is "down", a throwaway redis-server after.
"""

from __future__ import annotations

import socket

import pytest
from django.test import Client

from apps.evals.models import EvalRun, EvalShard
from apps.evals.worker.queue import reap
from tests.apps.evals.test_api import write_agents
from tests.apps.evals.test_consumers import roles  # noqa: F401 - autouse: the groups after each flush
from tests.apps.evals.test_live_redis import redis_url  # noqa: F401 - a throwaway redis-server
from tests.apps.factories import make_eval_set

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sharded_on_rq(tmp_path, settings, monkeypatch):
    write_agents(tmp_path / "agents")
    settings.EVALSITE_AGENTS_DIR = tmp_path / "agents"
    settings.EVALSITE_QUEUE = "rq"
    settings.EVALSITE_SHARDED_RUNS = True
    settings.EVALSITE_SHARD_SIZE = 2
    with socket.socket() as probe:  # a port nothing listens on: Redis is down
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("EVALSITE_REDIS_URL", f"redis://127.0.0.1:{port}/0")
    return monkeypatch


def test_an_api_run_submitted_while_redis_is_down_is_a_503_and_creates_nothing(sharded_on_rq, member, redis_url):  # noqa: F811
    eval_set = make_eval_set("arith", 5)
    client = Client()
    client.force_login(member)
    payload = {"set_id": eval_set.pk, "target_id": "adder", "variant": "right", "split": "all", "allow_test": True}
    response = client.post("/api/eval/runs", payload, content_type="application/json")
    assert response.status_code == 503, response.content
    assert "unreachable" in response.json()["message"] and "nothing was created" in response.json()["message"]
    assert not EvalRun.objects.exists() and not EvalShard.objects.exists()
    # Redis is back: no run starts by itself (nothing for the reaper to find), and the retry starts one
    sharded_on_rq.setenv("EVALSITE_REDIS_URL", redis_url)
    assert reap() == 0
    retried = client.post("/api/eval/runs", payload, content_type="application/json")
    assert retried.status_code == 201, retried.content
    assert list(EvalRun.objects.values_list("pk", "status")) == [(retried.json()["id"], "queued")]


def test_the_start_form_submitted_while_redis_is_down_says_so_and_creates_nothing(sharded_on_rq, member):
    eval_set = make_eval_set("arith", 3)
    client = Client()
    client.force_login(member)
    form = {"eval_set": eval_set.pk, "target": "adder", "variant": "right", "split": "all", "allow_test": "on"}
    response = client.post("/runs/new/", form)
    assert response.status_code == 503
    assert b"the run queue (Redis, EVALSITE_REDIS_URL) is unreachable" in response.content
    assert not EvalRun.objects.exists() and not EvalShard.objects.exists()


def test_a_resume_while_redis_is_down_answers_with_the_queued_run_which_finishes_once_redis_is_back(
    sharded_on_rq,
    member,
    settings,
    redis_url,  # noqa: F811
):
    from rq import SimpleWorker

    from apps.evals.worker.queue import rq_queue

    settings.EVALSITE_SHARD_LEASE_S = 0.001  # "queued for longer than a lease" at once
    eval_set = make_eval_set("arith", 4)
    client = Client()
    client.force_login(member)
    payload = {"set_id": eval_set.pk, "target_id": "adder", "variant": "right", "split": "all", "allow_test": True}
    sharded_on_rq.setenv("EVALSITE_REDIS_URL", redis_url)
    started = client.post("/api/eval/runs", payload, content_type="application/json")
    run_id = started.json()["id"]
    assert client.post(f"/api/eval/runs/{run_id}/cancel", content_type="application/json").status_code == 200
    rq_queue().empty()
    down = f"redis://127.0.0.1:{_free_port()}/0"
    sharded_on_rq.setenv("EVALSITE_REDIS_URL", down)
    resumed = client.post(f"/api/eval/runs/{run_id}/resume", content_type="application/json")
    # not a 5xx: the resume holds, and the answer says the run's state
    assert resumed.status_code == 202, resumed.content
    assert resumed.json()["status"] == "queued" and EvalRun.objects.get(pk=run_id).status == "queued"
    sharded_on_rq.setenv("EVALSITE_REDIS_URL", redis_url)
    assert reap() == 2  # its two shards, whose jobs never reached Redis
    queue = rq_queue()
    SimpleWorker([queue], connection=queue.connection, serializer=queue.serializer).work(burst=True)
    run = EvalRun.objects.get(pk=run_id)
    assert (run.status, run.n_done) == ("finished", 4)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
