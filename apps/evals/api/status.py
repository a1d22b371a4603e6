"""``GET /api/status``: the facts of ``/status/`` as JSON (mounted by ``evalsite.api``).

The same reader as the page (:func:`apps.evals.worker.status.site_status`); viewers, members and staff
may read it. Times are ISO 8601 (UTC), ages in seconds.

No ``from __future__ import annotations``: ninja reads the schemas' annotations at import.
"""

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema

from apps.core import access
from apps.evals.api.read_models import fields_of
from apps.evals.api.schemas import ApiError, ErrorOut
from apps.evals.worker.rq import QueueWorkerState
from apps.evals.worker.status import QueueRow, RunState, SiteStatus, SupervisorState, WorkerState, site_status

router = Router(tags=["status"])


@fields_of(RunState)
class RunStateOut(Schema):
    """A running eval run: its executor, heartbeat and cases in flight (at most 10 listed)."""


@fields_of(WorkerState, nested={RunState: RunStateOut})
class WorkerOut(Schema):
    """A task worker: ``state`` is ``alive``, ``lost`` or ``stopped``; ``runs`` it executes now."""


@fields_of(SupervisorState)
class SupervisorOut(Schema):
    """A ``serve`` supervising a worker: its restarts and its newest worker."""


@fields_of(QueueRow)
class QueueOut(Schema):
    """A task backend's queue (``ready`` / ``running`` ``null``: it could not be read, see ``note``)."""


@fields_of(QueueWorkerState)
class QueueWorkerOut(Schema):
    """An RQ queue worker (``evalsite queue_worker``; ``queue`` ``rq`` only): ``state`` is RQ's
    (``busy``, ``idle``...) or ``lost`` (no heartbeat for three lease thirds, >= 10 s); its
    current job's run and shard (``run#index``) and the shards its work-horse holds."""


@fields_of(
    SiteStatus,
    nested={
        WorkerState: WorkerOut,
        SupervisorState: SupervisorOut,
        QueueRow: QueueOut,
        RunState: RunStateOut,
        QueueWorkerState: QueueWorkerOut,
    },
)
class StatusOut(Schema):
    """Workers, supervisors, queues and running runs, read at ``checked_at``; ``queue`` is the
    shard queue in use (``tasks``: the embedded default; ``rq``: Redis, with ``queue_workers``
    and a ``shards`` row in ``queues``; ``queue_workers_note`` says why Redis could not be read)."""

    live_workers: int  # a property of SiteStatus


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
