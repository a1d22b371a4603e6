"""Signals during a run: tell a real Ctrl-C from a target that raises ``KeyboardInterrupt``.

Two pieces:

* :func:`counting_signals` (used by the runner around a run, main thread only) wraps whatever
  SIGINT / SIGTERM handlers are installed with a counter. When a target or a scorer raises
  ``KeyboardInterrupt`` or ``SystemExit`` and no signal arrived during that call, it was the
  code's own doing: the runner records it as that case's error and the run goes on. When a
  signal did arrive, it is the user's (or the worker's) and is let through.
* :func:`two_stage_ctrl_c` (installed by a host such as ``evalsite eval``) makes the first
  Ctrl-C stop the run cleanly: the running :func:`evalcore.runner.run_eval` is cancelled, its
  finished cases are kept, and ``KeyboardInterrupt`` is raised from it. The second Ctrl-C calls
  the host's ``force`` (the CLI exits at once).

Without :func:`two_stage_ctrl_c`, whatever handler is installed acts as usual (under
``asyncio.run`` the first Ctrl-C cancels the main task, which also stops a run cleanly).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

from evalcore.types import ErrorInfo

_COUNTED = (signal.SIGINT, signal.SIGTERM)


class _State:
    def __init__(self) -> None:
        self.signals = 0  # signals seen by a counting shim
        self.ctrl_c = 0  # SIGINTs seen by the two-stage handler
        self.stoppers: list[Callable[[], None]] = []
        self.force: Callable[[], None] | None = None
        self.notice: str = ""
        self.first_signal: int = 0  # the signal that stopped the run (SIGINT or SIGTERM)


_state = _State()


def signal_count() -> int:
    """How many SIGINT / SIGTERM have arrived while a run was watching (monotonic)."""
    return _state.signals


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def counting_signals() -> Iterator[None]:
    """Count SIGINT / SIGTERM while inside, then call whatever handler was installed.

    A no-op outside the main thread (signals reach only the main thread, so code on other
    threads never sees a signal's ``KeyboardInterrupt``) and for ignored / default dispositions.
    """
    if not _in_main_thread():
        yield
        return
    installed: list[tuple[signal.Signals, Any, Any]] = []
    for signum in _COUNTED:
        previous = signal.getsignal(signum)
        if not callable(previous) or getattr(previous, "_evalcore_counting", False):
            continue

        def shim(num: int, frame: Any, _previous: Any = previous) -> None:
            _state.signals += 1
            _previous(num, frame)

        shim._evalcore_counting = True  # type: ignore[attr-defined]
        signal.signal(signum, shim)
        installed.append((signum, shim, previous))
    try:
        yield
    finally:
        for signum, shim, previous in installed:
            if signal.getsignal(signum) is shim:
                signal.signal(signum, previous)


@contextlib.contextmanager
def stop_on_ctrl_c(stop: Callable[[], None]) -> Iterator[None]:
    """While inside, the first Ctrl-C under :func:`two_stage_ctrl_c` calls ``stop()``."""
    _state.stoppers.append(stop)
    try:
        yield
    finally:
        _state.stoppers.remove(stop)


def _two_stage(signum: int, frame: Any) -> None:
    _state.ctrl_c += 1
    if _state.ctrl_c == 1:
        _state.first_signal = signum
        if _state.stoppers:
            notice = _state.notice
            if signum == signal.SIGTERM:
                notice = notice.replace("Ctrl-C:", "SIGTERM:", 1).replace("(Ctrl-C again", "(SIGTERM or Ctrl-C again")
            if notice:
                os.write(2, notice.encode())
            for stop in list(_state.stoppers):
                stop()
            return
        raise KeyboardInterrupt  # nothing running yet: a plain Ctrl-C
    if _state.force is not None:
        _state.force()
    raise KeyboardInterrupt


@contextlib.contextmanager
def two_stage_ctrl_c(force: Callable[[], None] | None = None, notice: str = "") -> Iterator[None]:
    """First Ctrl-C (or SIGTERM): stop the running eval cleanly; second: call ``force`` (else raise).

    Installed only in the main thread: over Python's default SIGINT handler (an ignored SIGINT,
    as in background jobs, stays ignored) and over SIGTERM's default disposition (a ``kill`` or a
    CI runner's timeout then stops the run as Ctrl-C does instead of killing it mid-write).
    ``force`` runs inside the signal handler: keep it short (e.g. print a line and
    ``os._exit``). ``notice`` is written to stderr when the first signal stops a run ("Ctrl-C:"
    at its start reads "SIGTERM:" for that signal). :func:`stopping_signal` tells which one came.
    """
    if not _in_main_thread():
        yield
        return
    installed: list[tuple[signal.Signals, Any]] = []
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        installed.append((signal.SIGINT, signal.default_int_handler))
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        installed.append((signal.SIGTERM, signal.SIG_DFL))
    _state.ctrl_c = 0
    _state.first_signal = 0
    _state.force = force
    _state.notice = notice
    for signum, _previous in installed:
        signal.signal(signum, _two_stage)
    try:
        yield
    finally:
        _state.force = None
        _state.notice = ""
        for signum, previous in installed:
            if signal.getsignal(signum) is _two_stage:
                signal.signal(signum, previous)


def stopping_signal() -> int:
    """The signal number that stopped the last run under :func:`two_stage_ctrl_c` (0: none).

    A host exits with ``128 + stopping_signal()`` (130 for Ctrl-C, 143 for SIGTERM).
    """
    return _state.first_signal


@contextlib.contextmanager
def waking_on_signals(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Wake ``loop`` when a signal arrives, so its Python handler runs at once.

    A signal may be delivered to any thread (e.g. one running a sync target); Python runs the
    handler only when the main thread executes bytecode, and an idle event loop sits in
    ``select()`` until something else happens. A wakeup fd read by the loop ends that wait.
    Left alone when a wakeup fd is already set (``loop.add_signal_handler`` sets one) or
    outside the main thread.
    """
    if not _in_main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:
        previous = None
    if previous is None or previous != -1:
        if previous is not None:
            signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        yield
        return

    def drain() -> None:
        with contextlib.suppress(OSError):
            while reader.recv(256):
                pass

    loop.add_reader(reader.fileno(), drain)
    try:
        yield
    finally:
        loop.remove_reader(reader.fileno())
        signal.set_wakeup_fd(-1)
        reader.close()
        writer.close()


def raised_by_code(exc: BaseException, signals_before: int) -> bool:
    """True when a non-``Exception`` came from the called code itself, not from outside.

    ``CancelledError`` is ours when this task has a pending cancel request (a timeout, the run
    being stopped); otherwise the code raised it. ``KeyboardInterrupt`` / ``SystemExit`` are a
    signal's (Ctrl-C, a worker told to stop) when a signal arrived during the call.
    """
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is not None and task.cancelling() == 0
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return signal_count() == signals_before
    return not isinstance(exc, GeneratorExit)


def foreign_error(exc: BaseException, who: str) -> ErrorInfo:
    """The error kept for a ``BaseException`` raised by a target's or scorer's own code."""
    kind = type(exc).__name__
    detail = str(exc)
    if isinstance(exc, SystemExit):
        message = f"the {who} called sys.exit({exc.code!r})"
    elif isinstance(exc, KeyboardInterrupt):
        message = f"the {who} raised KeyboardInterrupt itself (not a Ctrl-C)" + (f": {detail}" if detail else "")
    elif isinstance(exc, asyncio.CancelledError):
        message = f"the {who} raised CancelledError itself (not a cancellation of the run)" + (
            f": {detail}" if detail else ""
        )
    else:
        message = f"{detail or repr(exc)} (a BaseException subclass raised by the {who})"
    return ErrorInfo(kind, message)
