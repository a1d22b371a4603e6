"""With a Redis channel layer, the result writer pushes to live pages instead of waiting for
the database tail (so another process's run reaches a browser at once)."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from apps.evals.models import EvalRun, EvalRunStatus, EvalSet
from apps.evals.results.executor import executor_fields, this_executor
from apps.evals.results.writer import DjangoEvalStore
from apps.evals.views.live import EvalRunConsumer
from evalcore import Case, run_eval
from tests.apps.evals.test_consumers import open_socket
from tests.support.redis_server import redis_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def redis_url():
    """A throwaway redis-server on a free loopback port (installed by `make test` / .ci/run)."""
    with redis_server() as url:
        yield url


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
