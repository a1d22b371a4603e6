"""The result writer of a queue work-horse: :class:`ShardStore`, a ``DjangoEvalStore`` whose
liveness goes to the shards it holds instead of the run's own executor fields (which several
workers share).

A horse holds one or more shard *deliveries* at once: the one it was started for and those it
took next from the queue while the last cases of the current one ran (``apps.evals.worker.shard_run``:
a worker's concurrency stays full across shard boundaries). Each delivery's cases in flight go
to its shard row, every heartbeat renews each one's lease, and a shard is marked done (the run
finished when it was the last) as soon as its last result is committed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.utils import timezone

from apps.core.bulk import update_where
from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.models.shards import EvalShard, ShardStatus
from apps.evals.results.executor import current_run_id
from apps.evals.results.writer import DjangoEvalStore, StorageError
from apps.evals.worker.shards import finish_shard, lease_s, stop_run_early

log = logging.getLogger(__name__)

NOTIFY_EVERY_S = 0.25
"""A shard's writer wakes the live pages at most this often (their poll interval)."""


class ShardLost(StorageError):
    """The shard is no longer this worker's: its run was cancelled, or its lease lapsed and it
    was delivered again. The worker stops; what it stored is kept."""


def worker_name() -> str:
    """``host:pid`` of this process, as stamped on the shards it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


class RunStoppedEarly(StorageError):
    """This writer stopped the run early (its first K results were all errors of one type; the
    message is the sentence recorded on the run). The worker stops; what it stored is kept."""


class ShardStore(DjangoEvalStore):
    """The result writer of the shard deliveries one work-horse holds.

    Args:
        shard_id, token: The first delivery (more join with :meth:`add_delivery`).
        durable_starts: Commit each case's in-flight mark before its target runs (see
            :meth:`case_starting`).
        early_stop: The run's early-stop K (0: off): once its first K stored results are all
            errors of one type, the run is stopped (``apps.evals.worker.shards.stop_run_early``).
        **kwargs: As for ``DjangoEvalStore``.

    Raises (from the writer, to the engine): :class:`ShardLost` once a shard it holds is
    cancelled or re-delivered; :class:`RunStoppedEarly` when this writer stopped the run early.
    """

    batch_wait_s = 0.2
    """Results wait up to this long for more before their commit (the base store's 0.05 s made
    ~4x the commits at a CPU-bound target's pace). A worker that dies loses at most that much of
    finished cases, which its shard's next delivery runs again. The base store's hand-off wakes
    the writer only when a batch is due, never per event."""

    wait_follows_target = False  # a shard writer gathers whole waves (fewer commits on PostgreSQL)

    def __init__(
        self, shard_id: int, token: str, *, durable_starts: bool = False, early_stop: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.shard_id = shard_id
        self.token = token
        self.durable_starts = durable_starts
        self._marks: set[str] = set()
        self._marks_lock = threading.Lock()
        self._deliveries: dict[int, str] = {shard_id: token}  # held and not done: shard id -> token
        self._owner: dict[str, int] = {}  # run id -> shard id, until its result is committed
        self._left: dict[int, int] = {}  # shard id -> results still to commit (tracked deliveries)
        self._early_stop = early_stop
        self.finished: list[int] = []  # shards this writer marked done
        self._run_beat: Any = None  # a heartbeat for the run row, written after the batch commits

    # -- deliveries -----------------------------------------------------------------------------

    def add_delivery(self, shard_id: int, token: str, run_ids: Iterable[str]) -> None:
        """Hold a delivery; it is marked done once a result for each of ``run_ids`` is committed."""
        wanted = list(run_ids)
        with self._marks_lock:
            self._deliveries[shard_id] = token
            self._left[shard_id] = len(wanted)
            self._owner.update(dict.fromkeys(wanted, shard_id))

    def deliveries(self) -> dict[int, str]:
        """The deliveries held and not done yet: shard id -> token."""
        with self._marks_lock:
            return dict(self._deliveries)

    def delivery_of(self, run_id: str | None) -> tuple[int, str]:
        """The delivery a case belongs to (the first one when unknown)."""
        with self._marks_lock:
            shard_id = self._owner.get(run_id or "", self.shard_id)
            return shard_id, self._deliveries.get(shard_id, self.token)

    def done_deliveries(self) -> list[tuple[int, str]]:
        """Held deliveries with nothing left to commit (e.g. every case already stored)."""
        with self._marks_lock:
            return [(s, t) for s, t in self._deliveries.items() if self._left.get(s) == 0]

    # -- writer -----------------------------------------------------------------------------------

    async def case_starting(self, run_id: str) -> None:
        """Mark the case in flight. With ``durable_starts`` (the base store's rule) the target
        waits until the mark is committed; otherwise the mark rides on the writer's next batch
        (within :attr:`batch_wait_s`), so a wave of cases never waits for the results before it.

        A case that calls ``os._exit`` is named at once either way (``shard_exit_guard``); one
        that kills the process otherwise (a segfault) within a batch of its start may go unnamed,
        so from the third delivery on a shard marks durably.
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
        if self._run_beat is not None:
            where = {"id": self.eval_run_id, "status": EvalRunStatus.RUNNING}
            update_where(EvalRun, {"heartbeat_at": self._run_beat}, where)
            self._run_beat = None
        done: list[tuple[int, str]] = []
        with self._marks_lock:
            for kind, obj in items:
                if kind != "result":
                    continue
                shard_id = self._owner.pop(obj.run.run_id, None)
                if shard_id is not None and shard_id in self._left:
                    self._left[shard_id] -= 1
                    if self._left[shard_id] == 0:
                        done.append((shard_id, self._deliveries.pop(shard_id)))
        for shard_id, token in done:  # committed above: the shard (and maybe the run) ends now
            finish_shard(shard_id, token)
            self.finished.append(shard_id)
        if self._early_stop and any(kind == "result" for kind, _ in items):
            self._check_early_stop()

    def _check_early_stop(self) -> None:
        """Stop the run when its first K stored results are all errors of one type (the
        counters of every worker's writes); decided once per writer."""
        row = EvalRun.objects.filter(pk=self.eval_run_id).values("n_done", "n_errored", "status").first()
        if row is None or row["status"] != EvalRunStatus.RUNNING or row["n_errored"] < row["n_done"]:
            self._early_stop = 0  # a case got through (or the run ended): run to the end
            return
        if row["n_done"] < self._early_stop:
            return
        self._early_stop = 0
        message = stop_run_early(str(self.eval_run_id), self.target_id)
        if message:
            raise RunStoppedEarly(message)

    _last_notice = 0.0

    def _notify(self, eval_run_ids: set[str]) -> None:
        """Wake the live pages at most every :data:`NOTIFY_EVERY_S` (each push costs a Redis
        round trip and an event loop; the pages' database tail is the source anyway)."""
        now = time.monotonic()
        if eval_run_ids and now - self._last_notice >= NOTIFY_EVERY_S:
            self._last_notice = now
            super()._notify(eval_run_ids)

    def _write_liveness(self, *, beat: bool) -> None:
        now = timezone.now()
        with self._marks_lock:
            held = dict(self._deliveries)
            owner = {rid: self._owner.get(rid, self.shard_id) for rid in self._in_flight}
        for shard_id, token in held.items():
            fields: dict[str, Any] = {"in_flight": sorted(r for r, s in owner.items() if s == shard_id)}
            if beat:
                fields["lease_until"] = now + timedelta(seconds=lease_s())
            mine = {"id": shard_id, "token": token, "status": ShardStatus.RUNNING}
            if not update_where(EvalShard, fields, mine):
                raise ShardLost(f"shard {shard_id} was cancelled or delivered again; this worker stops it")
        if beat:  # written after the batch commits: the run row (every worker's) is not locked meanwhile
            self._run_beat = now


def release_deliveries(deliveries: dict[int, str]) -> int:
    """End the leases of deliveries this horse will not finish, so they are delivered again at
    the next reap instead of a lease later. Returns how many."""
    if not deliveries:
        return 0
    past = timezone.now() - timedelta(seconds=1)
    n = 0
    for shard_id, token in deliveries.items():
        n += EvalShard.objects.filter(pk=shard_id, token=token, status=ShardStatus.RUNNING).update(lease_until=past)
    return n
