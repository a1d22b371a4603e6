"""The bounded hand-off between the engine (producers) and the result writer thread (consumer).

A ``queue.Queue`` takes a lock and notifies a condition on every ``put`` and ``get``, and wakes
the writer for every item: at ~4 items per case (two trace events, the result, the next case's
start) that was a fifth of a no-op case's cost, and each wake-up made the two threads fight for
the GIL. Here producers append to a deque under an uncontended lock and wake the writer only
when a batch becomes due: the first item of a batch (its wait starts), an urgent item (a
flush, the stop, or the engine's loop going idle with a case waiting to start), or a full batch.
The writer takes whole batches.

Bounded: :meth:`Handoff.put` blocks (in short steps, so signal handlers run) while
``maxsize`` items wait, so memory stays O(concurrency + batch) whatever the writer's speed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any


class Handoff:
    """A bounded FIFO of writer items that wakes its one consumer only when a batch is due.

    Args:
        maxsize: Items waiting at most; :meth:`put` blocks past it.
        batch: Items per batch at most (:meth:`take` returns at most this many).
        wait_s: How long the first item of a batch may wait for more (the durability delay).
    """

    def __init__(self, *, maxsize: int, batch: int, wait_s: float) -> None:
        self.maxsize = maxsize
        self.batch = batch
        self.wait_s = wait_s
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._space = threading.Event()
        self._urgent = False
        self._first_at = 0.0  # when the oldest waiting item arrived (monotonic seconds)

    def qsize(self) -> int:
        """Items waiting (not yet taken by the writer)."""
        return len(self._items)

    def full(self) -> bool:
        """Whether ``maxsize`` items wait (a producer would block)."""
        return len(self._items) >= self.maxsize

    def put(self, item: Any, *, urgent: bool = False, alive: Callable[[], bool] = lambda: True) -> bool:
        """Append ``item``; ``urgent`` makes the waiting items due now.

        While the hand-off is full, waits in steps of at most 0.1 s for the writer to take a
        batch, and gives up (returns False, the item dropped) once ``alive()`` says no writer
        drains it any more.

        Returns:
            True when the item was appended.
        """
        while len(self._items) >= self.maxsize:
            if not alive():
                return False
            self._space.clear()
            if len(self._items) >= self.maxsize:
                self._space.wait(0.1)
        with self._lock:
            items = self._items
            items.append(item)
            count = len(items)
            if count == 1:
                self._first_at = time.monotonic()
            if urgent:
                self._urgent = True
        if count == 1 or urgent or count >= self.batch:
            self._wakeup.set()
        return True

    def make_urgent(self) -> None:
        """Make the waiting items due now (e.g. the engine's loop is idle: cases wait to start)."""
        with self._lock:
            if not self._items:
                return
            self._urgent = True
        self._wakeup.set()

    def take(self, until: float = float("inf")) -> list[Any]:
        """Block until a batch is due (or the monotonic time ``until``), then return it.

        A batch is due when an urgent item waits, ``batch`` items wait, or the oldest waiting
        item has waited ``wait_s``. Returns at most ``batch`` items in arrival order (more stay
        due); an empty list when ``until`` came first with nothing due.
        """
        while True:
            now = time.monotonic()
            with self._lock:
                count = len(self._items)
                due = self._urgent or count >= self.batch or (count and now >= self._first_at + self.wait_s)
                if due or now >= until:
                    return self._drain(count)
                deadline = min(until, self._first_at + self.wait_s) if count else until
                self._wakeup.clear()
            self._wakeup.wait(None if deadline == float("inf") else max(0.0, deadline - now))

    def _drain(self, count: int) -> list[Any]:
        """Pop up to ``batch`` items (call holding the lock); what stays is due at once."""
        items = self._items
        if count <= self.batch:
            taken = list(items)
            items.clear()
            self._urgent = False
        else:
            taken = [items.popleft() for _ in range(self.batch)]
            self._urgent = True  # the rest is due now: it waited as long as this batch
            self._first_at = time.monotonic()
        if taken:
            self._space.set()
        return taken


def resolve_waiters(waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]) -> None:
    """Resolve futures awaited in event loops, from the writer thread: one wake-up per loop
    (``DjangoEvalStore.case_starting`` waits on them), none for a loop that has closed."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for loop, future in waiting:
        by_loop.setdefault(loop, []).append(future)
    for loop, futures in by_loop.items():

        def done(futures: list[asyncio.Future[None]] = futures) -> None:
            for future in futures:
                if not future.done():
                    future.set_result(None)

        try:
            loop.call_soon_threadsafe(done)
        except RuntimeError:  # the loop has closed: nobody waits any more
            pass
