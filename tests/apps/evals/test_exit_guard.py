"""The one guard around ``os._exit`` (apps.evals.runs.liveness.os_exit_guarded), used by a run's
executor and by a queue worker's shards: in a real child process, since the guarded call ends it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent(
    """
    import asyncio, os, sys, threading
    import django
    django.setup()
    from apps.evals.runs.liveness import current_run_id, os_exit_guarded

    def record(code, caller):
        on_main = threading.current_thread() is threading.main_thread()
        print(f"recorded {code} {caller} on the main thread: {on_main}", flush=True)
        if caller == "r:raises":
            raise RuntimeError("the record failed")

    async def target(run_id, code):
        current_run_id.set(run_id)
        os._exit(code)

    real = os._exit
    with os_exit_guarded(record):
        assert os._exit is not real
    assert os._exit is real  # put back on leaving
    with os_exit_guarded(record):
        asyncio.run(target(sys.argv[1], int(sys.argv[2])))
    print("not reached", flush=True)
    """
)


def run_child(run_id: str, code: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings"}
    return subprocess.run(
        [sys.executable, "-c", CHILD, run_id, str(code)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(("code", "status"), [(5, 5), (0, 3)])
def test_a_guarded_exit_records_its_caller_off_the_loop_then_ends_never_with_0(code: int, status: int) -> None:
    done = run_child("r:c1", code)
    assert done.returncode == status, done.stderr
    assert done.stdout.splitlines() == [f"recorded {code} r:c1 on the main thread: False"]


def test_a_record_that_fails_does_not_keep_the_process_alive() -> None:
    done = run_child("r:raises", 4)
    assert done.returncode == 4, done.stderr
    assert done.stdout.splitlines() == ["recorded 4 r:raises on the main thread: False"]
    assert "could not record os._exit(4) of r:raises" in done.stderr
