"""The per-endpoint cap across processes: two limiters (two workers) on one real Redis."""

from __future__ import annotations

import asyncio

from evalcore.ratelimit import RedisLimiter, limited_target
from evalcore.targets import resolve_target
from tests.apps.evals.test_live_redis import redis_url  # noqa: F401 - the throwaway redis-server


async def test_two_workers_share_one_cap_and_one_back_off(redis_url):  # noqa: F811
    first, second = RedisLimiter(redis_url, {"gpt": 2}), RedisLimiter(redis_url, {"gpt": 2})
    state = {"now": 0, "max": 0}
    full = asyncio.Event()

    async def call(value, ctx):
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        if state["now"] == 2:
            full.set()
        await full.wait()
        assert await first.holders("gpt") <= 2
        state["now"] -= 1
        return value

    a = limited_target(resolve_target(call), endpoint="gpt", limiter=first)
    b = limited_target(resolve_target(call), endpoint="gpt", limiter=second)
    got = await asyncio.gather(*(t.fn(i, None) for i, t in enumerate([a, b] * 5)))
    assert got == list(range(10)) and state["max"] == 2
    assert await first.holders("gpt") == 0  # every slot given back

    await first.back_off("gpt", 30.0)  # a 429 seen by one worker...
    try:
        await asyncio.wait_for(second.acquire("gpt"), timeout=0.2)  # ...holds the other back
        raise AssertionError("acquired during the back-off")
    except TimeoutError:
        pass
    await first.back_off("gpt", 0.001)  # never shortened
    assert await second._client().pttl("evalsite:backoff:gpt") > 20_000
