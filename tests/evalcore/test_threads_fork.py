"""evalcore._util.threads after os.fork(): a child process inherits none of its parent's worker threads.

Found by mutation testing (mutmut forks one child per mutant from a process that has already run
evals): the child's pool still counted the parent's idle workers, handed its first job to a thread
that does not exist, and hung.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from evalcore._util.threads import run_blocking


def _call_in_time(value: int) -> int:
    """0 when ``run_blocking`` answers ``value`` within a generous deadline, else 1 or 2."""

    async def call() -> int:
        return int(await asyncio.wait_for(run_blocking(lambda: value), timeout=30))

    try:
        return 0 if asyncio.run(call()) == value else 1
    except TimeoutError:
        return 2


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_runs_blocking_calls_on_its_own_threads():
    assert _call_in_time(1) == 0  # leaves an idle worker thread in this process
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 3
        try:
            code = _call_in_time(2)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # 2: the call never ran (timed out)
    assert _call_in_time(3) == 0  # the parent's pool is untouched
