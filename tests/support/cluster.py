"""A local cluster for the tests and ``bench/bench_cluster.py``: PostgreSQL and Redis started by
``scripts/cluster.sh services DIR`` (the script ``make cluster`` runs), queue workers started
as ``evalsite queue_worker`` subprocesses (the command the script starts), and the CLI run against it.

Everything is real: RQ on Redis, the workers' forked work-horses, PostgreSQL. State is read
straight from the cluster's database (psycopg), so a test waits on what the database says.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cluster.sh"
EVALSITE = Path(sys.executable).with_name("evalsite")


def children(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


class Cluster:
    """PostgreSQL + Redis in ``folder`` and the workers this object starts.

    Args:
        env: Extra environment for every process (e.g. ``EVALSITE_SHARD_LEASE_S``).

    The services live in a fresh folder under /tmp (PostgreSQL runs as the ``postgres`` user
    under root, which cannot enter pytest's private temp folders); :meth:`close` removes it.
    """

    def __init__(self, env: dict[str, str] | None = None) -> None:
        folder = self.folder = Path(tempfile.mkdtemp(prefix="evalsite-cluster-"))
        out = subprocess.run(
            ["bash", str(SCRIPT), "services", str(folder)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHON": sys.executable},
            timeout=300,
        )
        self.services = dict(line.split("=", 1) for line in out.stdout.split() if "=" in line)
        data = folder / "data"
        data.mkdir()
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("EVALSITE_DB", "EVALSITE_COMMAND")},
            **self.services,
            "EVALSITE_DATA_DIR": str(data),
            "EVALSITE_SHARDED_RUNS": "1",
            **(env or {}),
        }
        self.workers: list[subprocess.Popen[bytes]] = []
        self.servers: list[subprocess.Popen[bytes]] = []
        self.evalsite("migrate", "--verbosity", "0")

    def evalsite(self, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
        """Run an ``evalsite`` command against the cluster (output captured)."""
        return subprocess.run(
            [str(EVALSITE), *args],
            cwd=ROOT,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_eval(self, *args: str, **env: str) -> subprocess.Popen[str]:
        """Start ``evalsite eval ... --executor queue`` in the background."""
        return subprocess.Popen(
            [str(EVALSITE), "eval", *args, "--executor", "queue", "--quiet"],
            cwd=ROOT,
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def start_worker(self, **env: str) -> subprocess.Popen[bytes]:
        """Start one ``evalsite queue_worker`` in a session of its own."""
        worker = subprocess.Popen(
            [str(EVALSITE), "queue_worker"],
            cwd=ROOT,
            env={**self.env, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.workers.append(worker)
        return worker

    def start_serve(self, **env: str) -> tuple[int, Path]:
        """Start the portal (``evalsite serve --no-worker``, daphne) on a free loopback port, as
        ``make cluster`` does; wait until it listens. Returns its port and its output's file."""
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        log = self.folder / f"serve-{port}.log"
        with log.open("wb") as out:
            server = subprocess.Popen(
                [str(EVALSITE), "serve", "--no-worker", "--port", str(port)],
                cwd=ROOT,
                env={**self.env, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.servers.append(server)
        wait_until("serve listening", lambda: server.poll() is not None or "CONTROL-C" in log.read_text())
        assert server.poll() is None, log.read_text()
        return port, log

    def kill_worker(self, worker: subprocess.Popen[bytes]) -> None:
        """``kill -9`` a worker and its work-horse (as when its machine dies)."""
        horses = children(worker.pid)
        for pid in [worker.pid, *horses]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        worker.wait()
        for pid in horses:
            _reap(pid)

    def stop_workers(self) -> None:
        """Stop every worker this object started (SIGTERM twice: at once; then SIGKILL)."""
        for worker in self.workers:
            if worker.poll() is None:
                for _ in range(2):
                    try:
                        os.killpg(worker.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        break
                    time.sleep(0.05)
        for worker in self.workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        self.workers.clear()

    def sql(self, query: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one query on the cluster's database."""
        import psycopg

        with psycopg.connect(self.services["DATABASE_URL"], autocommit=True) as conn:
            return conn.execute(query, list(params)).fetchall()

    def run_row(self, eval_run_id: str) -> dict[str, Any]:
        """The eval run's status and counters."""
        cols = ("status", "n_total", "n_done", "n_passed", "n_errored", "error", "n_shards")
        row = self.sql(f"SELECT {', '.join(cols)} FROM evals_evalrun WHERE id = %s", [eval_run_id])[0]
        return dict(zip(cols, row, strict=True))

    def latest_run_id(self) -> str:
        return str(self.sql("SELECT id FROM evals_evalrun ORDER BY started DESC NULLS LAST LIMIT 1")[0][0])

    def close(self) -> None:
        """Stop the portals and workers, PostgreSQL and Redis; remove the folder."""
        for server in self.servers:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        self.stop_workers()
        subprocess.run(["bash", str(SCRIPT), "stop", str(self.folder)], check=False, timeout=120)


def wait_until(what: str, check: Callable[[], Any], timeout_s: float = 300.0, every_s: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout_s``
    (a bound on a hang, not a timing assumption)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every_s)


def _reap(pid: int) -> None:
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return  # a zombie of an init that has not reaped it yet: dead
        except OSError:
            return
        time.sleep(0.01)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


AGENTS = """
import os
import time

from evalcore.discovery import TargetSpec

DELAY_S = {delay_s!r}
CPU_MS = {cpu_ms!r}
GATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "open")


async def _sleepy(text):
    import asyncio

    if DELAY_S:
        await asyncio.sleep(DELAY_S)
    return text.upper()


async def _gated(text):
    import asyncio

    while not os.path.exists(GATE):  # the test lets the cases finish by creating the file
        await asyncio.sleep(0.02)
    return text.upper()


def _cpu(text):
    # CPU_MS of this thread's own CPU time (not wall time: with several cases in threads of one
    # process, wall-time windows overlap while they share the GIL, and a case costs less CPU)
    end = time.thread_time() + CPU_MS / 1000
    n = 0
    while time.thread_time() < end:
        n += 1
    return text.upper()


def _exits(text):
    if text == "boom":
        os._exit(3)
    return text.upper()


def _segfaults(text):
    if text == "boom":
        import ctypes

        ctypes.string_at(0)  # SIGSEGV: no Python code runs after it
    return text.upper()


VARIANTS = {"sleepy": _sleepy, "cpu": _cpu, "exits": _exits, "segfaults": _segfaults, "gated": _gated}
upper = TargetSpec(id="upper", variants=VARIANTS, scorers=["exact_match"])
"""


def write_agents(folder: Path, *, delay_s: float = 0.0, cpu_ms: float = 0.0) -> Path:
    """An agents folder with target ``upper``: variants ``sleepy`` (``delay_s`` of asyncio
    sleep), ``cpu`` (``cpu_ms`` of busy Python, counted in the calling thread's CPU time),
    ``exits`` and ``segfaults`` (the input
    ``boom`` ends the process with ``os._exit(3)`` / a segmentation fault), ``gated`` (waits
    until the file ``open`` exists in the folder); answers the input upper-cased. The workers
    import it, so the timings are written into the module (one folder per setting)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "upper_agent.py").write_text(
        AGENTS.replace("{delay_s!r}", repr(delay_s)).replace("{cpu_ms!r}", repr(cpu_ms))
    )
    return folder


def write_set(path: Path, n: int, *, boom: Iterable[int] = ()) -> Path:
    """``n`` cases ``k00000..``: input ``wN`` (``boom`` at the given indexes), split dev."""
    bad = set(boom)
    rows = [
        {
            "id": f"k{i:05d}",
            "input": "boom" if i in bad else f"w{i}",
            "expected": "BOOM" if i in bad else f"W{i}",
            "split": "dev",
        }
        for i in range(n)
    ]
    return write_jsonl(path, rows)
