"""With a Redis channel layer, the result writer pushes to live pages instead of waiting for
the database tail (so another process's run reaches a browser at once)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from apps.evals.models import EvalRun, EvalRunStatus, EvalSet
from apps.evals.results.executor import executor_fields, this_executor
from apps.evals.results.writer import DjangoEvalStore
from apps.evals.views.live import EvalRunConsumer
from evalcore import Case, run_eval
from tests.apps.evals.test_consumers import open_socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def redis_url():
    """A throwaway redis-server on a free loopback port (installed by `make test` / .ci/run)."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is missing: run scripts/ensure-system-packages.sh"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60  # generous: only bounds a server that never starts
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    server.terminate()
    server.wait(timeout=60)


def write_one_result() -> str:
    eval_set = EvalSet.objects.create(name="live")
    eval_run_id = EvalRun.objects.create(
        eval_set=eval_set, target_id="t", status=EvalRunStatus.RUNNING, started=timezone.now(), **executor_fields()
    ).id
    store = DjangoEvalStore(target_id="t", eval_run_id=eval_run_id, executor=this_executor())
    return eval_run_id, store


async def test_writer_pushes_results_through_redis(settings, redis_url, viewer, monkeypatch):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis_url]}}
    }
    monkeypatch.setattr(EvalRunConsumer, "poll_s", 3600.0)  # the tail alone would take an hour
    eval_run_id, store = await database_sync_to_async(write_one_result)()
    communicator = await open_socket(f"/ws/eval/runs/{eval_run_id}/?after=0", viewer)
    assert await communicator.receive_nothing(timeout=0.5)

    def run_one_case() -> None:
        with store:
            asyncio.run(
                run_eval([Case("c1", "x", "x")], lambda x: x, ["exact_match"], sink=store, eval_run_id=eval_run_id)
            )

    await database_sync_to_async(run_one_case)()
    frame = await communicator.receive_from(timeout=60)  # arrives at all only if Redis pushed it
    assert "c1" in frame
    await communicator.disconnect()
