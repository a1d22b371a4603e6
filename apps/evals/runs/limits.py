"""The per-endpoint concurrency cap of this deployment (``EVALSITE_ENDPOINT_CONCURRENCY``).

With ``EVALSITE_REDIS_URL`` set the cap and the 429 back-off are shared by every worker through
Redis (:class:`evalcore.ratelimit.RedisLimiter`); without it they hold within this process
(:class:`evalcore.ratelimit.LocalLimiter`). See ``docs/scale.md``.
"""

from __future__ import annotations

import functools
import os

from django.conf import settings

from evalcore.ratelimit import Limiter, LocalLimiter, RedisLimiter, parse_limits


@functools.cache
def endpoint_limiter() -> Limiter | None:
    """This process's limiter (made once), or ``None`` when no cap is configured.

    Raises:
        ValueError: ``EVALSITE_ENDPOINT_CONCURRENCY`` is malformed.
    """
    text = str(getattr(settings, "EVALSITE_ENDPOINT_CONCURRENCY", "") or "")
    if not text.strip():
        return None
    limits = parse_limits(text)
    url = os.environ.get("EVALSITE_REDIS_URL", "")
    return RedisLimiter(url, limits) if url else LocalLimiter(limits)
