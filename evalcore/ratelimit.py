"""A cap on target calls in flight per model endpoint, shared by every worker, and 429 back-off.

An LLM endpoint's rate limit belongs to the account, not to one process: with ten workers at
concurrency 50 each, a per-process cap cannot keep the endpoint under its limit. A
:class:`Limiter` holds one slot per call in flight under a key (the endpoint: the target's model,
else its id); :func:`limited_target` wraps a target so each call waits for a slot and for any
back-off in force, and a call refused with HTTP 429 sets a back-off every worker honours before
it is retried (at most :data:`RETRIES_429` times; then the case errors with the 429).

- :class:`LocalLimiter`: one process (asyncio semaphores); the embedded default.
- :class:`RedisLimiter`: every process sharing a Redis. A slot is a member of a sorted set
  scored by its expiry (a holder that died frees its slot after ``slot_ttl_s``); taking one is
  one Lua script (drop expired, count, add), so two workers never take the last slot both. The
  back-off is a key with a time to live (``PX``), only ever lengthened.

Limits come as text, ``"gpt-4o=20,*=50"`` (:func:`parse_limits`); an endpoint with no limit and
no ``*`` is not capped (back-off still applies).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import secrets
import time
import weakref
from typing import Any, Protocol

from evalcore.targets import ResolvedTarget

RETRIES_429 = 5
"""Times a call refused with 429 is tried again (after the back-off) before its case errors."""

DEFAULT_BACKOFF_S = 1.0
"""Back-off after a 429 that names no ``Retry-After`` (doubled per consecutive refusal, to 30 s)."""


def parse_limits(text: str) -> dict[str, int]:
    """``"a=2, b=5, *=10"`` -> ``{"a": 2, "b": 5, "*": 10}``.

    Raises:
        ValueError: An item is not ``KEY=N`` with an integer N >= 1.
    """
    limits: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.rpartition("=")
        if not sep or not key.strip() or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"endpoint limit {item!r}: expected KEY=N with N >= 1 (e.g. gpt-4o=20, *=50)")
        limits[key.strip()] = int(value)
    return limits


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds to back off when ``exc`` is an HTTP 429 refusal (its ``Retry-After`` if any, else
    0.0 meaning "use the default"); ``None`` when it is not a 429."""
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None) or getattr(response, "status_code", None)
    if status != 429:
        return None
    headers = getattr(response, "headers", None) or {}
    try:
        return max(0.0, float(headers.get("retry-after", 0) or 0))
    except (TypeError, ValueError):
        return 0.0


class Limiter(Protocol):
    """Slots per key and a shared back-off (see the module docstring)."""

    def limit(self, key: str) -> int | None:
        """The cap for ``key`` (``None``: no cap)."""

    async def acquire(self, key: str) -> str:
        """Wait for a slot (and for any back-off in force); returns the slot's token."""

    async def release(self, key: str, token: str) -> None:
        """Give the slot back."""

    async def back_off(self, key: str, seconds: float) -> None:
        """Make every caller of ``key`` wait ``seconds`` before its next call."""


class LocalLimiter:
    """A :class:`Limiter` for one process (asyncio; one semaphore per key and event loop)."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = limits
        # per event loop (a semaphore binds to one); weak: a closed run's loop takes its own along
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary()
        )
        self._until: dict[str, float] = {}

    def limit(self, key: str) -> int | None:
        return self.limits.get(key, self.limits.get("*"))

    async def acquire(self, key: str) -> str:
        while (wait := self._until.get(key, 0.0) - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        cap = self.limit(key)
        if cap is not None:
            await self._semaphore(key, cap).acquire()
        return "local"

    async def release(self, key: str, token: str) -> None:
        cap = self.limit(key)
        if cap is not None:
            self._semaphore(key, cap).release()

    def _semaphore(self, key: str, cap: int) -> asyncio.Semaphore:
        per_loop = self._semaphores.setdefault(asyncio.get_running_loop(), {})
        return per_loop.setdefault(key, asyncio.Semaphore(cap))

    async def back_off(self, key: str, seconds: float) -> None:
        self._until[key] = max(self._until.get(key, 0.0), time.monotonic() + seconds)


_TAKE = """
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) * 1000) + 1000)
  return 1
end
return 0
"""

_BACK_OFF = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end
return 1
"""


class RedisLimiter:
    """A :class:`Limiter` shared by every process that reaches one Redis.

    Args:
        url: ``redis://host:port/db``.
        limits: Caps per key (see :func:`parse_limits`).
        slot_ttl_s: A slot not released within this many seconds is freed (its holder died);
            keep it above the longest target call (the per-case timeout).
        prefix: Namespace of the Redis keys.
    """

    def __init__(
        self, url: str, limits: dict[str, int], *, slot_ttl_s: float = 300.0, prefix: str = "evalsite"
    ) -> None:
        import redis.asyncio  # the redis extra; only a cluster setup needs it

        self.limits = limits
        self.slot_ttl_s = slot_ttl_s
        self.prefix = prefix
        self._url = url
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._redis_asyncio = redis.asyncio

    def _client(self) -> Any:
        loop = asyncio.get_running_loop()  # a client belongs to one event loop
        if loop not in self._clients:
            self._clients[loop] = self._redis_asyncio.Redis.from_url(self._url)
        return self._clients[loop]

    def limit(self, key: str) -> int | None:
        return self.limits.get(key, self.limits.get("*"))

    async def acquire(self, key: str) -> str:
        client = self._client()
        token = secrets.token_hex(8)
        cap = self.limit(key)
        while True:
            wait_ms = await client.pttl(f"{self.prefix}:backoff:{key}")
            if wait_ms and wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000)
                continue
            if cap is None:
                return token
            taken = await client.eval(_TAKE, 1, f"{self.prefix}:slots:{key}", time.time(), cap, self.slot_ttl_s, token)
            if taken:
                return token
            await asyncio.sleep(0.005 + random.random() * 0.02)  # jitter: the waiters do not retry in step

    async def release(self, key: str, token: str) -> None:
        if self.limit(key) is not None:
            await self._client().zrem(f"{self.prefix}:slots:{key}", token)

    async def back_off(self, key: str, seconds: float) -> None:
        await self._client().eval(_BACK_OFF, 1, f"{self.prefix}:backoff:{key}", max(1, int(seconds * 1000)))

    async def holders(self, key: str) -> int:
        """Slots of ``key`` held now (expired ones not counted)."""
        return int(await self._client().zcount(f"{self.prefix}:slots:{key}", time.time(), "+inf"))


def limited_target(target: ResolvedTarget, *, endpoint: str, limiter: Limiter | None) -> ResolvedTarget:
    """``target`` with each call holding a slot of ``endpoint`` and honouring the back-off; a 429
    sets the back-off (``Retry-After``, else :data:`DEFAULT_BACKOFF_S` doubling) and is retried.
    Returns ``target`` itself when there is no limiter."""
    if limiter is None:
        return target
    inner = target.fn

    async def call(value: Any, ctx: Any) -> Any:
        backoff = DEFAULT_BACKOFF_S
        for attempt in range(RETRIES_429 + 1):
            token = await limiter.acquire(endpoint)
            try:
                return await inner(value, ctx)
            except Exception as exc:
                wait = retry_after_s(exc)
                if wait is None or attempt == RETRIES_429:
                    raise
                await limiter.back_off(endpoint, wait or backoff)
                backoff = min(backoff * 2, 30.0)
            finally:
                await limiter.release(endpoint, token)
        raise AssertionError("unreachable")  # pragma: no cover

    return dataclasses.replace(target, fn=call)
