"""The one clocked sweeper: the writes that used to ride on page views and API reads.

Three chores, each a guarded write any number of processes may do at once:

- **dead runs**: a ``running`` run whose executor is gone is marked ``interrupted`` (resumable),
  with the reason (:func:`apps.evals.runs.liveness.mark_stale_runs`);
- **lapsed shards**: a shard whose worker stopped renewing its lease, or whose queued job the
  queue lost, is delivered again (:func:`apps.evals.worker.queue.reap`; with ``EVALSITE_QUEUE=rq``
  this talks to Redis);
- **the search index**: a run that is no longer live and whose results are not all in the
  full-text index is indexed, one run per sweep (:func:`index_pending`).

Who runs it, each on its own clock: ``evalsite serve``'s supervisor thread (a thread of its own
with ``--no-worker``) and every task worker (``evalsite worker``) every ``EVALSITE_SWEEP_S``
seconds (1), every queue worker (``evalsite queue_worker``) every ``EVALSITE_SHARD_LEASE_S / 3``
with its RQ heartbeat. A GET never writes: a run page shows a dead run
interrupted before a sweep has written it (``apps.evals.runs.liveness.show_apparent_status``), and a
search not yet covered by the index scans the results the index lacks
(``apps.evals.queries.search``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.evals.results.search_index import ensure_indexed
from apps.evals.runs.liveness import mark_stale_runs
from apps.evals.worker.queue import reap

log = logging.getLogger(__name__)

LIVE = (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING)


def sweep_every_s() -> float:
    """Seconds between two sweeps of one process (``EVALSITE_SWEEP_S``, default 1)."""
    return float(getattr(settings, "EVALSITE_SWEEP_S", 1.0))


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep changed.

    Attributes:
        interrupted: Runs marked interrupted (their executor is gone).
        redelivered: Shards delivered again (lease lapsed, or job lost by the queue).
        indexed: Id of the run whose results were indexed, ``None`` when none lagged.
    """

    interrupted: int = 0
    redelivered: int = 0
    indexed: str | None = None


RECHECK_FINISHED_S = 86_400.0
"""A run indexed before is checked for results past its index only when it finished this recently
(a resume adds results, then finishes the run again): the check reads each run's newest result,
so it is kept to the few runs that can have moved, not every run of the database every second."""


def lagging_runs() -> list[str]:
    """Ids of runs no longer live whose results are not all in the index, newest runs first (at
    most 20): never indexed and holding a result, or finished within :data:`RECHECK_FINISHED_S`
    with a result past their index."""
    results = EvalResult.objects.filter(eval_run=OuterRef("pk"))
    newest = results.order_by("-id").values("id")[:1]
    recent = timezone.now() - timedelta(seconds=RECHECK_FINISHED_S)
    rows = (
        EvalRun.objects.exclude(status__in=LIVE)
        .alias(has_results=Exists(results))
        .filter(
            Q(search_index__isnull=True, has_results=True)
            | Q(finished__gte=recent, search_index__indexed_upto__lt=Subquery(newest))
        )
        .order_by("-started")
    )
    return list(rows.values_list("pk", flat=True)[:20])


def index_pending(limit: int = 1) -> list[str]:
    """Index up to ``limit`` runs whose results are not all in the full-text index; returns their ids.

    A run is indexed once it stops being live (the task worker also indexes a run as it ends,
    :func:`index_run`); a 100,000-case run takes a few seconds, once.
    """
    done = []
    for run_id in lagging_runs()[:limit]:
        eval_run = EvalRun.objects.filter(pk=run_id).first()
        if eval_run is not None:
            ensure_indexed(eval_run)
            done.append(run_id)
    return done


def index_run(eval_run_id: str) -> None:
    """Index a run that just ended (by the worker that executed it); a failure is logged, not
    raised: the sweeper indexes the run on a later sweep and the page scans meanwhile."""
    try:
        eval_run = EvalRun.objects.filter(pk=eval_run_id).first()
        if eval_run is not None:
            ensure_indexed(eval_run)
    except Exception:
        log.exception("indexing eval run %s", eval_run_id)


def sweep(*, index: bool = True) -> SweepReport:
    """One sweep: dead runs, lapsed shards, then (``index``) one run's search index.

    Each chore is a guarded UPDATE (or an idempotent insert), so sweepers of several processes
    may overlap. A Redis error from the re-delivery is raised after the other chores are done
    (the queue worker waits for Redis on it).

    Returns:
        What changed (see :class:`SweepReport`).
    """
    interrupted = mark_stale_runs(force=True)
    indexed = next(iter(index_pending()), None) if index else None
    if indexed:
        log.info("indexed eval run %s for search", indexed)
    redelivered = reap()
    return SweepReport(interrupted=interrupted, redelivered=redelivered, indexed=indexed)


class Sweeper:
    """:func:`sweep` every ``every_s`` seconds on a daemon thread, until :meth:`stop`.

    Args:
        every_s: Seconds between sweeps (default :func:`sweep_every_s`).
        name: The thread's name.
        index: Whether its sweeps index runs for search (``serve``'s supervisor leaves that to
            the worker it supervises, whose sweeps do, so two processes do not index one run).
    """

    def __init__(self, every_s: float | None = None, *, name: str = "evalsite-sweeper", index: bool = True) -> None:
        self.every_s = sweep_every_s() if every_s is None else every_s
        self.index = index
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._queue_down = False

    def start(self) -> None:
        """Start sweeping (the first sweep at once)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sweeping (no sweep starts after this returns; one in progress is waited for)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    def tick(self) -> SweepReport | None:
        """One sweep; an error is logged (``None``), never raised: the next tick tries again.

        Redis unreachable (``EVALSITE_QUEUE=rq``) is one warning line per outage, not a
        traceback a second: the other chores are done by then, and shards wait in the database
        until Redis is back."""
        try:
            report = sweep(index=self.index)
        except Exception as exc:
            if not type(exc).__module__.startswith("redis."):
                log.exception("sweeping")
            elif not self._queue_down:
                self._queue_down = True
                log.warning("sweeper: Redis is unreachable (%s); shards are delivered again once it is back", exc)
            return None
        finally:
            close_old_connections()
        if self._queue_down:
            self._queue_down = False
            log.info("sweeper: Redis is back")
        return report

    def _run(self) -> None:
        try:
            self.tick()
            while not self._stop.wait(self.every_s):
                self.tick()
        finally:
            connection.close()
