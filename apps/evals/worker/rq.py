"""The RQ side of ``/status/`` and ``GET /api/status`` (``EVALSITE_QUEUE=rq``): the queue
workers (``evalsite queue_worker``, any host) as RQ registers them in Redis, the shard each one
runs (with the shards its work-horse took after it, from the database), and the shard queue's
depth read from Redis.

A queue worker's heartbeat is written by its reaper thread every ``EVALSITE_SHARD_LEASE_S / 3``
seconds (RQ's own beats only every few minutes while idle), so a worker silent for
:func:`lost_after_s` is shown ``lost`` (RQ forgets it once its key expires).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from apps.evals.models.shards import EvalShard, ShardStatus
from apps.evals.worker.queue import _parse_job_id, queue_backend, rq_queue
from apps.evals.worker.shards import lease_s

log = logging.getLogger(__name__)

MAX_WORKERS = 100
"""At most this many queue workers are listed (by name)."""


def lost_after_s() -> float:
    """Seconds without a heartbeat after which a queue worker is shown ``lost`` (3 beats, >= 10 s)."""
    return max(10.0, lease_s())


@dataclass(slots=True)
class QueueWorkerState:
    """An RQ queue worker.

    Attributes:
        name, host, pid: As RQ registers them (``pid`` of the worker, not of its work-horse).
        state: RQ's (``busy``, ``idle``, ``suspended``, ``started``...), or ``lost`` when its last
            heartbeat is older than :func:`lost_after_s`.
        queues: The queues it listens to.
        job_id: The job its work-horse was started for (``""``: idle).
        eval_run_id, shard: That job's run and shard (``"run#index"``), when it is a shard job.
        shards_held: Running shards its work-horse holds now (the job's and those it took next).
        last_heartbeat, heartbeat_age_s: Its last sign of life (age in seconds).
        birth: When it started.
        successful, failed: Jobs it ran to the end / that failed.
    """

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


@dataclass(slots=True)
class RqQueueDepth:
    """The shard queue in Redis: jobs waiting, jobs running, and the oldest waiting job's enqueue time."""

    name: str
    ready: int
    running: int
    oldest_enqueued_at: datetime | None


def _aware(moment: datetime | None) -> datetime | None:
    """RQ's times are UTC, naive in some versions."""
    if moment is not None and timezone.is_naive(moment):
        return moment.replace(tzinfo=UTC)
    return moment


def age_s(then: datetime | None, now: datetime) -> float | None:
    """Seconds from ``then`` to ``now`` (0.1 s steps, never negative); ``None`` without ``then``."""
    return None if then is None else round(max((now - then).total_seconds(), 0.0), 1)


def queue_workers(now: datetime | None = None) -> tuple[list[QueueWorkerState], str]:
    """The queue workers RQ knows (none unless ``EVALSITE_QUEUE=rq``), by name, and a note
    (``""``, or why Redis could not be read: the page still shows everything else).

    Raises:
        Nothing: a Redis failure is logged and becomes the note.
    """
    if queue_backend() != "rq":
        return [], ""
    now = now or timezone.now()
    try:
        from rq import Worker

        queue = rq_queue()
        workers = sorted(Worker.all(queue=queue), key=lambda w: w.name)[:MAX_WORKERS]
        rows = [_worker_row(w, now) for w in workers]
    except Exception as exc:  # the address may be in the message: logged, not shown
        log.exception("reading the RQ workers")
        return [], f"cannot read the queue workers ({type(exc).__name__}; see the log)"
    _add_shards(rows)
    return rows, ""


def alive_queue_workers() -> tuple[int | None, str]:
    """How many RQ queue workers are alive (not ``lost``), and :func:`queue_workers`'s note
    (``None`` and the note when Redis cannot be read)."""
    workers, note = queue_workers()
    if note:
        return None, note
    return sum(1 for w in workers if w.state != "lost"), ""


def _worker_row(worker: Any, now: datetime) -> QueueWorkerState:
    beat = _aware(worker.last_heartbeat)
    birth = _aware(worker.birth_date)
    age = age_s(beat, now)
    state = str(getattr(worker.get_state(), "value", worker.get_state()))
    if age is None or age > lost_after_s():
        state = "lost"
    job_id = str(worker.get_current_job_id() or "")
    return QueueWorkerState(
        name=str(worker.name),
        host=str(worker.hostname or ""),
        pid=worker.pid,
        state=state,
        queues=", ".join(str(q) for q in worker.queue_names()),
        job_id=job_id,
        eval_run_id="",
        shard="",
        shards_held=0,
        last_heartbeat=beat,
        heartbeat_age_s=age,
        birth=birth,
        successful=int(worker.successful_job_count or 0),
        failed=int(worker.failed_job_count or 0),
    )


def _add_shards(rows: list[QueueWorkerState]) -> None:
    """Fill each worker's shard (from its job id) and the running shards its horse holds."""
    deliveries = {row.name: _parse_job_id(row.job_id) for row in rows if row.job_id}
    ids = [d[0] for d in deliveries.values() if d is not None]
    if not ids:
        return
    shards = {s["pk"]: s for s in EvalShard.objects.filter(pk__in=ids).values("pk", "eval_run_id", "index", "worker")}
    horses = {s["worker"] for s in shards.values() if s["worker"]}
    held: dict[str, int] = {}
    running = EvalShard.objects.filter(status=ShardStatus.RUNNING, worker__in=horses).values_list("worker", flat=True)
    for horse in running:
        held[horse] = held.get(horse, 0) + 1
    for row in rows:
        delivery = deliveries.get(row.name)
        shard = shards.get(delivery[0]) if delivery else None
        if shard is None:
            continue
        row.eval_run_id = str(shard["eval_run_id"])
        row.shard = f"{shard['eval_run_id']}#{shard['index']}"
        row.shards_held = held.get(shard["worker"], 0)


def rq_queue_depth() -> RqQueueDepth:
    """The shard queue's depth in Redis (``EVALSITE_QUEUE=rq``): a queue probe's reading.

    Raises:
        redis.exceptions.RedisError: Redis is unreachable.
        RuntimeError: ``EVALSITE_REDIS_URL`` is not set.
    """
    from rq.job import Job

    queue = rq_queue()
    oldest = None
    head = queue.get_job_ids(0, 1)
    if head:
        job = Job.fetch(head[0], connection=queue.connection, serializer=queue.serializer)
        oldest = _aware(job.enqueued_at)
    return RqQueueDepth(
        name=str(queue.name), ready=len(queue), running=queue.started_job_registry.count, oldest_enqueued_at=oldest
    )
