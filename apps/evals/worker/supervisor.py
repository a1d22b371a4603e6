"""The task worker that ``evalsite serve`` starts and keeps alive.

``serve`` starts ``evalsite worker`` as a child (its own session: Ctrl-C reaches serve only,
which then stops the worker in order) with ``--parent-pid`` (the worker stops when serve is
gone, even after a ``kill -9``), a worker id of its own and the count of restarts so far (both
recorded on the worker's ``TaskWorker`` row, so ``/status/`` shows them from the database).

When the worker ends without being asked to (a target called ``os._exit``, segfaulted, or the
OOM killer struck), :class:`WorkerSupervisor` records how it ended, marks its run interrupted
(the ``os._exit`` guard already counted the exit against the case that called it), queues the
run's remaining cases again (:func:`resume_runs_of`: the case that ended the worker is errored
on that resume, not run again) and starts a new worker within a second.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, TaskWorker
from apps.evals.runs.config import AutoResume, read_run_config
from apps.evals.runs.liveness import RunBusy
from apps.evals.runs.resume import ResumeRefused
from apps.evals.worker.heartbeats import mark_worker_stopped, task_run_id
from apps.evals.worker.sweeper import Sweeper
from apps.evals.worker.tasks import EXECUTOR, mark_orphaned_runs, resume_in_worker

log = logging.getLogger(__name__)

UP_LONG_ENOUGH_S = 5.0
"""A worker that dies sooner than this after its start, without having taken a task, is restarted
with a growing delay (0.5 s doubling to 30 s), as a broken installation would need."""


def auto_resume_max() -> int:
    """How often one run is resumed automatically after ending its worker
    (``EVALSITE_AUTO_RESUME_MAX``, default 20); a resume without progress stops it sooner."""
    return int(getattr(settings, "EVALSITE_AUTO_RESUME_MAX", 20))


def worker_command(worker_id: str = "", *, parent_pid: int | None = None, restarts: int = 0) -> list[str]:
    """The argv that starts ``evalsite worker`` with this interpreter and these settings."""
    manage = Path(settings.BASE_DIR) / "manage.py"
    base = [sys.executable, str(manage)] if manage.exists() else [sys.executable, "-m", "django"]
    argv = [*base, "worker", "--no-reload", "--interval", "0.5", "--verbosity", "0", "--restarts", str(restarts)]
    if worker_id:
        argv += ["--worker-id", worker_id]
    if parent_pid is not None:
        argv += ["--parent-pid", str(parent_pid)]
    return argv


def start_worker(write: Callable[[str], None], *, worker_id: str = "", restarts: int = 0) -> subprocess.Popen[bytes]:
    """Mark the runs of stopped workers interrupted, then start the task worker in its own session,
    watching this process (``--parent-pid``). ``write`` prints a line."""
    orphans = mark_orphaned_runs()  # never a live worker's runs (workers.live_executors)
    if orphans:
        write(f"Marked {orphans} run{'s' if orphans != 1 else ''} of a stopped worker as interrupted.")
    argv = worker_command(worker_id or uuid.uuid4().hex, parent_pid=os.getpid(), restarts=restarts)
    return subprocess.Popen(argv, env=os.environ.copy(), start_new_session=True)


def stop_worker(worker: subprocess.Popen[bytes], grace_s: float, write: Callable[[str], None]) -> None:
    """Ask the worker to finish its current task (up to ``grace_s`` seconds), then stop it now."""
    if worker.poll() is not None:
        return
    worker.send_signal(signal.SIGTERM)  # first signal: finish the current task, then exit
    try:
        worker.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        write("Stopping the worker now; its current run will be marked interrupted.")
        worker.send_signal(signal.SIGTERM)  # second signal: stop now
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def exit_description(code: int | None) -> str:
    """``code 4`` or ``signal SIGSEGV`` for a ``Popen.returncode``."""
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def runs_taken_by(worker_id: str) -> list[str]:
    """The eval runs whose task the worker ``worker_id`` took (its last claimant), oldest first."""
    from django_tasks_db.models import DBTaskResult

    started = TaskWorker.objects.filter(pk=worker_id).values_list("started", flat=True).first()
    rows = DBTaskResult.objects.filter(task_path__endswith="run_eval_task", started_at__isnull=False)
    if started is not None:
        rows = rows.filter(started_at__gte=started)
    ids = []
    for worker_ids, args_kwargs in rows.order_by("started_at").values_list("worker_ids", "args_kwargs"):
        run_id = task_run_id(args_kwargs)
        if worker_ids and worker_ids[-1] == worker_id and run_id and run_id not in ids:
            ids.append(run_id)
    return ids


def resume_runs_of(worker_id: str) -> list[tuple[str, str]]:
    """Queue again the runs a dead worker left interrupted (task-worker runs only).

    A run is resumed while it progresses: each resume must find more stored results or more
    crash counts than the last one (``crash_suspects``: the case that ended the worker is
    errored on the next resume), and at most :func:`auto_resume_max` times. A run that is not
    resumed keeps ``interrupted`` and its error says why, so it can be resumed from its page.

    Returns:
        ``(run id, what happened)`` per run: ``"resumed"`` or the reason it was not.
    """
    outcomes: list[tuple[str, str]] = []
    for run_id in runs_taken_by(worker_id):
        eval_run = EvalRun.objects.select_related("eval_set").filter(pk=run_id).first()
        if eval_run is None or eval_run.status != EvalRunStatus.INTERRUPTED:
            continue
        config = read_run_config(eval_run.config)
        if config.executor != EXECUTOR:
            continue
        state = config.auto_resume
        results = EvalResult.objects.filter(eval_run=eval_run).count()
        suspects = sorted((eval_run.crash_suspects or {}).items())
        count = state.count if state is not None else 0
        if count >= auto_resume_max():
            why = f"its worker ended {count + 1} times"
        elif state is not None and state.results == results and state.suspects == suspects:
            why = "its worker ended again without a new result"
        else:
            config = config.updated(auto_resume=AutoResume(count=count + 1, results=results, suspects=suspects))
            EvalRun.objects.filter(pk=run_id).update(config=config.stored())
            eval_run.config = config.stored()
            try:
                resume_in_worker(eval_run)
            except (RunBusy, ResumeRefused) as exc:
                why = str(exc)
            else:
                outcomes.append((run_id, "resumed"))
                continue
        note = f"; not resumed automatically ({why}): resume it from its page"
        EvalRun.objects.filter(pk=run_id, status=EvalRunStatus.INTERRUPTED).update(error=eval_run.error + note)
        outcomes.append((run_id, why))
    return outcomes


class WorkerSupervisor:
    """Keeps the task worker alive: restarts it when it ends, resumes its run, marks dead runs.

    A thread polls the worker every ``poll_s`` seconds. When the worker has ended without being
    asked to, its ``TaskWorker`` row records how, its run is marked interrupted and queued again
    (:func:`resume_runs_of`), and a new worker starts after 0.5 s (doubling up to 30 s while
    workers keep dying within :data:`UP_LONG_ENOUGH_S` of their start without taking a task).
    Between deaths the thread sweeps (``apps.evals.worker.sweeper``: dead runs, lapsed shards; the
    worker's own sweeps index) every ``EVALSITE_SWEEP_S`` (1 s), so runs of dead CLI processes
    are marked within a second of their death on this host, though pages only read. ``restarts`` counts
    the restarts.
    """

    def __init__(self, write: Callable[[str], None], *, poll_s: float = 0.25) -> None:
        self.write = write
        self.poll_s = poll_s
        self.worker: subprocess.Popen[bytes] | None = None
        self.worker_id = ""
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="evalsite-worker-supervisor", daemon=True)
        self._sweeper = Sweeper(index=False)  # its worker's sweeps index
        self._next_sweep = 0.0

    def start(self) -> None:
        """Start the worker (after marking orphaned runs) and the watching thread."""
        self._start_worker()
        self._thread.start()

    def stop(self, grace_s: float) -> None:
        """Stop watching, then stop the worker in order (see :func:`stop_worker`)."""
        self._stopping.set()
        self._thread.join(timeout=5)
        with self._lock:
            if self.worker is not None:
                stop_worker(self.worker, grace_s, self.write)
                code = self.worker.returncode
                if code is not None and code < 0:
                    mark_worker_stopped(self.worker_id, f"stopped by serve ({exit_description(code)})")

    def _start_worker(self) -> None:
        self.worker_id = uuid.uuid4().hex
        self.worker = start_worker(self.write, worker_id=self.worker_id, restarts=self.restarts)

    def _watch(self) -> None:
        backoff = 0.5
        started = time.monotonic()
        while not self._stopping.wait(self.poll_s):
            try:
                with self._lock:
                    worker = self.worker
                    ended = worker is not None and worker.poll() is not None
                if not ended or self._stopping.is_set():
                    if time.monotonic() >= self._next_sweep:
                        self._sweeper.tick()
                        self._next_sweep = time.monotonic() + self._sweeper.every_s
                    continue
                assert worker is not None
                how = exit_description(worker.returncode)
                self.write(f"The task worker (PID {worker.pid}) ended with {how}; restarting it.")
                dead_id = self.worker_id
                mark_worker_stopped(dead_id, f"ended with {how}")
                worked = bool(runs_taken_by(dead_id))
                if worked or time.monotonic() - started > UP_LONG_ENOUGH_S:
                    backoff = 0.5  # it was up, or a target ended it: restart at once
                if self._stopping.wait(backoff):
                    return
                backoff = min(backoff * 2, 30.0)
                with self._lock:
                    if self._stopping.is_set():
                        return
                    mark_orphaned_runs()  # its run is interrupted before it is queued again
                    for run_id, outcome in resume_runs_of(dead_id):
                        what = "queued again" if outcome == "resumed" else f"left interrupted: {outcome}"
                        self.write(f"Run {run_id} (its worker ended): {what}.")
                    self.restarts += 1
                    self._start_worker()
                    started = time.monotonic()
            except Exception:
                log.exception("worker supervisor")
            finally:
                close_old_connections()
