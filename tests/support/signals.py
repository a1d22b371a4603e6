"""Signal dispositions for the test process and the processes tests start.

Background jobs, ``nohup`` and some CI runners start processes with SIGINT *ignored*, and an
ignored signal stays ignored across ``exec``. Python then installs no ``KeyboardInterrupt``
handler, so a test that presses Ctrl-C (``os.kill(pid, SIGINT)``) on itself or on a child sees
nothing happen. :func:`restore_default_sigint` gives the test process Python's usual Ctrl-C
handling (its children then start with the default disposition, since a *handled* signal is
reset to default by ``exec``), and :func:`default_signals_in_child` is the ``preexec_fn`` for
a child a test will interrupt, whatever its parent did in between.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


def restore_default_sigint() -> None:
    """Make SIGINT raise ``KeyboardInterrupt`` in this process, as it does in a terminal."""
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def default_signals_in_child() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: SIGINT and SIGTERM at their default disposition.

    Runs in the child between ``fork`` and ``exec``; the default disposition survives ``exec``,
    and a Python child then installs its ``KeyboardInterrupt`` handler as it does in a terminal.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def signal_handlers_kept() -> Iterator[None]:
    """Put back SIGINT's and SIGTERM's handlers as they were when the block started.

    For code a test runs in-process that installs handlers and leaves them: django-tasks-db's
    ``db_worker`` sets its own and keeps them after a ``--batch`` run, so a later test's
    ``os.kill(os.getpid(), SIGINT)`` would reach a worker that is long gone instead of the code
    under test.
    """
    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in kept.items():
                if handler is not None and signal.getsignal(signum) is not handler:
                    signal.signal(signum, handler)
