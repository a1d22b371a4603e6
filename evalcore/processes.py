"""The processes a case starts, each in a process group of its own, ended with the work that started them.

A scorer (a HumanEval-style code check) or a target may start subprocesses. When the runner
abandons the call at its timeout, the call's thread or task is left behind, and so would be its
children and *their* children, running on after the run and the CLI have exited (re-parented to
PID 1). Inside a :func:`process_scope`, every :class:`subprocess.Popen` (``subprocess.run``,
``check_output``, asyncio's subprocesses: all go through it) starts as the leader of a new
process group (``process_group=0``) unless the caller chose a group or session itself, and the
scope records it. :meth:`ProcessScope.kill` sends ``SIGKILL`` to every recorded group, which
reaches the grandchildren too (they inherit the group unless they leave it on purpose).

The runner opens one scope per run, one per target call and one per scorer call: a call that
times out has all its groups killed then; a call that returns has the groups whose leader has
exited killed (their strays); whatever is still running when the run ends (a server a target
left behind) is killed with the run's scope. The scope is a context variable, so it
follows the call into the daemon thread a plain-``def`` scorer runs on
(:func:`evalcore._util.threads.run_blocking` copies the context).

Not covered: processes started without ``subprocess.Popen`` (``os.system``, ``os.fork``,
``multiprocessing``). A group is killed by number; after its last member exits, the number could
in principle be given to a new group, so groups are killed only when the scope ends, never
later.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

_SCOPE: contextvars.ContextVar[ProcessScope | None] = contextvars.ContextVar("evalcore_process_scope", default=None)
_INSTALL_LOCK = threading.Lock()
_ORIGINAL_INIT: Any = None
_OPEN_ROOTS: set[ProcessScope] = set()
"""Outermost scopes not ended yet, for :func:`kill_all` (an exit that skips their ``finally``)."""


class ProcessScope:
    """The process groups started inside one piece of work (a run, a target call, a scorer call).

    A group started in a nested scope is recorded in every enclosing scope too, so ending the
    run's scope ends what a finished case left running.

    Attributes:
        parent: The enclosing scope, or ``None``.
    """

    def __init__(self, parent: ProcessScope | None = None) -> None:
        self.parent = parent
        # pid -> (the Popen, it leads its own group: killpg, else kill the process alone)
        self._started: dict[int, tuple[subprocess.Popen[Any], bool]] = {}
        self._lock = threading.Lock()
        self._killed = False

    def add(self, popen: subprocess.Popen[Any], *, own_group: bool) -> None:
        """Record a started process (here and in every enclosing scope); one started after this
        scope was killed (an abandoned scorer's thread going on to its next test) is killed at once."""
        scope: ProcessScope | None = self
        while scope is not None:
            with scope._lock:
                scope._started[popen.pid] = (popen, own_group)
            scope = scope.parent
        if self._killed:
            self.kill()

    @property
    def pids(self) -> list[int]:
        """The recorded processes' ids (group leaders for those started in a group of their own)."""
        with self._lock:
            return list(self._started)

    def kill(self) -> int:
        """``SIGKILL`` every recorded group (a process that chose its own group: the process alone),
        and forget them here and in the enclosing scopes.

        Never raises: a group already gone, or not ours to signal, is skipped.

        Returns:
            How many groups (or processes) were signalled.
        """
        self._killed = True
        return self._end(lambda popen: True)

    def sweep(self) -> int:
        """Kill what is left of the groups whose leader has exited (the strays a finished tool
        left behind: a shell's background job, a test's forked child); a leader still running is
        kept (a server a target reuses), for the enclosing scope to end.

        Returns:
            How many groups were signalled.
        """
        return self._end(lambda popen: popen.poll() is not None)

    def _end(self, which: Any) -> int:
        with self._lock:
            chosen = {pid: entry for pid, entry in self._started.items() if which(entry[0])}
        killed = 0
        for pid, (_, own_group) in chosen.items():
            scope: ProcessScope | None = self
            while scope is not None:
                with scope._lock:
                    scope._started.pop(pid, None)
                scope = scope.parent
            try:
                if own_group:
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            killed += 1
        return killed


@contextlib.contextmanager
def process_scope(*, kill_on_exit: bool = True) -> Iterator[ProcessScope]:
    """Record the processes started inside the block (nested in any open scope).

    Args:
        kill_on_exit: Kill the recorded groups when the block ends (a run: what its cases left
            running); ``False`` for one call, whose processes may be reused later: the caller
            kills them on timeout (:meth:`ProcessScope.kill`) and sweeps after it
            (:meth:`ProcessScope.sweep`), and the enclosing scope ends the rest.

    Yields:
        The new :class:`ProcessScope`.
    """
    _install()
    scope = ProcessScope(_SCOPE.get())
    if scope.parent is None:
        with _INSTALL_LOCK:
            _OPEN_ROOTS.add(scope)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)
        if kill_on_exit:
            scope.kill()
        with _INSTALL_LOCK:
            _OPEN_ROOTS.discard(scope)


def kill_all() -> int:
    """Kill every group recorded by any open scope: for an exit that skips the scopes' ``finally``
    (``os._exit`` after a second Ctrl-C); also run at interpreter exit.

    Returns:
        How many groups (or processes) were signalled.
    """
    with _INSTALL_LOCK:
        roots = list(_OPEN_ROOTS)
    return sum(scope.kill() for scope in roots)


def _install() -> None:
    """Wrap :meth:`subprocess.Popen.__init__` once: inside a scope, a new group, recorded."""
    global _ORIGINAL_INIT
    with _INSTALL_LOCK:
        if _ORIGINAL_INIT is not None:
            return
        original = subprocess.Popen.__init__

        def init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
            scope = _SCOPE.get()
            if scope is None or os.name != "posix":
                original(self, *args, **kwargs)
                return
            chosen = bool(kwargs.get("start_new_session")) or kwargs.get("process_group") not in (None, -1)
            if not chosen:
                kwargs["process_group"] = 0
            original(self, *args, **kwargs)
            own = not chosen or bool(kwargs.get("start_new_session")) or kwargs.get("process_group") == 0
            scope.add(self, own_group=own)

        subprocess.Popen.__init__ = init  # type: ignore[method-assign]
        _ORIGINAL_INIT = original
        atexit.register(kill_all)
