"""``evalsite queue_worker``: run shards of sharded eval runs from the RQ queue (``EVALSITE_QUEUE=rq``).

Start any number, on any host that reaches the database (``DATABASE_URL``) and Redis
(``EVALSITE_REDIS_URL``) and has the agents folder at the path recorded on the runs. Each is an
RQ worker: it forks a work-horse per job, so a target that ends its process ends only that
horse. The worker loads what a horse needs before forking (the channel layer's Redis client, and
the agents folder of each job's run), so horses start warm; a horse takes the next fresh shards
of the same run off the queue as its last cases run (``EVALSITE_SHARD_CHAIN``). A thread of the
worker delivers again the shards whose lease lapsed and beats the worker's heartbeat (every
``EVALSITE_SHARD_LEASE_S / 3`` seconds; ``/status/`` lists the workers). SIGTERM / Ctrl-C:
finish the current job, then exit (twice: at once; its shards are then delivered again once
their leases lapse).

On the embedded default (``EVALSITE_QUEUE=tasks``) shards are tasks of Django's framework: use
``evalsite worker`` (``evalsite serve`` starts one) instead.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections, connections

from apps.evals.queue import job_refusal, queue_backend, reap, redis_url, rq_queue, rq_serializer
from apps.evals.shards import lease_s

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run shards of sharded eval runs from the RQ queue (EVALSITE_QUEUE=rq); start any number."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--burst", action="store_true", help="exit once the queue is empty")
        parser.add_argument("--name", help="worker name (default evalsite-HOST-PID)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if queue_backend() != "rq":
            raise CommandError("EVALSITE_QUEUE is not 'rq': on the embedded default run `evalsite worker` (or `serve`)")
        import redis
        from rq import Worker

        try:
            url = redis_url()
            connection = redis.Redis.from_url(url)
            connection.ping()
        except (RuntimeError, redis.exceptions.ConnectionError) as exc:
            raise CommandError(f"cannot reach Redis: {exc}") from None
        connections.close_all()  # the forked horses open their own
        name = opts["name"] or f"evalsite-{socket.gethostname()}-{os.getpid()}"
        preload()
        worker = _worker_class(Worker)([rq_queue()], connection=connection, name=name, serializer=rq_serializer())
        stop = threading.Event()
        reaper = threading.Thread(target=_reap_until, args=(stop, max(0.5, lease_s() / 3), worker), daemon=True)
        reaper.start()
        self.stdout.write(f"worker {name}: queue {rq_queue().name} on {url.split('@')[-1]}")
        self.stdout.flush()
        try:
            worker.work(burst=opts["burst"], logging_level="WARNING", with_scheduler=False)
        finally:
            stop.set()
            reaper.join(timeout=5)


def preload() -> None:
    """Import in this (parent) process what every forked work-horse would import on its own:
    the Redis channel layer (``channels_redis``, ``cryptography``, ``msgpack``: ~0.1-0.2 s a
    horse otherwise) and the codecs its client uses."""
    from apps.evals.consumers import redis_layer_configured

    "localhost".encode("idna")
    if redis_layer_configured():
        from channels.layers import get_channel_layer

        get_channel_layer()  # the layer object only: its connections open per event loop, in the horse


def warm_agents(job: Any) -> None:
    """Before a horse is forked for ``job``: load (once per folder and change) the agents folder
    its run names (the job's meta, set at enqueue; a job without it is left to the horse), so
    the horse finds the target imported. Best effort: a broken folder is the horse's to report."""
    from apps.agents.registry import agents_discovery

    meta = getattr(job, "meta", None) or {}
    if "agents_dir" not in meta:
        return
    try:
        agents_discovery(meta["agents_dir"] or None)
    except Exception:
        log.debug("warming the agents of %s", job.id, exc_info=True)


def refuse_job(worker: Any, job: Any, queue: Any, why: str) -> None:
    """Fail ``job`` without running any of it (one log line; RQ's failed-job registry keeps it
    for whoever looks into how it got there)."""
    from rq.utils import now

    log.warning("worker %s: refused job %s: %s (only Evalsite's shard jobs run here)", worker.name, job.id, why)
    job.ended_at = now()
    worker.handle_job_failure(job, queue=queue, exc_string=f"refused by Evalsite: {why}")


def _worker_class(base: type) -> type:
    """``base`` (RQ's forking ``Worker``) that refuses any job but ours (:func:`job_refusal`) and
    warms the agents of each job before the fork."""

    class WarmWorker(base):  # type: ignore[misc]
        def execute_job(self, job: Any, queue: Any) -> Any:
            refusal = job_refusal(job)
            if refusal is not None:
                return refuse_job(self, job, queue, refusal)
            warm_agents(job)
            return super().execute_job(job, queue)

    return WarmWorker


def _reap_until(stop: threading.Event, every_s: float, worker: Any = None) -> None:
    """Every ``every_s`` seconds until ``stop``: deliver again the shards whose lease lapsed, and
    beat the RQ worker's heartbeat (RQ's own beats come minutes apart while a worker waits; the
    status page shows a worker silent for three of these beats as lost)."""
    while not stop.wait(every_s):
        try:
            if worker is not None and worker.birth_date is not None:  # registered: RQ set its key
                worker.heartbeat()
            reap()
        except Exception:
            log.exception("reaping shards")
        finally:
            close_old_connections()
    connections.close_all()
