"""The per-endpoint cap and the 429 back-off (evalcore.ratelimit), in one process."""

from __future__ import annotations

import asyncio

import pytest

from evalcore.ratelimit import LocalLimiter, limited_target, parse_limits, retry_after_s
from evalcore.targets import resolve_target


def test_parse_limits():
    assert parse_limits("gpt-4o=20, *=5") == {"gpt-4o": 20, "*": 5}
    assert parse_limits("") == {}
    assert parse_limits("a:b=3") == {"a:b": 3}
    for bad in ("gpt", "a=0", "=3", "a=x"):
        with pytest.raises(ValueError, match="KEY=N"):
            parse_limits(bad)


class Refused(Exception):
    """What an HTTP client raises on a 429 (status and response headers)."""

    def __init__(self, retry_after: str | None) -> None:
        super().__init__("429 Too Many Requests")
        self.status_code = 429
        self.response = type(
            "R", (), {"status_code": 429, "headers": {"retry-after": retry_after} if retry_after else {}}
        )()


def test_retry_after_reads_429s_only():
    assert retry_after_s(Refused("0.5")) == 0.5
    assert retry_after_s(Refused(None)) == 0.0
    assert retry_after_s(ValueError("no")) is None


async def test_the_cap_holds_the_calls_in_flight_at_the_limit():
    limiter = LocalLimiter({"m": 3})
    state = {"now": 0, "max": 0}
    full = asyncio.Event()

    async def call(value, ctx):
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        if state["now"] == 3:
            full.set()
        await full.wait()  # the first three wait until three are in flight: the cap is reached
        await asyncio.sleep(0)
        state["now"] -= 1
        return value

    target = limited_target(resolve_target(call), endpoint="m", limiter=limiter)
    got = await asyncio.gather(*(target.fn(i, None) for i in range(20)))
    assert got == list(range(20)) and state["max"] == 3


async def test_a_429_backs_off_and_is_tried_again():
    limiter = LocalLimiter({})
    calls = {"n": 0}

    async def call(value, ctx):
        calls["n"] += 1
        if calls["n"] == 1:
            raise Refused("0.01")
        return value

    target = limited_target(resolve_target(call), endpoint="m", limiter=limiter)
    assert await target.fn("ok", None) == "ok" and calls["n"] == 2


async def test_other_errors_pass_through_untouched():
    async def call(value, ctx):
        raise ValueError("boom")

    target = limited_target(resolve_target(call), endpoint="m", limiter=LocalLimiter({"*": 1}))
    with pytest.raises(ValueError, match="boom"):
        await target.fn("x", None)
    assert limited_target(resolve_target(call), endpoint="m", limiter=None).fn is not target.fn
