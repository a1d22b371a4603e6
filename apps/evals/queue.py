"""The queue shards go through: :func:`enqueue_shard` is the one function that enqueues one.

Two setups (``EVALSITE_QUEUE``; see ``docs/scale.md``):

- ``tasks`` (the embedded default): Django's tasks framework with the configured backend
  (``django_tasks_db``: the database is the queue, ``evalsite serve`` / ``db_worker`` runs it);
  the job is :func:`run_shard_task`.
- ``rq``: RQ on the Redis at ``EVALSITE_REDIS_URL``, called directly (``django-tasks-rq`` 0.12
  is built on the ``django-tasks`` backport's backend class, not on Django 6.1's built-in
  ``django.tasks``, so it does not plug into the ``TASKS`` setting). The job is
  :func:`run_shard_job`; workers are ``evalsite queue_worker`` (any number, any host), each an RQ
  worker whose forked work-horse runs one shard, so a target that ends its process ends only
  that horse.

Whatever the queue, the database decides who runs what (``apps.evals.shards``): a delivery is
a ``(shard id, token)`` pair, a stale one does nothing, and :func:`reap` (called by every
worker, the run pages and the waiting CLI) enqueues again the shards whose lease lapsed.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections
from django.tasks import task

from apps.agents.registry import load_target
from apps.evals.liveness import claim_for_resume
from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.resume import ResumeRefused, check_resumable
from apps.evals.shardrun import run_shard
from apps.evals.shards import finish_run_if_done, plan_shards, reopen_shards, requeue_expired, requeue_lost

log = logging.getLogger(__name__)


def queue_backend() -> str:
    """``"rq"`` or ``"tasks"`` (``EVALSITE_QUEUE``)."""
    return "rq" if str(getattr(settings, "EVALSITE_QUEUE", "tasks")) == "rq" else "tasks"


def sharded_runs() -> bool:
    """Whether runs started from the portal or the API are sharded (``EVALSITE_SHARDED_RUNS``)."""
    return bool(getattr(settings, "EVALSITE_SHARDED_RUNS", False))


def redis_url() -> str:
    """``EVALSITE_REDIS_URL``.

    Raises:
        RuntimeError: It is not set (the ``rq`` queue needs it).
    """
    url = os.environ.get("EVALSITE_REDIS_URL", "")
    if not url:
        raise RuntimeError("EVALSITE_QUEUE=rq needs EVALSITE_REDIS_URL (e.g. redis://127.0.0.1:6379/0)")
    return url


def rq_queue() -> Any:
    """The RQ queue of this deployment (``EVALSITE_RQ_QUEUE``, default ``evalsite``)."""
    import redis
    from rq import Queue

    return Queue(settings.EVALSITE_RQ_QUEUE, connection=redis.Redis.from_url(redis_url()))


def enqueue_shard(shard_id: int, token: str) -> str:
    """Hand one delivery of a shard to the queue; returns the job / task id.

    Raises:
        RuntimeError: ``EVALSITE_QUEUE=rq`` without ``EVALSITE_REDIS_URL``.
        redis.exceptions.ConnectionError: Redis is unreachable.
    """
    if queue_backend() == "rq":
        job = rq_queue().enqueue(
            run_shard_job,
            shard_id,
            token,
            job_id=_job_id(shard_id, token),
            job_timeout=-1,  # the lease, not RQ, bounds a shard
            result_ttl=3600,
            failure_ttl=86400,
        )
        return str(job.id)
    return str(run_shard_task.enqueue(shard_id, token).id)


@task()
def run_shard_task(shard_id: int, token: str) -> dict[str, Any]:
    """The tasks-framework job: reap lapsed leases, then run the shard (see :func:`run_shard`)."""
    reap()
    return run_shard(shard_id, token)


def run_shard_job(shard_id: int, token: str) -> dict[str, Any]:
    """The RQ job (in a forked work-horse): run the shard on connections of its own."""
    close_old_connections()
    try:
        return run_shard(shard_id, token)
    finally:
        connections.close_all()


def start_sharded_run(eval_run: EvalRun, size: int | None = None) -> list[str]:
    """Split a prepared run into shards and enqueue them all; returns the job ids."""
    pairs = plan_shards(eval_run, size)
    return [enqueue_shard(pk, token) for pk, token in pairs]


def reap() -> int:
    """Enqueue again every shard whose lease lapsed (its worker died) and, with RQ, every queued
    shard whose job RQ no longer holds as queued or started; returns how many."""
    pairs = requeue_expired()
    for pk, token in pairs:
        log.warning("shard %s: its worker stopped renewing the lease; delivering it again", pk)
        enqueue_shard(pk, token)
    lost = requeue_lost(_rq_job_lost) if queue_backend() == "rq" else []
    for pk, token in lost:
        log.warning("shard %s: its queued job was lost; delivering it again", pk)
        enqueue_shard(pk, token)
    return len(pairs) + len(lost)


def _rq_job_lost(shard_id: int, token: str) -> bool:
    """Whether RQ no longer holds the shard's job as waiting or running (gone, failed, done)."""
    from rq.exceptions import NoSuchJobError
    from rq.job import Job

    queue = rq_queue()
    try:
        status = Job.fetch(_job_id(shard_id, token), connection=queue.connection).get_status()
    except NoSuchJobError:
        return True
    return str(getattr(status, "value", status)) not in ("queued", "started", "deferred", "scheduled")


def _job_id(shard_id: int, token: str) -> str:
    return f"evalsite-shard-{shard_id}-{token}"


def resume_sharded(eval_run: EvalRun) -> list[str]:
    """Queue the unfinished shards of an interrupted (e.g. cancelled) or failed sharded run.

    Returns:
        The job ids.

    Raises:
        RunBusy: The run is queued, running or finished.
        ResumeRefused: The set changed, the judge is needed, or the target is gone.
    """
    check_resumable(eval_run, judge_available=False)
    try:
        load_target(eval_run.target_id, eval_run.config.get("agents_dir") or None)
    except (LookupError, FileNotFoundError) as exc:
        raise ResumeRefused(str(exc)) from None
    claim_for_resume(eval_run.id, status=EvalRunStatus.QUEUED)
    pairs = reopen_shards(eval_run)
    if not pairs:  # every shard was done already: only the run's end was missing
        finish_run_if_done(eval_run.id)
    eval_run.refresh_from_db()
    return [enqueue_shard(pk, token) for pk, token in pairs]
