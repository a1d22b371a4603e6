"""Task workers' own liveness: their heartbeat rows, watching the ``serve`` that started them, and
which queued tasks a dead worker left behind.

A worker (``evalsite worker``) registers a :class:`~apps.evals.models.TaskWorker` row and runs a
:class:`WorkerBeat` thread: every ``EVALSITE_HEARTBEAT_S`` seconds it refreshes the row (so the
status page and other processes, on any host, see it alive whether it is busy or idle), and
every half second it checks its parent: a worker started by ``serve`` stops as soon as that
``serve`` is gone, even after a ``kill -9`` (the run it was executing is marked interrupted by
the worker itself). Nothing here keeps state in the process that reads it: every fact is a row.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from apps.evals.models import EvalRun, EvalRunStatus, TaskWorker
from apps.evals.results.executor import heartbeat_interval_s, is_alive, this_namespace
from apps.evals.runs.liveness import exit_now

log = logging.getLogger(__name__)

PARENT_POLL_S = 0.5
"""How often a supervised worker checks that its ``serve`` is still there (seconds)."""

_stop_reason: str | None = None


def stop_reason() -> str | None:
    """Why this worker process is stopping on its own (its ``serve`` ended), else ``None``."""
    return _stop_reason


def register_worker(
    worker_id: str, *, backend: str, queues: str, supervisor_pid: int | None = None, restarts: int = 0
) -> TaskWorker:
    """Write this process's worker row (heartbeat now) and return it."""
    now = timezone.now()
    worker, _ = TaskWorker.objects.update_or_create(
        pk=worker_id,
        defaults={
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "namespace": this_namespace(),
            "backend": backend,
            "queues": queues,
            "started": now,
            "heartbeat_at": now,
            "stopped": None,
            "exit_reason": "",
            "supervisor_pid": supervisor_pid,
            "restarts": restarts,
        },
    )
    return worker


def mark_worker_stopped(worker_id: str, reason: str) -> None:
    """Record that a worker ended and why (kept when a reason is already recorded)."""
    now = timezone.now()
    TaskWorker.objects.filter(pk=worker_id, stopped__isnull=True).update(stopped=now, exit_reason=reason[:300])


class WorkerBeat:
    """The worker's heartbeat and parent watch, on a daemon thread.

    Args:
        worker_id: The row to refresh (registered by the caller).
        parent_pid: The ``serve`` that started this worker: when this process's parent is no
            longer it, the worker stops (SIGTERM to itself: finish nothing, the run in flight is
            marked interrupted; after :func:`force_exit_after_s` it ends at once). ``None``: a
            worker started by hand, not watched.
    """

    def __init__(self, worker_id: str, *, parent_pid: int | None = None) -> None:
        self.worker_id = worker_id
        self.parent_pid = parent_pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evalsite-worker-beat", daemon=True)

    def start(self) -> None:
        """Start the thread (the row must exist)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (it refreshes nothing after this returns)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        every = heartbeat_interval_s()
        next_beat = 0.0
        waited = 0.0
        try:
            while not self._stop.wait(min(PARENT_POLL_S, every)):
                waited += min(PARENT_POLL_S, every)
                if self.parent_pid is not None and os.getppid() != self.parent_pid:
                    self._parent_gone()
                    return
                if waited >= next_beat:
                    next_beat = waited + every
                    self._beat()
        finally:
            connection.close()

    def _beat(self) -> None:
        try:
            close_old_connections()
            TaskWorker.objects.filter(pk=self.worker_id).update(heartbeat_at=timezone.now())
        except DatabaseError as exc:  # a locked or briefly unreachable database: the next beat
            log.warning("worker heartbeat not written: %s", exc)

    def _parent_gone(self) -> None:
        global _stop_reason
        _stop_reason = f"the serve that started it (PID {self.parent_pid}) ended"
        try:
            mark_worker_stopped(self.worker_id, f"stopped: {_stop_reason}")
        except DatabaseError:
            log.exception("could not record the worker's stop")
        # first signal: stop taking tasks; second: stop the task in flight (db_worker's rules;
        # run_eval_task marks its run interrupted with stop_reason()). The process normally ends
        # here; this daemon thread outlives only a target that will not stop.
        pause = threading.Event()
        os.kill(os.getpid(), signal.SIGTERM)
        pause.wait(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)
        pause.wait(force_exit_after_s())
        log.error("the worker did not stop after its serve ended: ending it now")
        try:
            interrupt_own_runs(f"interrupted: {_stop_reason}")
        finally:
            exit_now(1)


def force_exit_after_s() -> float:
    """Seconds a worker whose ``serve`` is gone may take to stop before it ends at once
    (``EVALSITE_WORKER_FORCE_EXIT_S``, default 10: a target that ignores the stop)."""
    return float(getattr(settings, "EVALSITE_WORKER_FORCE_EXIT_S", 10.0))


def interrupt_own_runs(reason: str) -> int:
    """Mark the runs this process executes interrupted with ``reason`` (before ending at once)."""
    mine = EvalRun.objects.filter(
        status=EvalRunStatus.RUNNING, executor_host=socket.gethostname(), executor_pid=os.getpid()
    )
    return mine.update(status=EvalRunStatus.INTERRUPTED, finished=timezone.now(), error=reason)


def task_run_id(args_kwargs: dict[str, Any] | None) -> str | None:
    """The eval run id of a ``run_eval_task`` row's arguments (``None`` when absent)."""
    args = (args_kwargs or {}).get("args") or []
    if args:
        return str(args[0])
    kwargs = (args_kwargs or {}).get("kwargs") or {}
    return str(kwargs["eval_run_id"]) if kwargs.get("eval_run_id") else None


def close_orphaned_tasks() -> list[str]:
    """Close the task rows still ``running`` whose worker is gone, and free their runs.

    A row's worker is the last of its ``worker_ids``. Known workers (a ``TaskWorker`` row) are
    judged by :func:`is_alive`: a live one's task is never touched, whatever its run's status
    (another ``serve``'s worker claims the task a moment before the run). A worker without a
    row (``db_worker`` started by hand) is judged by its run: the task is closed once the run is
    neither queued nor running. A run still ``queued`` whose worker died before starting it is marked
    interrupted, so it can be resumed.

    Returns:
        The ids of the runs whose task was closed (the runs those workers had taken).
    """
    from django_tasks_db.models import DBTaskResult

    rows = list(DBTaskResult.objects.running().filter(task_path__endswith="run_eval_task"))
    if not rows:
        return []
    known = {w.id: w for w in TaskWorker.objects.filter(pk__in=[r.worker_ids[-1] for r in rows if r.worker_ids])}
    closed: list[str] = []
    for row in rows:
        run_id = task_run_id(row.args_kwargs)
        status = EvalRun.objects.filter(pk=run_id).values_list("status", flat=True).first()
        worker = known.get(row.worker_ids[-1]) if row.worker_ids else None
        if worker is not None:
            if is_alive(worker):
                continue
            who = f"PID {worker.pid} on {worker.host}"
            if status == EvalRunStatus.QUEUED:
                EvalRun.objects.filter(pk=run_id, status=EvalRunStatus.QUEUED).update(
                    status=EvalRunStatus.INTERRUPTED,
                    finished=timezone.now(),
                    error=f"interrupted: the task worker that took it ({who}) ended before starting it",
                )
            elif status == EvalRunStatus.RUNNING:
                continue  # its heartbeat decides (liveness.mark_stale_runs)
        elif status in (EvalRunStatus.RUNNING, EvalRunStatus.QUEUED):
            continue  # an unknown worker: only a run that ended tells its task is over
        row.set_failed(RuntimeError("the worker running this task stopped"))
        if run_id:
            closed.append(run_id)
    return closed
