"""A slow Redis never ends a live page's websocket: the channel layer's read timeout is above
its own blocking receive (evalsite/channel_layers.py). Before, redis-py 8's default 5 s read
timeout equalled channels_redis's 5 s ``BZPOPMIN``, and a reply a moment late raised
``TimeoutError`` in the consumer: daphne closed the socket with 1011.

Deterministic, not timed: ``DEBUG SLEEP`` holds the server past both 5 s limits, so the empty
reply to the pending ``BZPOPMIN`` *cannot* arrive within 5 s of asking.
"""

from __future__ import annotations

import asyncio

import pytest
import redis
from channels_redis.core import RedisChannelLayer

from evalsite.channel_layers import BRPOP_TIMEOUT_S, READ_TIMEOUT_S, redis_host
from tests.support.redis_server import redis_server

PAUSE_S = BRPOP_TIMEOUT_S + 2


@pytest.fixture
def debug_redis_url():
    """A throwaway redis-server that accepts ``DEBUG`` (to pause it)."""
    with redis_server("--enable-debug-command", "yes") as url:
        yield url


def test_the_read_timeout_is_above_the_layers_blocking_receive():
    assert BRPOP_TIMEOUT_S == RedisChannelLayer.brpop_timeout  # channels_redis changed it: look again
    assert READ_TIMEOUT_S > 2 * BRPOP_TIMEOUT_S


async def _receive_across_a_pause(url: str, host: object) -> dict:
    layer = RedisChannelLayer(hosts=[host])
    sender = RedisChannelLayer(hosts=[url])
    channel = await layer.new_channel()
    waiting = asyncio.create_task(layer.receive(channel))
    admin = redis.Redis.from_url(url, socket_timeout=PAUSE_S + 60)

    def blocked() -> bool:
        return any(client.get("cmd") == "bzpopmin" for client in admin.client_list())

    while not await asyncio.to_thread(blocked):  # the receive is waiting inside Redis
        await asyncio.sleep(0.05)
    await asyncio.to_thread(admin.execute_command, "DEBUG", "SLEEP", PAUSE_S)
    await sender.send(channel, {"type": "eval.progress"})
    try:
        return await asyncio.wait_for(waiting, timeout=120)
    finally:
        admin.close()
        await layer.flush()


def test_a_receive_outlives_a_redis_pause_longer_than_its_blocking_wait(debug_redis_url):
    message = asyncio.run(_receive_across_a_pause(debug_redis_url, redis_host(debug_redis_url)))
    assert message == {"type": "eval.progress"}


def test_without_the_longer_read_timeout_the_same_pause_breaks_the_receive(debug_redis_url):
    """The fault itself, so this test fails if redis-py or channels_redis stop causing it
    (then the setting may go)."""
    with pytest.raises(redis.exceptions.TimeoutError):
        asyncio.run(_receive_across_a_pause(debug_redis_url, {"address": debug_redis_url, "socket_timeout": 5}))
