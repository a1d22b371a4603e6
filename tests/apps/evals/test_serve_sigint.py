"""``evalsite serve`` started with SIGINT ignored (a background job, ``nohup``, some CI runners)
still stops on SIGINT (issue 23): it takes Python's default Ctrl-C handling back at start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]


def _ignore_sigint() -> None:
    """``preexec_fn``: start the child as a background job does, with SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("worker", [False, True], ids=["no-worker", "with-worker"])
def test_serve_started_with_sigint_ignored_stops_on_sigint(tmp_path, worker):
    env = {
        **os.environ,
        **subprocess_db_env(tmp_path / "db.sqlite3"),
        "EVALSITE_DATA_DIR": str(tmp_path / "var"),
        "PYTHONUNBUFFERED": "1",
    }
    argv = [sys.executable, "-m", "evalsite.cli", "serve", "--port", str(_free_port()), "--worker-grace", "2"]
    server = subprocess.Popen(
        [*argv, *(() if worker else ("--no-worker",))],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ignore_sigint,
        start_new_session=True,  # its own group: cleanup below reaches the worker too
    )
    try:
        seen: list[str] = []
        assert server.stdout is not None
        for line in server.stdout:  # waits on the banner: the state, not a clock
            seen.append(line)
            if "Quit with CONTROL-C" in line:
                break
        assert any("serving at" in line for line in seen), "".join(seen)
        server.send_signal(signal.SIGINT)
        # the timeout only bounds a server that ignores the signal (the fault fixed here)
        assert server.wait(timeout=120) is not None
        rest = server.stdout.read()
        assert "Traceback" not in rest, rest
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
