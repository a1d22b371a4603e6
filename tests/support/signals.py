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

import signal


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
