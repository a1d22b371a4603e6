"""``scripts/cluster.sh`` (``make cluster``) supervises its queue workers: one killed with
``kill -9`` is started again under a new name, and Ctrl-C still stops everything.

For real: the script starts PostgreSQL, Redis, the portal and one worker; the test waits on the
processes and the script's output, never on the clock.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from tests.support.cluster import ROOT, wait_until


def worker_pids(suffix: str) -> list[int]:
    """PIDs of ``evalsite queue_worker --name ...<suffix>`` processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"queue_worker" in argv and any(a.endswith(suffix.encode()) for a in argv):
            found.append(int(entry.name))
    return found


def test_a_killed_worker_is_started_again_and_ctrl_c_stops_it_all(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALSITE_") and k != "DATABASE_URL"}
    log = tmp_path / "cluster.log"
    with log.open("wb") as out:
        script = subprocess.Popen(
            ["bash", "scripts/cluster.sh", "-w", "1", "-p", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until("the cluster up", lambda: script.poll() is not None or "cluster up" in log.read_text())
        assert script.poll() is None, log.read_text()
        [first] = wait_until("the first worker", lambda: worker_pids("-w1-0"))
        os.kill(first, signal.SIGKILL)
        [second] = wait_until("the worker started again", lambda: worker_pids("-w1-1"))
        assert second != first
        assert "queue worker" in log.read_text() and "exited (137); starting it again" in log.read_text()
    finally:
        os.killpg(script.pid, signal.SIGINT)  # Ctrl-C: the script stops everything it started
        script.wait(timeout=300)
    wait_until("no worker left", lambda: not worker_pids("-w1-1") and not worker_pids("-w1-2"))
