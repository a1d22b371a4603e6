"""A run's cases streamed from the database: the engine's case source for a whole-set run.

:func:`apps.evals.sets.cases.iter_set_cases` reads the set a chunk at a time; :class:`CaseStream` runs
those reads on a thread of its own (Django's database calls may not run inside the engine's
event loop) one chunk ahead of the engine, so the engine rarely waits and memory stays O(chunk):
a run of a million cases holds two chunks, never the set.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connection

from apps.evals.sets.cases import iter_set_cases
from evalcore.types import Case

CHUNK = 1000
"""Cases per read."""


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

    def _next_chunk(self) -> list[Case] | None:
        """The next chunk (runs on the reader thread), or ``None`` after the last."""
        if self._chunks is None:
            self._chunks = iter_set_cases(self.eval_set_id, self.split, chunk=self.chunk)
        return next(self._chunks, None)

    async def _iterate(self) -> AsyncIterator[Case]:
        loop = asyncio.get_running_loop()
        pending: asyncio.Future[Any] = loop.run_in_executor(self._pool, self._next_chunk)
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
