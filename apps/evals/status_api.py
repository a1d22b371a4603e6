"""``GET /api/status``: the facts of ``/status/`` as JSON (mounted by ``evalsite.api``).

The same reader as the page (:func:`apps.evals.status.site_status`); viewers, members and staff
may read it. Times are ISO 8601 (UTC), ages in seconds.

No ``from __future__ import annotations``: ninja reads the schemas' annotations at import.
"""

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema

from apps.core import access
from apps.evals.schemas import ApiError, ErrorOut
from apps.evals.status import site_status

router = Router(tags=["status"])


class RunStateOut(Schema):
    """A running eval run: its executor, heartbeat and cases in flight (at most 10 listed)."""

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


class WorkerOut(Schema):
    """A task worker: ``state`` is ``alive``, ``lost`` or ``stopped``; ``runs`` it executes now."""

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
    runs: list[RunStateOut]


class SupervisorOut(Schema):
    """A ``serve`` supervising a worker: its restarts and its newest worker."""

    host: str
    pid: int
    restarts: int
    worker_pid: int
    worker_state: str


class QueueOut(Schema):
    """A task backend's queue (``ready`` / ``running`` ``null``: it could not be read, see ``note``)."""

    alias: str
    backend: str
    ready: int | None
    running: int | None
    oldest_enqueued_at: datetime | None
    oldest_age_s: float | None
    note: str


class QueueWorkerOut(Schema):
    """An RQ queue worker (``evalsite queue_worker``; ``queue`` ``rq`` only): ``state`` is RQ's
    (``busy``, ``idle``...) or ``lost`` (no heartbeat for three lease thirds, >= 10 s); its
    current job's run and shard (``run#index``) and the shards its work-horse holds."""

    name: str
    host: str
    pid: int | None
    state: str
    queues: str
    job_id: str
    eval_run_id: str
    shard: str
    shards_held: int
    last_heartbeat: datetime | None
    heartbeat_age_s: float | None
    birth: datetime | None
    successful: int
    failed: int


class StatusOut(Schema):
    """Workers, supervisors, queues and running runs, read at ``checked_at``; ``queue`` is the
    shard queue in use (``tasks``: the embedded default; ``rq``: Redis, with ``queue_workers``
    and a ``shards`` row in ``queues``; ``queue_workers_note`` says why Redis could not be read)."""

    checked_at: datetime
    stale_after_s: float
    live_workers: int
    workers: list[WorkerOut]
    supervisors: list[SupervisorOut]
    queues: list[QueueOut]
    running_runs: list[RunStateOut]
    queue: str
    queue_workers: list[QueueWorkerOut]
    queue_workers_note: str


@router.get(
    "/status",
    response={200: StatusOut, 401: ErrorOut, 403: ErrorOut},
    summary="Task and queue workers, queue depth, oldest queued task, running runs' heartbeats",
)
def status(request: HttpRequest) -> Any:
    """Everything ``/status/`` shows (viewer role)."""
    user = getattr(request, "auth", None) or request.user
    if not access.can_view(user):
        raise ApiError(403, "your account has no role that can read the status (ask for viewer)")
    return site_status()
