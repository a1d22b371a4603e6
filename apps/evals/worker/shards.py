"""Sharded eval runs: the bookkeeping of shards in the database (no queue, no execution here).

A sharded run is split into :class:`~apps.evals.models.EvalShard` rows of at most
``EVALSITE_SHARD_SIZE`` cases each (:func:`plan_shards`); ``apps.evals.worker.queue`` enqueues one job
per shard and ``apps.evals.worker.shard_run`` executes a delivered shard. The database is the truth:

- a delivery carries the shard's ``token``; :func:`claim_shard` takes the shard only while that
  token is current and the shard queued (a stale or duplicate delivery does nothing), and gives
  it a lease of ``EVALSITE_SHARD_LEASE_S`` seconds that the worker's heartbeat keeps renewing;
- :func:`requeue_expired` gives a shard whose lease lapsed (its worker died) a new token, to be
  enqueued again; the new delivery runs only the shard's cases without a result;
- results are unique per (eval run, case, repeat) and written idempotently, so a case written
  twice (a presumed-dead worker that was only slow) is stored once;
- the run finishes when its last shard does (:func:`finish_shard`), its summary rebuilt from the
  stored results; :func:`cancel_run` drops the remaining shards (finished cases stay), and
  :func:`reopen_shards` queues the unfinished ones again for a resume.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalRunStatus
from apps.evals.models.shards import EvalShard, ShardStatus
from apps.evals.results.batches import recount
from apps.evals.results.readback import finish_eval_run, report_from_db
from apps.evals.runs.config import read_run_config
from apps.evals.runs.earlystop import early_stop_message
from apps.traces.models import Run

OPEN = (ShardStatus.QUEUED, ShardStatus.RUNNING)
"""Shard statuses that still have work to do."""


def shard_size() -> int:
    """Cases per shard (``EVALSITE_SHARD_SIZE``, default 250)."""
    return max(1, int(getattr(settings, "EVALSITE_SHARD_SIZE", 250)))


def lease_s() -> float:
    """Seconds a worker's claim on a shard lasts without a heartbeat (``EVALSITE_SHARD_LEASE_S``)."""
    return float(getattr(settings, "EVALSITE_SHARD_LEASE_S", 15.0))


def new_token() -> str:
    """A fresh delivery token (16 hex digits)."""
    return secrets.token_hex(8)


def split_ids(ids: Sequence[str], size: int) -> list[list[str]]:
    """``ids`` in consecutive chunks of at most ``size`` (the order kept; none empty).

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"shard size must be >= 1, got {size}")
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


TAIL_FRACTION = 10
"""A run of at least :data:`TAIL_FROM_SHARDS` shards ends with its last ``1 / TAIL_FRACTION`` of
cases in smaller shards (see :func:`shard_chunks`)."""
TAIL_FROM_SHARDS = 8
TAIL_DIVISOR = 5
"""The tail's shards hold ``size // TAIL_DIVISOR`` cases (at least 1)."""


def shard_chunks(ids: Sequence[str], size: int) -> list[list[str]]:
    """``ids`` split into shards: of ``size`` cases each, except that a run of at least
    :data:`TAIL_FROM_SHARDS` shards has its last tenth in shards a fifth that size.

    The workers take shards as they free up, so the run ends when the last shard taken ends:
    with whole shards to the end, workers that found the queue empty waited up to one shard's
    time for the last ones (about 0.3 s of a 6 s run over 4 workers); small last shards even
    the workers' ends out. The order is kept and every id is in exactly one shard.

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"shard size must be >= 1, got {size}")
    if len(ids) < TAIL_FROM_SHARDS * size or size < TAIL_DIVISOR:
        return split_ids(ids, size)
    head = len(ids) - max(size, len(ids) // TAIL_FRACTION)
    return split_ids(ids[:head], size) + split_ids(ids[head:], size // TAIL_DIVISOR)


def run_case_ids(eval_run: EvalRun) -> list[str]:
    """The case ids a run covers, in the set's order (its split; ``config["case_ids"]`` if set)."""
    rows = EvalCase.objects.filter(eval_set_id=eval_run.eval_set_id)
    if eval_run.split != "all":
        rows = rows.filter(split=eval_run.split)
    ids = list(rows.order_by("position", "case_id").values_list("case_id", flat=True))
    chosen = read_run_config(eval_run.config).case_ids
    if chosen:
        wanted = set(chosen)
        ids = [i for i in ids if i in wanted]
    return ids


def plan_shards(eval_run: EvalRun, size: int | None = None) -> list[tuple[int, str]]:
    """Split a prepared run into shards (:func:`shard_chunks`) and mark it queued for the queue workers.

    Args:
        eval_run: A run just prepared (``queued``, or ``running`` as the CLI creates it).
        size: Cases per shard (default :func:`shard_size`; the run's last tenth in smaller ones).

    Returns:
        ``(shard id, token)`` per shard, to hand to the queue's enqueue function.
    """
    size = size or shard_size()
    chunks = shard_chunks(run_case_ids(eval_run), size)
    now = timezone.now()
    shards = [
        EvalShard(eval_run=eval_run, index=i, case_ids=chunk, token=new_token(), enqueued_at=now)
        for i, chunk in enumerate(chunks)
    ]
    with transaction.atomic():
        EvalShard.objects.bulk_create(shards)
        config = read_run_config(eval_run.config).updated(executor="queue", shard_size=size).stored()
        EvalRun.objects.filter(pk=eval_run.pk).update(
            status=EvalRunStatus.QUEUED,
            n_shards=len(shards),
            config=config,
            executor_host="",
            executor_pid=None,
            heartbeat_at=None,
        )
    eval_run.refresh_from_db()
    stored = EvalShard.objects.filter(eval_run=eval_run).order_by("index").values_list("pk", "token")
    return list(stored)


def claim_shard(shard_id: int, token: str, worker: str) -> EvalShard | None:
    """Take a delivered shard for ``worker`` (``host:pid``) if ``token`` is still its delivery.

    Marks its run ``running`` on the first claim. Returns ``None`` (do nothing) for a stale or
    duplicate delivery, a shard no longer queued, or a run no longer queued / running.
    """
    now = timezone.now()
    with transaction.atomic():
        claimed = (
            EvalShard.objects.filter(pk=shard_id, token=token, status=ShardStatus.QUEUED)
            .filter(eval_run__status__in=[EvalRunStatus.QUEUED, EvalRunStatus.RUNNING])
            .update(
                status=ShardStatus.RUNNING, worker=worker, lease_until=now + timedelta(seconds=lease_s()), started=now
            )
        )
        if not claimed:
            return None
        shard = EvalShard.objects.select_related("eval_run").get(pk=shard_id)
        EvalShard.objects.filter(pk=shard_id).update(attempts=shard.attempts + 1)
        shard.attempts += 1
        EvalRun.objects.filter(pk=shard.eval_run_id, status=EvalRunStatus.QUEUED).update(
            status=EvalRunStatus.RUNNING, started=now, heartbeat_at=now, error=""
        )
    return shard


def finish_shard(shard_id: int, token: str) -> bool:
    """Mark a shard done (its delivery ``token`` still current), then finish its run if it was
    the last one. Returns whether the run finished now."""
    rows = EvalShard.objects.filter(pk=shard_id, token=token, status=ShardStatus.RUNNING)
    eval_run_id = rows.values_list("eval_run_id", flat=True).first()
    if eval_run_id is None or not rows.update(status=ShardStatus.DONE, finished=timezone.now(), in_flight=[]):
        return False
    return finish_run_if_done(eval_run_id)


def finish_run_if_done(eval_run_id: str) -> bool:
    """Finish a sharded run whose every shard is done: counters recounted and the summary
    rebuilt from the database. Safe to call from any number of workers at once (the run row is
    locked; the first caller that sees every shard done finishes it). Returns whether it did."""
    with transaction.atomic():
        run = EvalRun.objects.select_for_update().filter(pk=eval_run_id).only("status", "started").first()
        if run is None or run.status not in (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING):
            return False
        if EvalShard.objects.filter(eval_run_id=eval_run_id).exclude(status=ShardStatus.DONE).exists():
            return False
        recount(eval_run_id)
        report = report_from_db(eval_run_id)
        if run.started:
            report.elapsed_s = (timezone.now() - run.started).total_seconds()
        finish_eval_run(eval_run_id, report, status=EvalRunStatus.FINISHED)
    return True


def cancel_run(eval_run: EvalRun, *, by: str = "") -> int | None:
    """Cancel a queued or running sharded run: shards not done are dropped (a worker running one
    stops at its next heartbeat, its finished cases kept), the run is ``interrupted`` (resumable).

    Returns:
        How many shards were dropped; ``None`` when the run was not queued or running.
    """
    reason = "cancelled" + (f" by {by}" if by else "") + "; the finished cases are kept"
    live = [EvalRunStatus.QUEUED, EvalRunStatus.RUNNING]
    if not EvalRun.objects.filter(pk=eval_run.pk, status__in=live).exists():
        return None
    with transaction.atomic():
        # shards first, then the run: the order a worker's writer locks them in (no deadlock)
        dropped = EvalShard.objects.filter(eval_run=eval_run, status__in=OPEN).update(
            status=ShardStatus.CANCELLED, token=new_token(), lease_until=None
        )
        updated = EvalRun.objects.filter(pk=eval_run.pk, status__in=live).update(
            status=EvalRunStatus.INTERRUPTED, finished=timezone.now(), error=reason, in_flight=[]
        )
        if not updated:
            transaction.set_rollback(True)
            return None
    recount(eval_run.pk)
    eval_run.refresh_from_db()
    return dropped


def stop_run_early(eval_run_id: str, target_id: str) -> str:
    """Stop a sharded run whose stored results are all errors of one type (the early-stop rule,
    ``apps.evals.runs.earlystop``): its open shards are dropped (workers running one stop at their
    next heartbeat; queued jobs find a stale token), the run is ``failed`` with the sentence as
    its error and the stored results as its summary.

    Returns:
        The sentence; ``""`` when the errors are of more than one type, a result is not an
        error, or the run is no longer queued or running (nothing changed then).
    """
    runs = Run.objects.filter(eval_results__eval_run_id=eval_run_id)
    types = list(runs.order_by().values_list("error__type", flat=True).distinct()[:2])
    if len(types) != 1 or not types[0]:
        return ""
    first = runs.order_by("pk").values_list("error", flat=True).first() or {}
    n = EvalResult.objects.filter(eval_run_id=eval_run_id).count()
    message = early_stop_message(target_id, str(types[0]), n, str(first.get("message", "")))
    live = [EvalRunStatus.QUEUED, EvalRunStatus.RUNNING]
    with transaction.atomic():
        # shards first, then the run: the order a worker's writer locks them in (no deadlock)
        EvalShard.objects.filter(eval_run_id=eval_run_id, status__in=OPEN).update(
            status=ShardStatus.CANCELLED, token=new_token(), lease_until=None
        )
        if not EvalRun.objects.filter(pk=eval_run_id, status__in=live).update(
            status=EvalRunStatus.FAILED, error=message, in_flight=[]
        ):
            transaction.set_rollback(True)
            return ""
    recount(eval_run_id)
    finish_eval_run(eval_run_id, report_from_db(eval_run_id), status=EvalRunStatus.FAILED)
    return message


def reopen_shards(eval_run: EvalRun) -> list[tuple[int, str]]:
    """Queue a claimed-for-resume sharded run's unfinished shards again (new tokens).

    Returns:
        ``(shard id, token)`` per reopened shard, to enqueue.
    """
    now = timezone.now()
    with transaction.atomic():
        EvalShard.objects.filter(eval_run=eval_run).exclude(status=ShardStatus.DONE).update(
            status=ShardStatus.QUEUED, enqueued_at=now, lease_until=None, worker=""
        )
        reopened = []
        for pk in EvalShard.objects.filter(eval_run=eval_run, status=ShardStatus.QUEUED).values_list("pk", flat=True):
            token = new_token()
            EvalShard.objects.filter(pk=pk).update(token=token)
            reopened.append((pk, token))
    return reopened


def requeue_expired(now: Any = None) -> list[tuple[int, str]]:
    """Give every running shard whose lease lapsed a new delivery token (its worker is presumed
    dead); the caller enqueues them. Each shard is taken by one caller only (guarded UPDATE).

    Returns:
        ``(shard id, new token)`` per shard to enqueue again.
    """
    now = now or timezone.now()
    expired = EvalShard.objects.filter(status=ShardStatus.RUNNING, lease_until__lt=now).values_list("pk", "token")
    out = []
    for pk, old in list(expired):
        token = new_token()
        if EvalShard.objects.filter(pk=pk, token=old, status=ShardStatus.RUNNING, lease_until__lt=now).update(
            status=ShardStatus.QUEUED, token=token, enqueued_at=now
        ):
            out.append((pk, token))
    return out


def requeue_lost(
    lost: Callable[[list[tuple[int, str]]], set[tuple[int, str]]], *, limit: int = 100
) -> list[tuple[int, str]]:
    """Give a new delivery token to queued shards whose job the queue lost (``lost(deliveries)``
    answers which of ``(shard id, token)`` pairs: e.g. a worker killed between taking the job
    and claiming the shard, or a Redis restarted without its data). Only shards queued for
    longer than a lease are asked about, the ``limit`` oldest per call.

    Returns:
        ``(shard id, new token)`` per shard to enqueue again.
    """
    now = timezone.now()
    old = EvalShard.objects.filter(status=ShardStatus.QUEUED, enqueued_at__lt=now - timedelta(seconds=lease_s()))
    candidates = list(old.order_by("enqueued_at").values_list("pk", "token")[:limit])
    out = []
    for pk, token in sorted(lost(candidates)):
        fresh = new_token()
        if EvalShard.objects.filter(pk=pk, token=token, status=ShardStatus.QUEUED).update(token=fresh, enqueued_at=now):
            out.append((pk, fresh))
    return out


def shard_counts(eval_run: EvalRun) -> dict[str, int]:
    """Shards of a run per status (every status present, 0 when none), plus ``workers``: how
    many distinct workers hold a running shard now."""
    rows = EvalShard.objects.filter(eval_run=eval_run).aggregate(
        **{s: Count("id", filter=Q(status=s)) for s in ShardStatus.values},
        workers=Count("worker", filter=Q(status=ShardStatus.RUNNING), distinct=True),
    )
    return {k: int(v or 0) for k, v in rows.items()}
