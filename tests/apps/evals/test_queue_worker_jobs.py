"""rs3-13 (C): a queue worker runs only Evalsite's own shard jobs, and jobs are JSON data.

Anyone who can write to Redis could enqueue ``pathlib.Path.touch(marker)`` (RQ pickles jobs by
default, and a pickle runs code as it loads): a real worker on a throwaway redis-server must
refuse it, as a pickle, as a JSON job naming another function, and as our function with other
arguments, and go on working.
"""

from __future__ import annotations

import json
import pathlib
import zlib

import pytest
from rq import Queue, Worker
from rq.job import Job
from rq.registry import FailedJobRegistry
from rq.serializers import JSONSerializer

from apps.evals.management.commands.queue_worker import _worker_class
from apps.evals.worker.queue import SHARD_JOB, job_refusal, rq_queue
from tests.apps.evals.test_live_redis import redis_url  # noqa: F401 - a throwaway redis-server

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_rq(settings, redis_url, monkeypatch):  # noqa: F811
    settings.EVALSITE_QUEUE = "rq"
    monkeypatch.setenv("EVALSITE_REDIS_URL", redis_url)
    return rq_queue()


def test_our_queue_writes_jobs_as_json(on_rq):
    job = on_rq.enqueue(SHARD_JOB, 7, "tok", job_id="evalsite-shard-7-tok")
    raw = on_rq.connection.hget(Job.key_for(job.id), "data")
    assert json.loads(zlib.decompress(raw))[0] == SHARD_JOB  # data, not a pickle
    assert job_refusal(Job.fetch(job.id, connection=on_rq.connection, serializer=on_rq.serializer)) is None


def test_a_worker_refuses_every_job_that_is_not_ours_and_goes_on(on_rq, tmp_path):
    markers = [tmp_path / f"marker{i}" for i in range(3)]
    # 1. what rs3-13 did: a pickled job (RQ's default serializer) on our queue's key
    pickled = Queue(on_rq.name, connection=on_rq.connection).enqueue(pathlib.Path.touch, markers[0])
    # 2. a JSON job naming another function; 3. our function with arguments that are not ours
    other = on_rq.enqueue("pathlib.Path.touch", str(markers[1]))
    ours_misused = on_rq.enqueue(SHARD_JOB, args=(str(markers[2]),), kwargs={"x": 1})
    worker = _worker_class(Worker)([on_rq], connection=on_rq.connection, name="refuser", serializer=JSONSerializer)
    worker.subscribe = lambda: None  # RQ's command channel: its thread takes 60 s to stop at exit
    worker.work(burst=True, logging_level="WARNING")
    assert not any(m.exists() for m in markers)
    failed = FailedJobRegistry(queue=on_rq)
    assert set(failed.get_job_ids()) == {pickled.id, other.id, ours_misused.id}
    assert on_rq.job_ids == []  # each was taken off the queue and failed, and the worker went on to the next


def test_refusals_name_the_reason():
    class Fake:
        def __init__(self, func_name, args, kwargs=None, instance=None):
            self.func_name, self.args, self.kwargs, self.instance = func_name, args, kwargs or {}, instance

    assert job_refusal(Fake(SHARD_JOB, [3, "t"])) is None
    assert "not apps.evals.worker.queue.run_shard_job" in job_refusal(Fake("os.system", ["id"]))
    assert "arguments" in job_refusal(Fake(SHARD_JOB, [3, "t", 4]))
    assert "not apps.evals" in job_refusal(Fake(SHARD_JOB, [3, "t"], instance="x"))
