"""How the Redis channel layer connects (``EVALSITE_REDIS_URL``).

channels_redis waits for a message with ``BZPOPMIN`` for :data:`BRPOP_TIMEOUT_S` seconds, and
redis-py 8 gives every connection a 5 s read timeout by default: the same 5 s. On a busy
machine the server's empty reply arrives a moment after the client stopped waiting, redis-py
raises ``TimeoutError`` inside the consumer's receive loop, and daphne ends every live page's
websocket with 1011 (seen in ``test_cluster_portal`` under load). A read timeout well above the
blocking command's own makes a slow reply a slow reply, not a crash.
"""

from __future__ import annotations

from typing import Any

BRPOP_TIMEOUT_S = 5
"""channels_redis's ``RedisChannelLayer.brpop_timeout`` (seconds a receive blocks in Redis)."""

READ_TIMEOUT_S = 60.0
"""Seconds a channel-layer connection waits for a reply: far above :data:`BRPOP_TIMEOUT_S`, so
only a Redis that stopped answering, not a loaded one, ends a wait."""


def redis_host(url: str) -> dict[str, Any]:
    """The ``hosts`` entry of ``CHANNEL_LAYERS`` for a Redis URL: the URL plus a read timeout
    longer than the layer's blocking receive (see the module docstring), and TCP keepalive so a
    connection to a vanished server is noticed."""
    return {"address": url, "socket_timeout": READ_TIMEOUT_S, "socket_keepalive": True}
