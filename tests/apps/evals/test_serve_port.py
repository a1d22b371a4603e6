"""``evalsite serve`` on a port that is taken: one line naming the port and how to pick another,
a non-zero exit, no "serving" banner, and no task worker left behind (tester report, defect 1)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]

# The daphne path: the pre-check is skipped, so the port is found taken by daphne itself (a
# program took the port between the check and the listen).
SKIP_CHECK = """
import sys
import django
django.setup()
from django.core.management import call_command
from apps.evals.management.commands import serve
serve.check_port = lambda host, port: None
from django.core.management.base import CommandError
try:
    call_command("serve", "--port", sys.argv[1], "--worker-grace", "5")
except CommandError as exc:
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(exc.returncode)
"""


def _alive_with(mark: str) -> list[int]:
    """PIDs of live processes whose environment carries ``mark`` (a worker left behind would)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _serve_on_busy_port(tmp_path: Path, argv_for) -> tuple[subprocess.CompletedProcess[str], int]:
    mark = f"POLISH_{uuid.uuid4().hex}"
    env = {
        **os.environ,
        **subprocess_db_env(tmp_path / "db.sqlite3"),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "evalsite.settings",
        "EVALSITE_TEST_MARK": mark,
    }
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))  # a free port, then held: no SO_REUSEADDR, listening
        busy.listen(1)
        port = busy.getsockname()[1]
        result = subprocess.run(argv_for(port), env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert _alive_with(mark) == [], "a task worker of the failed serve is still running"
    return result, port


def _check(result: subprocess.CompletedProcess[str], port: int) -> None:
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "serving at" not in out and "Task worker" not in out, out
    lines = [line for line in result.stderr.splitlines() if str(port) in line]
    assert len(lines) == 1, out
    assert f"127.0.0.1:{port}" in lines[0] and "make demo PORT=" in lines[0] and "--port" in lines[0]
    assert "Traceback" not in out and "Listen failure" not in out


def test_serve_on_a_busy_port_exits_non_zero_before_saying_serving(tmp_path):
    result, port = _serve_on_busy_port(tmp_path, lambda p: [sys.executable, "manage.py", "serve", "--port", str(p)])
    _check(result, port)


def test_serve_also_stops_when_daphne_itself_cannot_listen(tmp_path):
    result, port = _serve_on_busy_port(tmp_path, lambda p: [sys.executable, "-c", SKIP_CHECK, str(p)])
    _check(result, port)
