"""Executing one delivered shard of a sharded eval run (called by the queue's job, any worker).

:func:`run_shard` claims the shard with its delivery token (``apps.evals.worker.shards``), runs the
shard's cases that have no stored result yet through the engine, writing each as it finishes
(``apps.evals.worker.shard_writer.ShardStore``: the result writer, whose heartbeat renews the shard's
lease and commits its cases in flight), and the writer marks the shard done once its last
result is committed (finishing the run when it was the last). With the RQ queue a horse takes
the next fresh shards of the same run off the queue while its last cases run
(:class:`ShardChain`), so a worker's concurrency stays full across shard boundaries.

After a worker died mid-shard, the next delivery finds the cases that were in flight
(``EvalShard.in_flight``): they run first, one at a time from the third delivery on, so a case
that crashes its process is soon alone; one that called ``os._exit`` (counted at once by
:func:`shard_exit_guard`) or died alone twice is stored *errored* instead of run again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.evals.models.shards import EvalShard, ShardStatus
from apps.evals.results.executor import this_executor
from apps.evals.results.writer import StorageError
from apps.evals.runs.config import read_run_config
from apps.evals.runs.earlystop import early_stop_k
from apps.evals.runs.liveness import os_exit_guarded
from apps.evals.runs.plan import RunPlan, load_run_target
from apps.evals.runs.resume import count_deaths, sort_in_flight
from apps.evals.sets.cases import set_cases
from apps.evals.worker.shard_writer import RunStoppedEarly, ShardLost, ShardStore, release_deliveries, worker_name
from apps.evals.worker.shards import cancel_run, claim_shard, finish_shard
from apps.traces.models import Run
from evalcore.inference import make_run_id
from evalcore.types import Case

log = logging.getLogger(__name__)

ALONE_FROM_ATTEMPT = 3
"""From this delivery on, the cases in flight at the last death run one at a time."""

DURABLE_FROM_ATTEMPT = 3
"""From this delivery on, each case's in-flight mark is committed before its target runs."""

Steal = Callable[[Callable[[int, str], str]], "tuple[int, str] | None"]
"""Takes the next queued delivery off the queue if ``classify(shard id, token)`` says ``take``
(see ``apps.evals.worker.queue.steal_shard_job``); ``None`` when the queue's next job is not taken."""


def chain_limit() -> int:
    """Shards a work-horse may take after the one it was started for (``EVALSITE_SHARD_CHAIN``,
    default 20; 0: one shard per horse)."""
    return max(0, int(getattr(settings, "EVALSITE_SHARD_CHAIN", 20)))


def run_shard(shard_id: int, token: str, *, steal: Steal | None = None) -> dict[str, Any]:
    """Execute one delivery of a shard (the queue job's body).

    With ``steal`` (the RQ queue), while the shard's last cases run the horse takes the queue's
    next job when it is a fresh shard of the same run (up to :func:`chain_limit`), so its
    concurrency stays full across shard boundaries and no fork, connection or target load is
    paid per shard (:class:`ShardChain`).

    Returns:
        ``{"shard", "status", "shards"}``: ``skipped`` (a stale or duplicate delivery, or a
        cancelled run), ``lost`` (cancelled or re-delivered while running), ``stopped`` (the run
        was stopped early: its first K results were all errors of one type), ``done``;
        ``shards`` is how many this horse marked done.

    Raises:
        LookupError, FileNotFoundError: The run's target is gone from its agents folder (the
            run is marked failed and its other shards dropped first).
        StorageError: The results could not be stored (the shards held are delivered again).
    """
    shard = claim_shard(shard_id, token, worker_name())
    if shard is None:
        return {"shard": shard_id, "status": "skipped", "shards": 0}
    eval_run = EvalRun.objects.select_related("eval_set").get(pk=shard.eval_run_id)
    try:
        spec = load_run_target(eval_run)
    except (LookupError, FileNotFoundError) as exc:
        cancel_run(eval_run)
        EvalRun.objects.filter(pk=eval_run.pk).update(status=EvalRunStatus.FAILED, error=str(exc))
        raise
    durable = shard.attempts >= DURABLE_FROM_ATTEMPT
    config = read_run_config(eval_run.config)
    store = ShardStore(
        shard_id,
        token,
        durable_starts=durable,
        early_stop=early_stop_k(config),
        target_id=spec.id,
        eval_run_id=eval_run.id,
        executor=this_executor(),
    )
    work = _shard_work(shard, eval_run, config.repeat)
    store.add_delivery(shard_id, token, _run_ids(eval_run.id, work.cases, config.repeat, work.done))
    limit = chain_limit() if steal is not None and not durable else 0
    chain = ShardChain(eval_run, store, work.done, steal, limit) if steal is not None and limit else None
    store.start()
    ended = (ShardLost, RunStoppedEarly)
    try:
        with shard_exit_guard(store):
            asyncio.run(_run_cases(shard, RunPlan.of(eval_run, spec), store, work, chain))
    except StorageError:
        if not isinstance(store.failure, ended):
            raise
    finally:
        try:
            if chain is not None:
                chain.close()
            store.close()
        except StorageError:
            if not isinstance(store.failure, ended):
                raise
        finally:
            if store.failure is not None:  # the shards held and not done go back to the queue now
                release_deliveries(store.deliveries())
    counted = len(store.finished)
    if isinstance(store.failure, RunStoppedEarly):
        return {"shard": shard_id, "status": "stopped", "shards": counted}
    if isinstance(store.failure, ShardLost):
        return {"shard": shard_id, "status": "lost", "shards": counted}
    store.raise_if_failed()
    for done_id, done_token in store.done_deliveries():  # nothing was left to run in them
        finish_shard(done_id, done_token)
        counted += 1
    release_deliveries(store.deliveries())  # none, unless the engine stopped short
    return {"shard": shard_id, "status": "done", "shards": counted}


def _run_ids(eval_run_id: str, cases: list[Case], repeat: int, done: set[tuple[str, int]]) -> list[str]:
    """The run ids of the (case, repeat) pairs still to store."""
    return [make_run_id(eval_run_id, c.id, i, repeat) for c in cases for i in range(repeat) if (c.id, i) not in done]


async def _run_cases(
    shard: EvalShard, plan: RunPlan, store: ShardStore, work: _ShardWork, chain: ShardChain | None
) -> None:
    alone = shard.attempts >= ALONE_FROM_ATTEMPT
    # ``done`` is read lazily: the chain adds what the shards it takes have stored already
    await plan.run(
        work.cases if chain is None else chain.stream(work.cases),
        sink=store,
        done=work.done,
        suspects=work.suspects,
        culprits=work.culprits,
        suspects_concurrency=1 if alone else plan.config.concurrency,
    )


class ShardChain:
    """The next shards of the same run, taken off the queue by a work-horse while the last
    cases of its current shard run (their ``run_eval`` pulls cases as workers free up, so the
    next shard's cases start as the current one's end).

    Only fresh shards (never claimed: no case in flight to suspect) of the same run are taken,
    and only from the head of the queue, so runs queued after this one keep their turn.
    Database and queue calls run on a thread of their own (not on the event loop).
    """

    def __init__(self, eval_run: EvalRun, store: ShardStore, skip: set[tuple[str, int]], steal: Steal, limit: int):
        self.eval_run = eval_run
        self.store = store
        self.skip = skip
        self.steal = steal
        self.limit = limit
        self.taken = 0
        config = read_run_config(eval_run.config)
        self.repeat = config.repeat
        self.lead = max(1, config.concurrency)
        """The next shard is taken when this many cases of the current one are left to hand out."""
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="evalsite-shard-chain")

    async def stream(self, cases: list[Case]) -> AsyncIterator[Case]:
        """``cases``, then the cases of each shard taken next, until none is.

        The next shard is taken while the last :attr:`lead` cases of the current one are handed
        out (on the chain's thread), so its cases are there when a case slot frees: the engine
        pulls the stream under a lock, and every slot that freed while a take's round trips ran
        (a claim, the cases, the results stored) waited for it, once per shard. A shard taken
        early and never started (the run stopped) is released like any delivery held.
        """
        loop = asyncio.get_running_loop()
        batch = cases
        while True:
            ahead: asyncio.Future[list[Case] | None] | None = None
            start_at = max(0, len(batch) - self.lead)
            for index, case in enumerate(batch):
                if index == start_at:
                    ahead = loop.run_in_executor(self._pool, self._next)
                yield case
            more = await (ahead if ahead is not None else loop.run_in_executor(self._pool, self._next))
            if not more:
                return
            batch = more

    def _classify(self, shard_id: int, token: str) -> str:
        """``take`` a fresh shard of this run, ``drop`` a stale delivery, ``stop`` at anything else."""
        row = EvalShard.objects.filter(pk=shard_id, token=token).values("status", "eval_run_id", "attempts").first()
        if row is None or row["status"] != ShardStatus.QUEUED:
            return "drop"
        return "take" if row["eval_run_id"] == self.eval_run.id and not row["attempts"] else "stop"

    def _next(self) -> list[Case] | None:
        """Claim the next wanted delivery and hold it in the store; its cases (``None``: none)."""
        if self.taken >= self.limit or self.store.failure is not None:
            return None
        try:
            for _ in range(3):  # a stolen job whose shard was re-delivered meanwhile: the next one
                got = self.steal(self._classify)
                if got is None:
                    return None
                shard = claim_shard(got[0], got[1], worker_name())
                if shard is None:
                    continue
                self.taken += 1
                cases = set_cases(self.eval_run.eval_set, self.eval_run.split, case_ids=shard.case_ids)
                rows = EvalResult.objects.filter(eval_run_id=self.eval_run.id, case_id__in=shard.case_ids)
                stored = set(rows.values_list("case_id", "repeat_index"))
                self.skip.update(stored)
                self.store.add_delivery(got[0], got[1], _run_ids(self.eval_run.id, cases, self.repeat, stored))
                return cases
        except Exception as exc:  # taking more is an optimisation: the shards stay with the queue
            if type(exc).__module__.startswith("redis."):  # Redis is down: the worker says so once
                log.warning("not taking the next shard of eval run %s: %s", self.eval_run.id, exc)
                self.limit = self.taken  # no more tries in this horse
            else:
                log.exception("taking the next shard of eval run %s", self.eval_run.id)
        return None

    def close(self) -> None:
        """Close the thread's database connection and stop it."""
        self._pool.submit(connections.close_all).result()
        self._pool.shutdown()


@dataclass(slots=True)
class _ShardWork:
    """A delivery's cases: all of them, the (case, repeat) pairs already stored, and the cases in
    flight when the last delivery died (to run again first; to error: two deaths counted)."""

    cases: list[Case]
    done: set[tuple[str, int]]
    suspects: list[tuple[Case, int]] = field(default_factory=list)
    culprits: list[tuple[Case, int]] = field(default_factory=list)


def _shard_work(shard: EvalShard, eval_run: EvalRun, repeat: int) -> _ShardWork:
    """What the delivery of ``shard`` runs. Partial traces of the cases in flight are removed."""
    cases = set_cases(eval_run.eval_set, eval_run.split, case_ids=shard.case_ids)
    rows = EvalResult.objects.filter(eval_run_id=eval_run.id, case_id__in=shard.case_ids)
    done = set(rows.values_list("case_id", "repeat_index"))
    in_flight = [rid for rid in shard.in_flight or [] if isinstance(rid, str)]
    if not in_flight:
        return _ShardWork(cases, done)
    counts = count_deaths(in_flight, shard.crash_suspects)
    EvalShard.objects.filter(pk=shard.pk).update(in_flight=[], crash_suspects=counts)
    Run.objects.filter(run_id__in=in_flight, eval_results__isnull=True).delete()
    suspects, culprits = sort_in_flight(eval_run.id, cases, repeat, done, in_flight, counts)
    return _ShardWork(cases, done, suspects, culprits)


@contextmanager
def shard_exit_guard(store: ShardStore) -> Iterator[None]:
    """While a horse runs its shards, a target calling ``os._exit`` first counts the exit
    against its case (two deaths: errored on the next delivery) and ends the leases of the
    shards held, so they are delivered again at once; the run itself goes on (other workers are
    not affected). The guard itself is the one every run uses (:func:`~apps.evals.runs.liveness.os_exit_guarded`)."""

    def record(code: int, caller: str | None) -> None:  # pragma: no cover - the process ends after it
        shard_id, token = store.delivery_of(caller)
        record_shard_exit(shard_id, token, caller)
        release_deliveries({s: t for s, t in store.deliveries().items() if s != shard_id})

    with os_exit_guarded(record):
        yield


def record_shard_exit(shard_id: int, token: str, caller: str | None) -> None:
    """Count a process exit against the case that called it and end the shard's lease."""
    try:
        with transaction.atomic():
            row = EvalShard.objects.filter(pk=shard_id, token=token).values("crash_suspects", "in_flight").first()
            if row is None:
                return
            counts = dict(row["crash_suspects"] or {})
            in_flight = row["in_flight"] or []
            blamed = caller or (in_flight[0] if len(in_flight) == 1 else None)
            if blamed is not None:
                counts[blamed] = counts.get(blamed, 0) + 2
            EvalShard.objects.filter(pk=shard_id, token=token).update(
                crash_suspects=counts, lease_until=timezone.now() - timedelta(seconds=1)
            )
    except Exception:
        log.exception("could not record os._exit on shard %s", shard_id)
