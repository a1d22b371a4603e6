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

Whatever the queue, the database decides who runs what (``apps.evals.worker.shards``): a delivery is
a ``(shard id, token)`` pair, a stale one does nothing, and :func:`reap` (called by the sweeper
of every worker and of ``serve``, ``apps.evals.worker.sweeper``, and by the waiting CLI; never by
a page) enqueues again the shards whose lease lapsed.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections
from django.tasks import task

from apps.evals.models import EvalRun
from apps.evals.models.shards import EvalShard
from apps.evals.runs.config import read_run_config
from apps.evals.runs.resume import claim_queued_resume
from apps.evals.worker.shard_run import run_shard
from apps.evals.worker.shards import (
    finish_run_if_done,
    lease_s,
    plan_shards,
    reopen_shards,
    requeue_expired,
    requeue_lost,
)

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


_QUEUES: dict[tuple[int, str, str], Any] = {}

SHARD_JOB = "apps.evals.worker.queue.run_shard_job"
"""The function an RQ job may name (with :data:`ONLINE_JOB`): a worker refuses any other (:func:`job_refusal`)."""
ONLINE_JOB = "apps.online.tasks.score_traces_job"
"""The online scoring job, with one argument: the run ids of new traces (``apps.online`` enqueues
it on this queue; named here, never imported)."""


def rq_serializer() -> Any:
    """The serializer of every RQ queue and worker here: JSON (``rq.serializers.JSONSerializer``),
    so a job in Redis is data, never a pickle a worker would run code to load."""
    from rq.serializers import JSONSerializer

    return JSONSerializer


def rq_queue() -> Any:
    """The RQ queue of this deployment (``EVALSITE_RQ_QUEUE``, default ``evalsite``); one Redis
    client per process (a forked work-horse makes its own). Jobs are JSON (:func:`rq_serializer`)."""
    import redis
    from rq import Queue

    key = (os.getpid(), redis_url(), str(settings.EVALSITE_RQ_QUEUE))
    queue = _QUEUES.get(key)
    if queue is None:
        queue = _QUEUES[key] = Queue(key[2], connection=redis.Redis.from_url(key[1]), serializer=rq_serializer())
    return queue


def job_refusal(job: Any) -> str | None:
    """Why a worker must not run ``job`` (``None``: it is one of ours).

    Ours is a JSON job calling :data:`SHARD_JOB` with ``(shard id, token)`` and nothing else: a
    job someone wrote into Redis by hand (a pickle, another function, an instance method) is
    refused before any of it is imported or called.
    """
    from rq.exceptions import DeserializationError

    try:
        func_name, instance, args, kwargs = job.func_name, job.instance, job.args, job.kwargs
    except (DeserializationError, ValueError, TypeError) as exc:
        return f"its data is not a JSON job ({type(exc).__name__})"
    if func_name == ONLINE_JOB and instance is None:
        run_ids = args[0] if len(args) == 1 else None
        ok = not kwargs and isinstance(run_ids, list) and all(isinstance(r, str) for r in run_ids)
        return None if ok else "its arguments are not (run ids)"
    if func_name != SHARD_JOB or instance is not None:
        return f"it calls {str(func_name)[:200]!r}, not {SHARD_JOB}"
    if kwargs or len(args) != 2 or not isinstance(args[0], int) or not isinstance(args[1], str):
        return "its arguments are not (shard id, token)"
    return None


def enqueue_shard(shard_id: int, token: str, *, agents_dir: str | None = None) -> str:
    """Hand one delivery of a shard to the queue; returns the job / task id.

    ``agents_dir`` (the run's ``config["agents_dir"]``, ``""`` for the default folder) rides in
    the RQ job's meta, so the worker loads that folder before forking the job's horse.

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
            meta={} if agents_dir is None else {"agents_dir": agents_dir},
        )
        return str(job.id)
    return str(run_shard_task.enqueue(shard_id, token).id)


@task()
def run_shard_task(shard_id: int, token: str) -> dict[str, Any]:
    """The tasks-framework job: reap lapsed leases, then run the shard (see :func:`run_shard`)."""
    reap()
    return run_shard(shard_id, token)


def run_shard_job(shard_id: int, token: str) -> dict[str, Any]:
    """The RQ job (in a forked work-horse): run the shard on connections of its own, then the
    next fresh shards of the same run that wait at the head of the queue (see
    :func:`steal_shard_job`)."""
    close_old_connections()
    try:
        return run_shard(shard_id, token, steal=steal_shard_job)
    finally:
        connections.close_all()


# Take the queue's head job only if it is still the one looked at; in the same step mark its hash
# ``started`` with a time to live (ARGV[2] seconds). Until the horse claims the shard (a few ms)
# the reapers see a job held, not lost: a hash deleted here made a reaper that looked in between
# deliver the shard again at the queue's tail (a run's last shard, seconds late, in one run of
# three at 4 workers). A horse that dies before its claim leaves a hash that expires, and the
# shard is then reaped (requeue_lost) like any lost job, one time to live later.
_STEAL = """
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then
  redis.call('LPOP', KEYS[1])
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('HSET', KEYS[2], 'status', 'started')
    redis.call('EXPIRE', KEYS[2], ARGV[2])
  end
  return 1
end
return 0
"""


def stolen_job_ttl_s() -> int:
    """Seconds a job taken off the queue by a horse's chain stays ``started`` in Redis without
    its claim (the lease rounded up, at least 1): the claim follows within milliseconds; a horse
    that died before it leaves the shard to the reapers after this long."""
    return max(1, math.ceil(lease_s()))


def steal_shard_job(classify: Callable[[int, str], str], *, drop_at_most: int = 50) -> tuple[int, str] | None:
    """Take the job at the head of the RQ queue off it when it delivers a shard that
    ``classify(shard id, token)`` answers ``"take"`` for; the caller then claims that shard as
    its delivery. Heads it answers ``"drop"`` for (stale deliveries: their shard was cancelled
    or delivered again, so a worker would only skip them) are removed on the way, up to
    ``drop_at_most``; ``"stop"`` (another run's shard, or one to leave to the queue) ends the
    look.

    Returns:
        ``(shard id, token)``; ``None`` when the queue is empty or its head is another job or a
        shard not taken (a head another worker took first is passed over).

    Raises:
        redis.exceptions.RedisError: Redis is unreachable.
    """
    from rq.job import Job

    queue = rq_queue()
    for _ in range(drop_at_most + 1):
        head = queue.connection.lindex(queue.key, 0)
        if head is None:
            return None
        job_id = head.decode() if isinstance(head, bytes) else str(head)
        delivery = _parse_job_id(job_id)
        verdict = "stop" if delivery is None else classify(*delivery)
        if verdict == "stop":
            return None
        taken = queue.connection.eval(_STEAL, 2, queue.key, Job.key_for(job_id), job_id, stolen_job_ttl_s())
        if verdict == "take" and taken:
            return delivery
        # dropped a stale delivery, or another worker took this head first: look at the next one
    return None


def start_sharded_run(eval_run: EvalRun, size: int | None = None) -> list[str]:
    """Split a prepared run into shards and enqueue them all; returns the job ids."""
    pairs = plan_shards(eval_run, size)
    folder = read_run_config(eval_run.config).agents_dir
    return [enqueue_shard(pk, token, agents_dir=folder) for pk, token in pairs]


def reap() -> int:
    """Enqueue again every shard whose lease lapsed (its worker died) and, with RQ, every queued
    shard whose job RQ no longer holds as queued or started; returns how many."""
    pairs = requeue_expired()
    labels = _shard_labels([pk for pk, _ in pairs])
    for pk, token in pairs:
        log.warning("%s: its worker stopped renewing the lease; delivering it again", labels[pk])
        enqueue_shard(pk, token)
    lost = requeue_lost(_rq_jobs_lost) if queue_backend() == "rq" else []
    labels = _shard_labels([pk for pk, _ in lost])
    for pk, token in lost:
        log.warning("%s: its queued job was lost; delivering it again", labels[pk])
        enqueue_shard(pk, token)
    return len(pairs) + len(lost)


def _shard_labels(shard_ids: list[int]) -> dict[int, str]:
    """``"eval run RUN, shard N of M"`` per shard id (a reaper handles every run's shards: the
    line must say whose), one query."""
    if not shard_ids:
        return {}
    rows = EvalShard.objects.filter(pk__in=shard_ids).values_list("pk", "eval_run_id", "index", "eval_run__n_shards")
    labels = {pk: f"eval run {run_id}, shard {index + 1} of {total}" for pk, run_id, index, total in rows}
    return {pk: labels.get(pk, f"shard {pk}") for pk in shard_ids}


def _rq_jobs_lost(pairs: list[tuple[int, str]]) -> set[tuple[int, str]]:
    """The deliveries whose job RQ no longer holds as waiting or running (gone, failed, done):
    one pipelined read of the jobs' status."""
    from rq.job import Job

    if not pairs:
        return set()
    pipe = rq_queue().connection.pipeline(transaction=False)
    for shard_id, token in pairs:
        pipe.hget(Job.key_for(_job_id(shard_id, token)), "status")
    held = (b"queued", b"started", b"deferred", b"scheduled")
    return {pair for pair, status in zip(pairs, pipe.execute(), strict=True) if status not in held}


def _job_id(shard_id: int, token: str) -> str:
    return f"evalsite-shard-{shard_id}-{token}"


def _parse_job_id(job_id: str) -> tuple[int, str] | None:
    """``(shard id, token)`` of a shard job's id; ``None`` for any other job."""
    prefix, _, rest = job_id.partition("evalsite-shard-")
    shard, _, token = rest.partition("-")
    if prefix or not shard.isdigit() or not token:
        return None
    return int(shard), token


def resume_sharded(eval_run: EvalRun) -> list[str]:
    """Queue the unfinished shards of an interrupted (e.g. cancelled) or failed sharded run.

    With Redis unreachable the resume still holds (the run is queued, its shards reopened): the
    shards not enqueued are delivered by the reapers once Redis is back.

    Returns:
        The job ids (fewer than the shards reopened when Redis went away).

    Raises:
        RunBusy: The run is queued, running or finished.
        ResumeRefused: The set changed, the judge is needed, or the target is gone.
    """
    claim_queued_resume(eval_run)
    pairs = reopen_shards(eval_run)
    if not pairs:  # every shard was done already: only the run's end was missing
        finish_run_if_done(eval_run.id)
    eval_run.refresh_from_db()
    folder = read_run_config(eval_run.config).agents_dir
    jobs = []
    for pk, token in pairs:
        try:
            jobs.append(enqueue_shard(pk, token, agents_dir=folder))
        except Exception as exc:
            if not type(exc).__module__.startswith("redis."):
                raise
            # the resume holds (the run is queued, its shards reopened in the database): the
            # reapers deliver the shards whose jobs are missing once Redis is back (requeue_lost)
            log.warning(
                "eval run %s: resumed, but Redis is unreachable (%s); its shards are delivered when it is back",
                eval_run.id,
                exc,
            )
            break
    return jobs
