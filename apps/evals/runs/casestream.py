"""A run's cases streamed from the database: the engine's case source for a whole-set run.

:func:`apps.evals.sets.cases.iter_set_cases` reads the set a chunk at a time; :class:`CaseStream` runs
those reads on a thread of its own (Django's database calls may not run inside the engine's
event loop) one chunk ahead of the engine, so the engine rarely waits and memory stays O(chunk):
a run of a million cases holds two chunks, never the set.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import connection

from apps.evals.sets.cases import iter_set_cases
from evalcore.types import Case

CHUNK = 1000
"""Cases per read."""

FIRST_CHUNK = 100
"""Cases in the first read: enough to fill the engine's first wave at the usual concurrency, read
in about a tenth of a full chunk's time, so the run's first cases start sooner (issue 30)."""


class CaseStream:
    """An async iterable of a set's cases (one split, or ``all``) in the set's order.

    Iterate it once, inside the event loop; call :meth:`close` afterwards (from any thread that
    is not the loop's) to end its reader thread and that thread's database connection.
    """

    def __init__(self, eval_set_id: int, split: str, *, chunk: int = CHUNK) -> None:
        self.eval_set_id = eval_set_id
        self.split = split
        self.chunk = chunk
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsite-cases")
        self._chunks: Iterator[list[Case]] | None = None
        self._first: Future[list[Case] | None] | None = None

    def prefetch(self) -> None:
        """Start reading the first chunk now (before the engine's loop starts): the run's first
        case is then ready when its clock starts (the read was ~1% of a 1,000 x 50 ms run's own
        time; issue 30). Call :meth:`close` afterwards even if the stream is never iterated."""
        if self._first is None and self._chunks is None:
            self._first = self._pool.submit(self._next_chunk)

    def _next_chunk(self) -> list[Case] | None:
        """The next chunk (runs on the reader thread), or ``None`` after the last."""
        if self._chunks is None:
            self._chunks = iter_set_cases(
                self.eval_set_id, self.split, chunk=self.chunk, first=min(FIRST_CHUNK, self.chunk)
            )
        return next(self._chunks, None)

    async def _iterate(self) -> AsyncIterator[Case]:
        loop = asyncio.get_running_loop()
        first, self._first = self._first, None
        pending: asyncio.Future[Any] = (
            asyncio.wrap_future(first, loop=loop)
            if first is not None
            else loop.run_in_executor(self._pool, self._next_chunk)
        )
        while True:
            chunk = await pending
            if chunk is None:
                return
            pending = loop.run_in_executor(self._pool, self._next_chunk)  # read ahead
            for case in chunk:
                yield case

    def __aiter__(self) -> AsyncIterator[Case]:
        return self._iterate()

    def close(self) -> None:
        """End the reader thread, closing its database connection first."""
        self._pool.submit(_close_connection).result()
        self._pool.shutdown(wait=True)


def _close_connection() -> None:
    connection.close()  # looked up here: this thread's connection, not the caller's
