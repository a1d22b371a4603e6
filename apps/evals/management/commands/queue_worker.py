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
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections, connections

from apps.evals.worker.queue import job_refusal, queue_backend, redis_url, rq_queue, rq_serializer
from apps.evals.worker.shards import lease_s
from apps.evals.worker.sweeper import sweep

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
        logging.getLogger("rq.worker").addFilter(quiet_redis_retries)  # the outage's one line says it
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
    from apps.evals.views.live import redis_layer_configured

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


class RedisOutage:
    """What a worker does when Redis goes away: wait for it (``PING`` with a backoff from 0.5 s
    doubling to :attr:`max_wait_s`), say so in one log line per outage, and go on.

    RQ itself quits its work loop on a Redis error raised while a job runs ("found an unhandled
    exception, quitting"): a busy worker was gone for good after an outage. Shared by the work
    loop, the horse monitor and the reaper thread, so one outage is one line, whoever saw it.
    """

    max_wait_s = 15.0

    def __init__(self, name: str) -> None:
        self.name = name
        self.since: float | None = None
        self.recheck_registration = False  # set by an outage: a Redis restarted empty forgot the worker
        self._lock = threading.Lock()

    def note(self, exc: BaseException) -> None:
        """Record that Redis failed (logs the one line when this starts an outage)."""
        with self._lock:
            self.recheck_registration = True
            if self.since is None:
                self.since = time.monotonic()
                log.warning("worker %s: Redis is unreachable (%s); waiting for it, then going on", self.name, exc)

    def wait(self, connection: Any, exc: BaseException) -> None:
        """Block until ``connection`` answers ``PING`` again (after :meth:`note`)."""
        self.note(exc)
        delay = 0.5
        while True:
            try:
                connection.ping()
                break
            except REDIS_DOWN:
                time.sleep(delay)
                delay = min(delay * 2, self.max_wait_s)
        self.over()

    def over(self) -> None:
        """Redis answered again: end the outage (logged at INFO)."""
        with self._lock:
            if self.since is not None:
                log.info("worker %s: Redis is back after %.1f s", self.name, time.monotonic() - self.since)
                self.since = None


def quiet_redis_retries(record: logging.LogRecord) -> bool:
    """A filter for RQ's worker log: drop its "could not connect to Redis instance ... retrying"
    lines (one per retry while idle); :class:`RedisOutage` logs the outage once."""
    return "could not connect to Redis instance" not in str(record.msg)


def _redis_down() -> tuple[type[BaseException], ...]:
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # no Redis client (the embedded default): the command refuses to start anyway
        return ()
    return (RedisConnectionError, RedisTimeoutError)


REDIS_DOWN = _redis_down()
"""The errors that mean Redis is unreachable (not a bad command)."""


def _worker_class(base: type) -> type:
    """``base`` (RQ's forking ``Worker``) that refuses any job but ours (:func:`job_refusal`),
    warms the agents of each job before the fork, and rides out a Redis outage (:class:`RedisOutage`)
    wherever RQ's loop would quit on one: its horse keeps running the shard (the database, not
    Redis, holds the shard's progress), and once Redis answers the worker registers again (a
    Redis restarted empty forgot it) and takes the next job."""

    class WarmWorker(base):  # type: ignore[misc]
        @property
        def outage(self) -> RedisOutage:
            found = self.__dict__.get("_evalsite_outage")
            if found is None:
                found = self.__dict__["_evalsite_outage"] = RedisOutage(self.name)
            return found

        def execute_job(self, job: Any, queue: Any) -> Any:
            refusal = job_refusal(job)
            if refusal is not None:
                return refuse_job(self, job, queue, refusal)
            warm_agents(job)
            try:
                return super().execute_job(job, queue)
            except REDIS_DOWN as exc:
                if self.horse_pid:  # the monitor gave up while the horse runs: let it finish
                    _wait_for_child(self.horse_pid)
                    self._horse_pid = 0
                self.outage.wait(self.connection, exc)
                self._register_again()
                return None

        def heartbeat(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("pipeline") is not None:  # queued on a pipeline: its execute() raises
                return super().heartbeat(*args, **kwargs)
            try:
                beat = super().heartbeat(*args, **kwargs)
            except REDIS_DOWN as exc:
                self.outage.wait(self.connection, exc)
                self._register_again()
                return super().heartbeat(*args, **kwargs)
            if self.outage.recheck_registration:  # Redis came back while the horse ran
                self.outage.over()
                self._register_again()
            return beat

        def set_state(self, state: Any, pipeline: Any = None) -> None:
            if pipeline is not None:
                super().set_state(state, pipeline=pipeline)
                return
            try:
                super().set_state(state)
            except REDIS_DOWN as exc:
                self.outage.wait(self.connection, exc)
                self._register_again()
                super().set_state(state)

        def maintain_heartbeats(self, job: Any, execution: Any) -> None:
            try:
                super().maintain_heartbeats(job, execution)
            except REDIS_DOWN as exc:  # the horse goes on; beats resume when Redis does
                self.outage.note(exc)
                return
            if self.outage.recheck_registration:  # back while the horse runs: listed again at once
                self.outage.over()
                self._register_again()

        def check_for_suspension(self, burst: bool) -> None:
            try:
                super().check_for_suspension(burst)
            except REDIS_DOWN as exc:
                self.outage.wait(self.connection, exc)
                self._register_again()

        def run_maintenance_tasks(self) -> None:
            try:
                super().run_maintenance_tasks()
            except REDIS_DOWN as exc:
                self.outage.wait(self.connection, exc)
                self._register_again()

        def _pubsub_exception_handler(self, exc: Exception, pubsub: Any, pubsub_thread: Any) -> None:
            if not isinstance(exc, REDIS_DOWN):
                super()._pubsub_exception_handler(exc, pubsub, pubsub_thread)
                return
            self.outage.note(exc)  # RQ logs a line every 2 s here; the outage's one line says it
            time.sleep(2.0)

        def _register_again(self) -> None:
            """Register this worker again when Redis lost it (restarted without its data: the
            beats since then wrote a bare hash, not the registration ``/status/`` lists)."""
            from rq import worker_registration

            try:
                self.outage.recheck_registration = False
                if not self.connection.sismember(worker_registration.REDIS_WORKER_KEYS, self.key):
                    state = self.get_state()
                    self.connection.delete(self.key)
                    self.register_birth()
                    super().set_state(state or "idle")
            except REDIS_DOWN as exc:  # gone again: the next call waits
                self.outage.note(exc)

    return WarmWorker


def _wait_for_child(pid: int) -> None:
    """Reap the work-horse ``pid`` once it ends (it runs its shard on without Redis)."""
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except InterruptedError:
            continue
        except ChildProcessError:
            return


def _reap_until(stop: threading.Event, every_s: float, worker: Any = None) -> None:
    """Every ``every_s`` seconds until ``stop``: sweep (``apps.evals.worker.sweeper``: deliver again
    the shards whose lease lapsed, mark dead runs, index a finished run for search), and beat the
    RQ worker's heartbeat (RQ's own beats come minutes apart while a worker waits; the
    status page shows a worker silent for three of these beats as lost)."""
    while not stop.wait(every_s):
        try:
            if worker is not None and worker.birth_date is not None:  # registered: RQ set its key
                super(type(worker), worker).heartbeat()  # RQ's own: the outage wait is the work loop's
            sweep()
            if worker is not None:
                worker.outage.over()
        except REDIS_DOWN as exc:  # the work loop waits for Redis; this thread tries again
            if worker is not None:
                worker.outage.note(exc)
        except Exception:
            log.exception("sweeping")
        finally:
            close_old_connections()
    connections.close_all()
