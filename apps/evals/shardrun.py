"""Executing one delivered shard of a sharded eval run (called by the queue's job, any worker).

:func:`run_shard` claims the shard with its delivery token (``apps.evals.shards``), runs the
shard's cases that have no stored result yet through the engine, writing each as it finishes
(:class:`ShardStore`: the result writer, whose heartbeat renews the shard's lease and commits
its cases in flight before each target call), marks the shard done and, when it was the last,
finishes the run.

After a worker died mid-shard, the next delivery finds the cases that were in flight
(``EvalShard.in_flight``): they run first, one at a time from the third delivery on, so a case
that crashes its process is soon alone; one that called ``os._exit`` (counted at once by
:func:`shard_exit_guard`) or died alone twice is stored *errored* instead of run again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.agents.registry import load_target
from apps.core.bulk import update_where
from apps.evals.limits import endpoint_limiter
from apps.evals.liveness import current_run_id, exit_now, this_executor
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.evals.resume import process_ended_result
from apps.evals.sets import set_cases
from apps.evals.shard_models import EvalShard, ShardStatus
from apps.evals.shards import cancel_run, claim_shard, finish_shard, lease_s
from apps.evals.store import DjangoEvalStore, StorageError
from apps.traces.models import Run
from evalcore.discovery import rebind_agents_scorer_specs
from evalcore.inference import make_run_id
from evalcore.ratelimit import limited_target
from evalcore.runner import run_eval
from evalcore.scorers.registry import resolve_scorers
from evalcore.scoring import DEFAULT_SCORER_TIMEOUT_S
from evalcore.types import Case

log = logging.getLogger(__name__)

NOTIFY_EVERY_S = 0.25
"""A shard's writer wakes the live pages at most this often (their poll interval)."""

ALONE_FROM_ATTEMPT = 3
"""From this delivery on, the cases in flight at the last death run one at a time."""

DURABLE_FROM_ATTEMPT = 3
"""From this delivery on, each case's in-flight mark is committed before its target runs."""


class ShardLost(StorageError):
    """The shard is no longer this worker's: its run was cancelled, or its lease lapsed and it
    was delivered again. The worker stops; what it stored is kept."""


def worker_name() -> str:
    """``host:pid`` of this process, as stamped on the shards it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


class ShardStore(DjangoEvalStore):
    """The result writer of one shard delivery: liveness goes to the shard row (``in_flight``
    before each target call; the lease renewed on every heartbeat, with the run's heartbeat),
    never to the run's own executor fields, which several workers share.

    Raises (from the writer, to the engine): :class:`ShardLost` once the shard is cancelled or
    re-delivered.
    """

    def __init__(self, shard_id: int, token: str, *, durable_starts: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shard_id = shard_id
        self.token = token
        self.durable_starts = durable_starts
        self._marks: set[str] = set()
        self._marks_lock = threading.Lock()

    async def case_starting(self, run_id: str) -> None:
        """Mark the case in flight. With ``durable_starts`` (the base store's rule) the target
        waits until the mark is committed; otherwise the mark rides on the writer's next batch
        (within ``_BATCH_WAIT_S``), so a wave of cases never waits for the results before it.

        A case that calls ``os._exit`` is named at once either way (:func:`shard_exit_guard`);
        one that kills the process otherwise (a segfault) within a batch of its start may go
        unnamed, so from the :data:`DURABLE_FROM_ATTEMPT` th delivery on a shard marks durably.
        """
        if self.durable_starts:
            await super().case_starting(run_id)
            return
        current_run_id.set(run_id)  # this task's context: the target call inherits it
        self.raise_if_failed()
        with self._marks_lock:
            self._marks.add(run_id)

    def _write_batch(self, items: list[tuple[str, Any]], *, beat: bool = False) -> None:
        with self._marks_lock:
            marks, self._marks = self._marks, set()
        if marks:
            items = [*items, *(("start", (run_id, None, None)) for run_id in marks)]
        super()._write_batch(items, beat=beat)

    _last_notice = 0.0

    def _notify(self, eval_run_ids: set[str]) -> None:
        """Wake the live pages at most every :data:`NOTIFY_EVERY_S` (each push costs a Redis
        round trip and an event loop; the pages' database tail is the source anyway)."""
        now = time.monotonic()
        if eval_run_ids and now - self._last_notice >= NOTIFY_EVERY_S:
            self._last_notice = now
            super()._notify(eval_run_ids)

    def _write_liveness(self, *, beat: bool) -> None:
        fields: dict[str, Any] = {"in_flight": sorted(self._in_flight)}
        now = timezone.now()
        if beat:
            fields["lease_until"] = now + timedelta(seconds=lease_s())
        mine = {"id": self.shard_id, "token": self.token, "status": ShardStatus.RUNNING}
        if not update_where(EvalShard, fields, mine):
            raise ShardLost(f"shard {self.shard_id} was cancelled or delivered again; this worker stops it")
        if beat:
            update_where(EvalRun, {"heartbeat_at": now}, {"id": self.eval_run_id, "status": EvalRunStatus.RUNNING})


def run_shard(shard_id: int, token: str) -> dict[str, Any]:
    """Execute one delivery of a shard (the queue job's body).

    Returns:
        ``{"shard", "status"}``: ``skipped`` (a stale or duplicate delivery, or a cancelled
        run), ``lost`` (cancelled or re-delivered while running), ``done``.

    Raises:
        LookupError, FileNotFoundError: The run's target is gone from its agents folder (the
            run is marked failed and its other shards dropped first).
        StorageError: The results could not be stored (the shard is delivered again once its
            lease lapses).
    """
    shard = claim_shard(shard_id, token, worker_name())
    if shard is None:
        return {"shard": shard_id, "status": "skipped"}
    eval_run = EvalRun.objects.select_related("eval_set").get(pk=shard.eval_run_id)
    try:
        spec = load_target(eval_run.target_id, eval_run.config.get("agents_dir") or None)
    except (LookupError, FileNotFoundError) as exc:
        cancel_run(eval_run)
        EvalRun.objects.filter(pk=eval_run.pk).update(status=EvalRunStatus.FAILED, error=str(exc))
        raise
    durable = shard.attempts >= DURABLE_FROM_ATTEMPT
    store = ShardStore(
        shard_id, token, durable_starts=durable, target_id=spec.id, eval_run_id=eval_run.id, executor=this_executor()
    )
    repeat = int(eval_run.config.get("repeat", 1))
    plan = _plan(shard, eval_run, repeat)
    store.start()
    try:
        with shard_exit_guard(shard_id, token):
            asyncio.run(_run_cases(shard, eval_run, spec, store, plan))
    except StorageError:
        if not isinstance(store.failure, ShardLost):
            raise
    finally:
        try:
            store.close()
        except StorageError:
            if not isinstance(store.failure, ShardLost):
                raise
    if isinstance(store.failure, ShardLost):
        return {"shard": shard_id, "status": "lost"}
    store.raise_if_failed()
    finish_shard(shard_id, token)
    return {"shard": shard_id, "status": "done"}


async def _run_cases(shard: EvalShard, eval_run: EvalRun, spec: Any, store: ShardStore, plan: _Plan) -> None:
    resolved, label = spec.resolve(eval_run.variant or None)
    stored = eval_run.scorer_specs
    if stored and spec.module:  # predicates declared in the agents folder: rebuilt from it
        stored = rebind_agents_scorer_specs(stored, Path(spec.module).parent)
    scorers = resolve_scorers(stored or spec.scorers)
    config = eval_run.config
    repeat = int(config.get("repeat", 1))
    cases, done, suspects, culprits = plan
    target = limited_target(resolved, endpoint=eval_run.model or spec.id, limiter=endpoint_limiter())
    options: dict[str, Any] = {
        "timeout_s": config.get("timeout_s", 60.0),
        "repeat": repeat,
        "sink": store,
        "eval_run_id": eval_run.id,
        "variant": label,
        "run_metadata": {"target_id": spec.id},
        "scorer_timeout_s": config.get("scorer_timeout_s", DEFAULT_SCORER_TIMEOUT_S),
    }
    for case, index in culprits:
        store.on_result(process_ended_result(eval_run.id, case, index, repeat, label, spec.id))
        done.add((case.id, index))
    if suspects:
        wanted = {(c.id, i) for c, i in suspects}
        first = {c.id: c for c, _ in suspects}
        others = {(cid, i) for cid in first for i in range(repeat)} - wanted
        alone = shard.attempts >= ALONE_FROM_ATTEMPT
        concurrency = 1 if alone else int(config.get("concurrency", 8))
        await run_eval(first.values(), target, scorers, concurrency=concurrency, skip=others | done, **options)
        done.update(wanted)
    await run_eval(cases, target, scorers, concurrency=int(config.get("concurrency", 8)), skip=done, **options)


_Plan = tuple[list[Case], set[tuple[str, int]], list[tuple[Case, int]], list[tuple[Case, int]]]


def _plan(shard: EvalShard, eval_run: EvalRun, repeat: int) -> _Plan:
    """The shard's cases, the (case, repeat) pairs already stored, and the cases in flight when
    the last delivery died: (to run again first, to error). Partial traces of those are removed."""
    cases = set_cases(eval_run.eval_set, eval_run.split, case_ids=shard.case_ids)
    rows = EvalResult.objects.filter(eval_run_id=eval_run.id, case_id__in=shard.case_ids)
    done = set(rows.values_list("case_id", "repeat_index"))
    in_flight = [rid for rid in shard.in_flight or [] if isinstance(rid, str)]
    if not in_flight:
        return cases, done, [], []
    counts: dict[str, int] = dict(shard.crash_suspects or {})
    if len(in_flight) == 1:  # only a death while a case ran alone counts against it
        counts[in_flight[0]] = counts.get(in_flight[0], 0) + 1
    EvalShard.objects.filter(pk=shard.pk).update(in_flight=[], crash_suspects=counts)
    Run.objects.filter(run_id__in=in_flight, eval_results__isnull=True).delete()
    wanted = set(in_flight)
    suspects: list[tuple[Case, int]] = []
    culprits: list[tuple[Case, int]] = []
    for case in cases:
        for index in range(repeat):
            rid = make_run_id(eval_run.id, case.id, index, repeat)
            if rid in wanted and (case.id, index) not in done:
                (culprits if counts.get(rid, 0) >= 2 else suspects).append((case, index))
    return cases, done, suspects, culprits


@contextmanager
def shard_exit_guard(shard_id: int, token: str) -> Iterator[None]:
    """While a shard runs, a target calling ``os._exit`` first counts the exit against its case
    (two deaths: errored on the next delivery) and ends the lease, so the shard is delivered
    again at once; the run itself goes on (other workers are not affected)."""
    previous = os._exit

    def guarded_exit(code: int) -> None:  # pragma: no cover - the process ends here
        try:
            record_shard_exit(shard_id, token, current_run_id.get())
        finally:
            exit_now(code)

    os._exit = guarded_exit  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = previous


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
