"""The metric worker process, seen from Evalsite: start it, send it requests, await its answers.

One worker per Python interpreter, started on first use and shared by every library scorer of the
process (importing Ragas or DeepEval costs seconds; a worker pays it once). Requests travel as
JSON lines (the protocol: :mod:`evalcore.scorers.libraries.worker`); answers are matched to their
request by id, so any number of cases can be scored at once, from any event loop or thread.

Which Python runs a library: ``EVALSITE_<LIBRARY>_PYTHON`` (``EVALSITE_RAGAS_PYTHON``,
``EVALSITE_DEEPEVAL_PYTHON``, ``EVALSITE_AUTOEVALS_PYTHON``), else ``EVALSITE_METRICS_PYTHON``,
else this one (``sys.executable``: the library installed with ``pip install 'evalsite[ragas]'``).
Ragas and DeepEval pin ``openai`` < 3 and ``rich`` < 15; where Evalsite's environment has newer
ones, they live in a virtualenv of their own, named by one of these variables.

A worker that dies (killed, crashed) fails its pending requests with :class:`WorkerError` naming
the last lines of its stderr; the next request starts a new one.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextvars
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
"""The script the worker runs (standard library only at start; it never imports ``evalcore``)."""

STDERR_LINES = 40
"""How many of a worker's last stderr lines are kept, to explain its death."""

START_TIMEOUT_S = 60.0
"""Seconds a new worker may take to say it is ready."""


LIBRARY_PYTHON_SETTINGS = {
    "ragas": "EVALSITE_RAGAS_PYTHON",
    "deepeval": "EVALSITE_DEEPEVAL_PYTHON",
    "autoevals": "EVALSITE_AUTOEVALS_PYTHON",
}
"""The setting naming the Python of each library (spelled out, so the settings reference finds them)."""


class WorkerError(Exception):
    """The worker could not be started, or died before answering."""


def library_python(library: str, env: dict[str, str] | None = None) -> str:
    """The Python that runs ``library``'s metrics (see the module doc for the variables read).

    Args:
        library: ``"ragas"``, ``"deepeval"`` or ``"autoevals"``.
        env: The environment to read (default: ``os.environ``).
    """
    env = dict(os.environ) if env is None else env
    own = LIBRARY_PYTHON_SETTINGS.get(library, f"EVALSITE_{library.upper()}_PYTHON")
    for name in (own, "EVALSITE_METRICS_PYTHON"):
        value = (env.get(name) or "").strip()
        if value:
            return value
    return sys.executable


class MetricWorker:
    """One worker subprocess running :data:`WORKER_SCRIPT` in ``python``.

    Args:
        python: The interpreter's path.

    Attributes:
        versions: The metric libraries installed in that Python, name -> version (from its
            ready line; a library missing there is absent).
    """

    def __init__(self, python: str) -> None:
        self.python = python
        self.versions: dict[str, str] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]] = {}
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._proc: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._dead: str | None = None
        self._home: str | None = None

    def _start(self) -> subprocess.Popen[str]:
        """Start the process (the lock held) and its two reader threads."""
        self._home = tempfile.mkdtemp(prefix="evalsite-metrics-")  # libraries write caches in their cwd
        try:
            # Started in an empty context: outside the process scope of the case or run that happens
            # to ask first (evalcore.processes kills what a scope started when it ends), since the
            # worker serves every later case and run too. It ends at exit, or when its stdin closes.
            proc = contextvars.Context().run(
                subprocess.Popen,
                [self.python, str(WORKER_SCRIPT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                cwd=self._home,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,  # a Ctrl-C of the run is the run's, not the shared worker's
            )
        except OSError as exc:
            raise WorkerError(f"cannot start the metric worker with {self.python}: {exc}") from None
        self._proc, self._dead = proc, None
        self._ready.clear()
        self._stderr.clear()
        threading.Thread(target=self._read_answers, args=(proc,), name="metric-worker-out", daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc,), name="metric-worker-err", daemon=True).start()
        return proc

    def _read_stderr(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self._stderr.append(line.rstrip())

    def _read_answers(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                self._stderr.append(f"(stdout) {line.rstrip()}")
                continue
            if not isinstance(answer, dict):
                continue
            if answer.get("ready"):
                self.versions = {str(k): str(v) for k, v in (answer.get("versions") or {}).items()}
                self._ready.set()
                continue
            with self._lock:
                waiting = self._pending.pop(answer.get("id"), None)  # type: ignore[arg-type]
            if waiting is not None:
                loop, future = waiting
                loop.call_soon_threadsafe(_settle, future, answer, None)
        proc.wait()
        tail = " | ".join(list(self._stderr)[-5:]) or "no output on stderr"
        reason = f"the metric worker ({self.python}) exited with status {proc.returncode}: {tail}"
        with self._lock:
            if self._proc is proc:
                self._proc, self._dead = None, reason
            pending, self._pending = self._pending, {}
        self._ready.set()
        for loop, future in pending.values():
            loop.call_soon_threadsafe(_settle, future, None, WorkerError(reason))

    async def ready(self) -> dict[str, str]:
        """Start the worker if needed and wait for its ready line; the libraries' versions.

        Raises:
            WorkerError: It could not start, or exited before it was ready.
        """
        with self._lock:
            if self._proc is None:
                self._start()
        await asyncio.to_thread(self._ready.wait, START_TIMEOUT_S)
        if not self._ready.is_set():
            raise WorkerError(f"the metric worker ({self.python}) said nothing within {START_TIMEOUT_S:g} s")
        if self._proc is None:
            raise WorkerError(self._dead or "the metric worker exited")
        return dict(self.versions)

    async def ask(self, request: dict[str, Any], *, timeout_s: float | None) -> dict[str, Any]:
        """Send one request and await its answer (see the worker's protocol).

        Raises:
            WorkerError: The worker could not start or died before answering.
            TimeoutError: No answer within ``timeout_s`` seconds.
        """
        await self.ready()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None:
                raise WorkerError(self._dead or "the metric worker exited")
            request_id = next(self._ids)
            self._pending[request_id] = (loop, future)
            try:
                proc.stdin.write(json.dumps({**request, "id": request_id}) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                self._pending.pop(request_id, None)
                raise WorkerError(f"the metric worker ({self.python}) stopped reading: {exc}") from None
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        finally:
            with self._lock:
                self._pending.pop(request_id, None)

    def close(self) -> None:
        """Stop the worker (its stdin closed, then killed after 5 s) and remove its folder."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    @property
    def pid(self) -> int | None:
        """The running process's id, or ``None``."""
        proc = self._proc
        return None if proc is None else proc.pid


def _settle(future: asyncio.Future[dict[str, Any]], answer: dict[str, Any] | None, error: Exception | None) -> None:
    if future.done():
        return  # its caller gave up (timeout, cancellation)
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(answer or {})


_WORKERS: dict[str, MetricWorker] = {}
_WORKERS_LOCK = threading.Lock()


def worker_for(python: str) -> MetricWorker:
    """The shared worker of ``python`` (created, not yet started, on first use)."""
    with _WORKERS_LOCK:
        worker = _WORKERS.get(python)
        if worker is None:
            worker = _WORKERS[python] = MetricWorker(python)
        return worker


@atexit.register
def close_workers() -> None:
    """Stop every worker this process started (also run at exit)."""
    with _WORKERS_LOCK:
        workers = list(_WORKERS.values())
        _WORKERS.clear()
    for worker in workers:
        worker.close()
