"""Eager starts: run a coroutine's first step at once, and pay for a timeout only if it waits.

Most scorers, and no-op or cached targets, finish without ever waiting on anything; starting
them by hand (``coro.send(None)``) returns their value with no timer scheduled and cancelled
around them. One that does wait is handed on, already started, to :func:`resume` under its
timeout. Nothing can interrupt the synchronous first step anyway, so a timeout means the same.
"""

from __future__ import annotations

import types
from typing import Any


@types.coroutine
def resume(coro: Any, first: Any) -> Any:
    """Drive a coroutine that already ran up to its first suspension (``first``) to its end.

    Awaited inside a task, it behaves as ``await coro`` would have from that point: what the
    task sends or throws in (a cancellation, a timeout's) reaches the coroutine.
    """
    value = first
    while True:
        try:
            sent = yield value
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown in by the task (e.g. cancellation)
            try:
                value = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                value = coro.send(sent)
            except StopIteration as stop:
                return stop.value
