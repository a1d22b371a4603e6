"""Run blocking calls off the event loop on daemon threads.

``asyncio.to_thread`` uses the loop's default executor, whose threads are joined when the loop
closes and again at interpreter exit: one sync target that never returns would keep the whole
process alive long after its case timed out. Here each blocked call holds a daemon thread
(never joined), so a timed-out call is abandoned and the process still exits.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

_MAX_IDLE = 64


class _DaemonPool:
    """Daemon worker threads, started on demand, reused while idle (at most 64 kept idle)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.AbstractEventLoop, asyncio.Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # one idle worker will take this job
        self._jobs.put((fn, loop, future))
        if start:
            threading.Thread(target=self._work, name="evalcore-sync", daemon=True).start()

    def _work(self) -> None:
        while True:
            fn, loop, future = self._jobs.get()
            try:
                result, error = fn(), None
            except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                result, error = None, exc
            except BaseException as exc:  # noqa: BLE001
                # KeyboardInterrupt / SystemExit raised by code on a worker thread is that code's
                # failure, not the user's Ctrl-C (which reaches the main thread as a signal): an
                # error like any other, so the event loop is not torn down from a task
                result, error = None, RuntimeError(_describe(exc))
            if not loop.is_closed():
                loop.call_soon_threadsafe(_settle, future, result, error)
            with self._lock:
                if self._idle >= _MAX_IDLE:
                    return
                self._idle += 1


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"sys.exit({exc.code!r}) called on a worker thread"
    detail = str(exc)
    return f"{type(exc).__name__} raised by a call on a worker thread" + (f": {detail}" if detail else "")


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_pool = _DaemonPool()


def _reset_after_fork() -> None:
    """A forked child has none of its parent's threads: counting the parent's idle workers
    would hand every job to a thread that does not exist (the child hangs on its first call)."""
    global _pool
    _pool = _DaemonPool()


os.register_at_fork(after_in_child=_reset_after_fork)


async def run_blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await ``fn(*args, **kwargs)`` run on a daemon thread (context variables carried over).

    Cancelling the awaiting task (e.g. a timeout) abandons the call: its thread finishes on its
    own, or never, without holding up the process at exit.
    """
    import contextvars

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()
    _pool.submit(lambda: context.run(fn, *args, **kwargs), loop, future)
    return await future
