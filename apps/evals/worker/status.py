"""What ``/status/`` and ``GET /api/status`` show: task workers, queue workers, queues, running
runs, supervisors.

Every fact comes from the database (``TaskWorker`` rows, ``EvalRun`` heartbeats, the queue
probes of :mod:`apps.evals.worker.queue_depth`) or, on the scaled setup (``EVALSITE_QUEUE=rq``), from
Redis (the RQ queue workers and the shard queue, :mod:`apps.evals.worker.rq`), never from the
state of the process answering, so the page is the same whichever process serves it and
wherever the workers run. Nothing shown is secret: host names, PIDs, run ids, case ids and times.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from apps.evals.models import EvalRun, EvalRunStatus, TaskWorker
from apps.evals.results.executor import is_alive, stale_after_s
from apps.evals.runs.liveness import executor_label
from apps.evals.worker.queue import queue_backend
from apps.evals.worker.queue_depth import queue_states
from apps.evals.worker.rq import QueueWorkerState, age_s, queue_workers, rq_queue_depth

log = logging.getLogger(__name__)

RECENT_S = 3600.0
"""Stopped or lost workers are listed for this long (seconds) after their last sign of life."""

MAX_ROWS = 50
"""At most this many workers and this many running runs are listed (newest first)."""

IN_FLIGHT_SHOWN = 10


@dataclass(slots=True)
class RunState:
    """A running eval run: who executes it, its heartbeat (age in seconds) and its cases in flight
    (case ids, at most :data:`IN_FLIGHT_SHOWN`; ``n_in_flight`` counts them all)."""

    id: str
    target_id: str
    variant: str
    executor: str
    started: datetime | None
    heartbeat_at: datetime | None
    heartbeat_age_s: float | None
    n_done: int
    n_total: int
    in_flight: list[str]
    n_in_flight: int


@dataclass(slots=True)
class WorkerState:
    """A task worker: ``state`` is ``alive``, ``lost`` (no heartbeat for ``EVALSITE_STALE_AFTER_S``
    and never said it stopped) or ``stopped`` (``exit_reason`` says how); ``runs`` are the runs it
    executes now; ``supervisor_pid`` is the ``serve`` that started it (``None``: started by hand)."""

    id: str
    host: str
    pid: int
    state: str
    backend: str
    queues: str
    started: datetime
    heartbeat_at: datetime
    heartbeat_age_s: float
    stopped: datetime | None
    exit_reason: str
    supervisor_pid: int | None
    restarts: int
    runs: list[RunState] = field(default_factory=list)


@dataclass(slots=True)
class SupervisorState:
    """A ``serve`` supervising a worker: how many workers it restarted and its newest worker."""

    host: str
    pid: int
    restarts: int
    worker_pid: int
    worker_state: str


@dataclass(slots=True)
class QueueRow:
    """A task backend's queue: waiting (``ready``) and running tasks, the oldest waiting task's
    enqueue time and age in seconds; ``ready`` is ``None`` when it cannot be read (``note``)."""

    alias: str
    backend: str
    ready: int | None
    running: int | None
    oldest_enqueued_at: datetime | None
    oldest_age_s: float | None
    note: str


@dataclass(slots=True)
class SiteStatus:
    """Everything ``/status/`` shows, read at ``checked_at``."""

    checked_at: datetime
    stale_after_s: float
    workers: list[WorkerState]
    supervisors: list[SupervisorState]
    queues: list[QueueRow]
    running_runs: list[RunState]
    queue: str = "tasks"
    queue_workers: list[QueueWorkerState] = field(default_factory=list)
    queue_workers_note: str = ""

    @property
    def live_workers(self) -> int:
        """How many listed workers are alive (task workers and queue workers)."""
        tasks = sum(1 for w in self.workers if w.state == "alive")
        return tasks + sum(1 for w in self.queue_workers if w.state != "lost")


def _run_state(eval_run: EvalRun, now: datetime) -> RunState:
    prefix = f"{eval_run.id}:"
    in_flight = [str(rid).removeprefix(prefix) for rid in eval_run.in_flight or []]
    return RunState(
        id=eval_run.id,
        target_id=eval_run.target_id,
        variant=eval_run.variant,
        executor=executor_label(eval_run),
        started=eval_run.started,
        heartbeat_at=eval_run.heartbeat_at,
        heartbeat_age_s=age_s(eval_run.heartbeat_at, now),
        n_done=eval_run.n_done,
        n_total=eval_run.n_total,
        in_flight=in_flight[:IN_FLIGHT_SHOWN],
        n_in_flight=len(in_flight),
    )


def site_status() -> SiteStatus:
    """Read the status now (a read only: the sweeper marks dead runs, ``apps.evals.worker.sweeper``)."""
    now = timezone.now()
    recent = now - timedelta(seconds=RECENT_S)
    running = list(
        EvalRun.objects.filter(status=EvalRunStatus.RUNNING)
        .only(
            "id",
            "target_id",
            "variant",
            "executor_host",
            "executor_pid",
            "started",
            "heartbeat_at",
            "n_done",
            "n_total",
            "in_flight",
        )
        .order_by("-started")[:MAX_ROWS]
    )
    runs_by_executor: dict[tuple[str, int | None], list[RunState]] = {}
    run_states = []
    for eval_run in running:
        run_state = _run_state(eval_run, now)
        run_states.append(run_state)
        runs_by_executor.setdefault((eval_run.executor_host, eval_run.executor_pid), []).append(run_state)
    rows = TaskWorker.objects.filter(heartbeat_at__gte=recent).order_by("-started")[:MAX_ROWS]
    workers = []
    for row in rows:
        state = "alive" if is_alive(row, now=now) else ("stopped" if row.stopped else "lost")
        workers.append(
            WorkerState(
                id=row.id,
                host=row.host,
                pid=row.pid,
                state=state,
                backend=row.backend,
                queues=row.queues,
                started=row.started,
                heartbeat_at=row.heartbeat_at,
                heartbeat_age_s=age_s(row.heartbeat_at, now) or 0.0,
                stopped=row.stopped,
                exit_reason=row.exit_reason,
                supervisor_pid=row.supervisor_pid,
                restarts=row.restarts,
                runs=runs_by_executor.get((row.host, row.pid), []) if state == "alive" else [],
            )
        )
    supervisors: dict[tuple[str, int], SupervisorState] = {}
    for worker in workers:  # newest first: the first seen of a serve is its current worker
        if worker.supervisor_pid is not None and (worker.host, worker.supervisor_pid) not in supervisors:
            supervisors[(worker.host, worker.supervisor_pid)] = SupervisorState(
                worker.host, worker.supervisor_pid, worker.restarts, worker.pid, worker.state
            )
    queues = []
    for queue in queue_states():
        depth = queue.depth
        queues.append(
            QueueRow(
                alias=queue.alias,
                backend=queue.backend,
                ready=depth.ready if depth else None,
                running=depth.running if depth else None,
                oldest_enqueued_at=depth.oldest_enqueued_at if depth else None,
                oldest_age_s=age_s(depth.oldest_enqueued_at, now) if depth else None,
                note=queue.note,
            )
        )
    backend = queue_backend()
    if backend == "rq":
        queues.append(_rq_queue_row(now))
    rq_workers, note = queue_workers(now)
    return SiteStatus(
        now, stale_after_s(), workers, list(supervisors.values()), queues, run_states, backend, rq_workers, note
    )


def _rq_queue_row(now: datetime) -> QueueRow:
    """The shard queue in Redis as a queue row (``ready`` ``None`` when Redis cannot be read)."""
    try:
        depth = rq_queue_depth()
    except Exception as exc:  # the address may be in the message: logged, not shown
        log.exception("reading the RQ queue")
        return QueueRow("shards", "RQ (Redis)", None, None, None, None, f"cannot read the queue ({type(exc).__name__})")
    return QueueRow(
        alias=f"shards ({depth.name})",
        backend="RQ (Redis)",
        ready=depth.ready,
        running=depth.running,
        oldest_enqueued_at=depth.oldest_enqueued_at,
        oldest_age_s=age_s(depth.oldest_enqueued_at, now),
        note="",
    )
