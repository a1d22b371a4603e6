"""``DjangoEvalStore``: the engine's ``EvalStore`` on the Django models.

The runner calls ``on_event`` / ``on_result`` from its event loop; both only enqueue. One writer
thread drains the queue in batches (``apps.evals.results.batches``: rows built once, written with
``executemany`` on SQLite / ``COPY`` on PostgreSQL) of at most ``_BATCH`` items, gathered for at
most ``_BATCH_WAIT_S`` (never while a case waits to start), so a finished case is committed
within a bounded delay (well under 250 ms unless another process holds the SQLite write lock)
and a crash loses only the cases in flight. The queue is bounded (``_QUEUE_ITEMS``): when the
writer is behind, the engine waits (``case_starting`` asynchronously, ``on_result`` /
``on_event`` in short blocking steps), so memory is O(concurrency + batch), not O(cases).

Before each target call the runner awaits :meth:`DjangoEvalStore.case_starting`. By default it
only notes the case as in flight: the marks ride on the writer's next batch (at most one write of
the run's ``in_flight`` per batch), so marking a case is never on its critical path (issue 30).
A case whose target calls ``os._exit`` is still named at once (the exit guard writes the marks
held in memory, :meth:`DjangoEvalStore.in_flight_now`); one that kills the process otherwise (a
segfault, ``kill -9``) within a batch of its start may go unnamed, and its resume then re-runs
every case not stored as done. With ``durable_starts`` (a resumed run: a case that killed the
process runs again) the case instead waits until its mark is committed: with a fast target,
everything queued before the start is committed with it; while the target is slow (calls of
several ms), a wave's starts are committed first and the rows queued before them right after,
while the new calls run (see ``_segments``). Events create their ``Run`` row
(status ``running``) as they arrive, so a slow case's trace can be watched while it runs; the
result completes the row.

With an ``executor`` (the process executing the run) the writer also refreshes the run's
heartbeat every ``EVALSITE_HEARTBEAT_S`` seconds (see ``apps.evals.runs.liveness``), checks that the
SQLite file is still the one it opened, and stops the run (``StorageError``) when the database
was deleted or replaced, or when another process took the run over.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from typing import Any

from django.db import DatabaseError, IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone

from apps.core.bulk import update_where
from apps.evals.events import results_written
from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.results.batches import BatchWriter
from apps.evals.results.executor import current_run_id, database_file, file_identity, heartbeat_interval_s
from apps.evals.results.handoff import Handoff, resolve_waiters
from evalcore.tracing import TraceEvent
from evalcore.types import CaseResult

log = logging.getLogger(__name__)

_BATCH = 500  # items per transaction at most: keeps one commit (and so the durability delay) short
_BATCH_WAIT_S = 0.05  # a batch waits this long at most for more items (never when a case waits to start)
_QUEUE_ITEMS = 4 * _BATCH  # the queue's bound: past it the engine waits for the writer (backpressure)
_SLOW_TARGET_MS = 2.0  # target calls slower than this on average: a wave's starts are committed first
_YIELD_S = 0.001  # the writer's pause after committing a wave's starts (see _writer)
_FLUSH = object()
_STOP = object()
_SWITCH_S = 0.0005
"""The interpreter's thread switch interval while a writer thread runs (Python's default is 5 ms):
when the engine's event loop wants the GIL back (a target's call returned, a timer is due) while
this thread builds a batch's rows, it waits at most this long instead of up to 5 ms, so the
writer adds no latency to the cases (issue 30's latency floor). Restored when the last writer
stops."""
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.005


class StorageError(RuntimeError):
    """Results can no longer be stored: the database failed, vanished, or the run was taken over.

    The eval command exits 3 on it (never 0 or 1: those are the gates' codes).
    """


class DjangoEvalStore:
    """The engine's ``EvalSink`` for an eval run whose row exists (``prepare.prepare_eval_run``):
    persists its runs, events and results through the Django ORM.

    Args:
        target_id: Stamped on every ``Run`` row.
        eval_run_id: Results go to this eval run (default: the id in each run's metadata).
        rescore: Results annotate runs that are already stored (a re-scored eval run); run
            rows are linked, never written again.
        executor: The ``liveness.Executor`` stamped on the run; its writer then beats.
        durable_starts: Each case waits, before its target call, until its in-flight mark is
            committed (see :meth:`case_starting`); off, the marks ride on the next batch.

    Use as a context manager (or call :meth:`close`) so the writer thread finishes.
    """

    batch_wait_s = _BATCH_WAIT_S
    """How long a batch's first item waits for more before its commit (the durability delay)."""

    wait_follows_target = True
    """Shorten the batch wait to a fifth of the target's mean call time while the target is slow
    (see ``_segments``)."""

    def __init__(
        self,
        *,
        target_id: str = "",
        eval_run_id: str | None = None,
        rescore: bool = False,
        executor: Any = None,
        durable_starts: bool = False,
    ) -> None:
        self.target_id = target_id
        self.eval_run_id = eval_run_id
        self.rescore = rescore
        # liveness: the apps.evals.results.executor.Executor stamped on the run (heartbeat writer), or None
        self.executor = executor
        self.durable_starts = durable_starts
        self._in_flight: set[str] = set()
        # cases started and not yet returned (the engine's side), and the marks not yet written
        self._live: dict[str, None] = {}
        self._marks: set[str] = set()
        self._marks_lock = threading.Lock()
        self._db_file = database_file()
        # bounded: when the writer is behind, the engine waits (memory O(concurrency + batch))
        self._queue = Handoff(maxsize=_QUEUE_ITEMS, batch=_BATCH, wait_s=self.batch_wait_s)
        self._kick_pending = False
        self._target_ms = 0.0  # moving average of the target calls' time (ms): see _segments
        self._finishing: set[str] = set()  # run ids of the results in the writer's current batch
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._batches = BatchWriter(target_id=target_id, eval_run_id=eval_run_id, rescore=rescore)
        self._lock = threading.Lock()

    # -- EvalSink protocol ---------------------------------------------------------------------

    def on_event(self, event: TraceEvent) -> None:
        self._put(("event", event))

    def on_result(self, result: CaseResult) -> None:
        if self._error is not None:
            # stop the run: results after a failed write could not be stored
            self.raise_if_failed()
        self._live.pop(result.run.run_id, None)
        self._put(("result", result))

    async def case_starting(self, run_id: str) -> None:
        """Mark ``run_id`` in flight. By default the mark rides on the writer's next batch and
        this returns at once (never on the case's critical path); with ``durable_starts`` it
        returns once the mark is committed (with a fast target, with everything queued before
        it; see ``_segments``), so a target that kills the process (a segfault) leaves its case
        named on the run. Either way a target calling ``os._exit`` is named (the exit guard
        writes :meth:`in_flight_now`), and a case that finished is committed within the
        durability delay (never lost past it). Concurrent starts share one commit.

        Raises:
            StorageError: The writer failed (the run stops).
        """
        if self.rescore or not self.eval_run_id:
            return
        current_run_id.set(run_id)  # this task's context: the target call inherits it
        self._live[run_id] = None
        if not self.durable_starts:
            self.raise_if_failed()
            with self._marks_lock:
                self._marks.add(run_id)
            return
        if self._error is None:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()
            while self._queue.full() and self._writer_alive():
                # the writer is behind: wait here, where the event loop (and Ctrl-C) keeps running
                await asyncio.sleep(0.005)
            self._put(("start", (run_id, loop, future)))
            if not self._kick_pending:
                # the batch is due once the loop has run every task ready now: the starts of a
                # whole wave of cases (and the results before them) share one commit
                self._kick_pending = True
                loop.call_soon(self._kick)
            await future
        if self._error is not None:
            self.raise_if_failed()

    def in_flight_now(self) -> list[str]:
        """The run ids whose target has started and not returned, as this process knows them
        now (committed or not): what the exit guard records when a target ends the process."""
        for _ in range(10):
            try:
                return sorted(self._live)
            except RuntimeError:  # changed by the engine's thread while copied: copy again
                continue
        return sorted(self._in_flight)

    def raise_if_failed(self) -> None:
        """Raise the writer's failure, if any.

        Raises:
            StorageError: The writer failed (its message says why; the cause is chained).
        """
        error = self._error
        if error is None:
            return
        if isinstance(error, StorageError):
            raise StorageError(str(error)) from error
        raise StorageError(f"the result writer failed: {type(error).__name__}: {error}") from error

    @property
    def reported_model(self) -> str:
        """The first model a run written by this store reported (``""``: none did)."""
        return self._batches.reported_model

    @property
    def written(self) -> int:
        """Results this store wrote (not those it found stored already)."""
        return self._batches.written

    @property
    def failure(self) -> BaseException | None:
        """The writer's error, if it failed (results after it were not stored)."""
        return self._error

    def start(self) -> None:
        """Start the writer now (with an ``executor``: the heartbeat begins before any case)."""
        self._ensure_thread()

    def flush(self) -> None:
        """Block until everything queued so far is committed.

        Raises:
            RuntimeError: The writer thread failed (its error is chained).
        """
        if self._thread is None:
            return
        done = threading.Event()
        self._put((_FLUSH, done), urgent=True)
        while not done.wait(0.2):
            if self._thread is None or not self._thread.is_alive():
                break
        if self._error is not None:
            self.raise_if_failed()

    def close(self) -> None:
        """Flush and stop the writer thread (stopped even when the flush reports a failure).

        Raises:
            RuntimeError: The writer thread failed (its error is chained).
        """
        if self._thread is None:
            return
        try:
            self.flush()
        finally:
            self._queue.put((_STOP, None), urgent=True, alive=self._writer_alive)
            self._thread.join()
            self._thread = None
            _restore_switch_interval()

    def __enter__(self) -> DjangoEvalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writer thread ------------------------------------------------------------------------

    def _put(self, item: tuple[Any, Any], *, urgent: bool = False) -> None:
        """Queue ``item`` for the writer; while the queue is full, wait for it to drain.

        Waits in short steps (signal handlers run between them), and never for a writer thread
        that has ended (then the item is dropped; the error, if any, is raised elsewhere).
        """
        self._ensure_thread()
        self._queue.put(item, urgent=urgent, alive=self._writer_alive)

    def _kick(self) -> None:
        """Make the queued items due (a case waits to start): runs on the engine's loop."""
        self._kick_pending = False
        self._queue.make_urgent()

    def _writer_alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                _shorten_switch_interval()
                self._thread = threading.Thread(target=self._writer, name="evalsite-result-writer", daemon=True)
                self._thread.start()

    def _writer(self) -> None:
        close_old_connections()
        beat_every = heartbeat_interval_s() if self.executor is not None else None
        next_beat = time.monotonic() if beat_every is not None else float("inf")
        db_identity = file_identity(self._db_file)
        items: list[tuple[Any, Any]] = []
        try:
            while True:
                items = self._queue.take(next_beat)
                self._finishing = {obj.run.run_id for kind, obj in items if kind == "result"}
                segments = self._segments(items)
                for index, segment in enumerate(segments):
                    beat = time.monotonic() >= next_beat
                    self._commit_segment(segment, beat, db_identity)
                    if beat and beat_every is not None:
                        next_beat = time.monotonic() + beat_every
                    if index + 1 < len(segments):
                        # the starts are released: let the engine's loop take the GIL and make
                        # the wave's calls before this thread builds the next segment's rows
                        time.sleep(_YIELD_S)
                if any(kind is _STOP for kind, _ in items):
                    return
        except BaseException as exc:  # a bug here must not leave the engine waiting forever
            log.exception("result writer stopped")
            if self._error is None:
                self._error = exc
            self._release_all(items)
        finally:
            connection.close()

    def _release_all(self, items: list[tuple[Any, Any]]) -> None:
        """Wake whatever waits on the writer (cases to start, flushes) after it failed, in the
        batch it held (``items``) and in the queue: they see :attr:`failure` and stop the run
        instead of waiting for a writer that is gone."""
        while items:
            self._commit_segment(items, False, None)
            items = self._queue.take(0.0)

    def _segments(self, items: list[tuple[Any, Any]]) -> list[list[tuple[Any, Any]]]:
        """The batch as one commit or, while the target is slow (calls of several ms on average),
        as two: the case starts first (a short transaction: the in-flight marks), then the
        results and events. The wave's next target calls then wait only for their marks, not for
        the rows of the wave before them, which are committed right after, while those calls run
        (well within the durability bound). A result's case leaves the in-flight marks in the
        first commit (it returned: it did not end the process); if the process died between the
        two commits, resume simply runs that case again. Flushes and the stop stay last: they
        are released once everything before them is committed."""
        for kind, payload in items:
            if kind == "result":
                self._target_ms += 0.1 * (payload.run.elapsed_ms - self._target_ms)
        if self._target_ms < _SLOW_TARGET_MS:
            self._queue.wait_s = self.batch_wait_s
            return [items]
        if self.wait_follows_target:
            # the trace events of a wave's calls arrive in a burst just after its starts: commit
            # them early in the calls, never as the wave returns (a commit then delays the next
            # wave's starts; with a 50 ms target and a 50 ms wait, it fell there every time)
            self._queue.wait_s = min(self.batch_wait_s, max(0.001, self._target_ms / 5000))
        starts = [item for item in items if item[0] == "start"]
        if not starts or len(starts) == len(items):
            return [items]
        return [starts, [item for item in items if item[0] != "start"]]

    def _commit_segment(self, items: list[tuple[Any, Any]], beat: bool, db_identity: Any) -> None:
        """Write and commit ``items`` (with the heartbeat on a ``beat``), then release what waits on
        them: flushes, and the cases waiting to start. A failure stops the writer (``_error``)."""
        data = [i for i in items if i[0] in ("event", "result", "start")]
        if (data or beat) and self._error is None:
            try:
                if beat and self._db_file is not None and file_identity(self._db_file) != db_identity:
                    raise StorageError(
                        f"the database file {self._db_file} was deleted or replaced during the run; "
                        "the results of this run are lost"
                    )
                self._write_batch(data, beat=beat)
            except BaseException as exc:
                if isinstance(exc, StorageError):
                    log.error("result writer stopped: %s", exc)
                elif isinstance(exc, DatabaseError):
                    # a full disk, a locked or broken file: the caller reports it in one line (the
                    # CLI's StorageFailure, the run's error); the traceback only at debug level
                    log.debug("result writer failed", exc_info=True)
                else:
                    log.exception("result writer failed")
                self._error = exc
        waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        for kind, payload in items:
            if kind is _FLUSH:
                payload.set()
            elif kind == "start":
                waiting.append((payload[1], payload[2]))
        resolve_waiters(waiting)

    def _write_batch(self, items: list[tuple[str, Any]], *, beat: bool = False) -> None:
        # the marks noted since the last batch (a case whose result is in this batch was marked
        # before its result was queued, so its mark is here or was written already)
        with self._marks_lock:
            marks, self._marks = self._marks, set()
        if marks:
            items = [*items, *(("start", (run_id, None, None)) for run_id in marks)]
        # the results of this segment and of the writer's whole batch (see _segments)
        finished = {item[1].run.run_id for item in items if item[0] == "result"} | self._finishing
        started = {item[1][0] for item in items if item[0] == "start"}
        in_flight_changed = bool(started - self._in_flight) or bool(finished & self._in_flight)
        self._in_flight |= started
        self._in_flight -= finished
        events = [obj for kind, obj in items if kind == "event"]
        results = [obj for kind, obj in items if kind == "result"]
        liveness = bool(self.eval_run_id) and (in_flight_changed or beat)
        batches = self._batches
        if connection.vendor == "postgresql" and (events or results) and not batches.rescore:
            # COPY with no savepoints (a third of a batch's round trips); a row stored already
            # (a re-delivered shard) aborts the transaction: write the batch again, skipping it
            before = batches.state()
            batches.optimistic = True
            try:
                with transaction.atomic():
                    if liveness:
                        self._write_liveness(beat=beat)
                    counts = batches.write(events, results)
                self._notify(set(counts))
                return
            except IntegrityError:
                batches.restore(before)
            finally:
                batches.optimistic = False
        with transaction.atomic():
            if liveness:
                self._write_liveness(beat=beat)
            counts = batches.write(events, results) if events or results else {}
        self._notify(set(counts))

    def _write_liveness(self, *, beat: bool) -> None:
        """Commit the cases in flight (and, on a beat, the heartbeat) on the run row.

        Raises:
            StorageError: On a beat, the run row is gone or another process executes it now.
        """
        fields: dict[str, Any] = {"in_flight": sorted(self._in_flight)}
        if self.executor is None:
            update_where(EvalRun, fields, {"id": self.eval_run_id})
            return
        fields["heartbeat_at"] = timezone.now()
        mine = {"id": self.eval_run_id, "executor_pid": self.executor.pid, "executor_host": self.executor.host}
        if update_where(EvalRun, fields, mine):
            if beat:
                # marked interrupted while this process was alive but silent (e.g. the database
                # was locked for long): it is still ours, so it is running again
                EvalRun.objects.filter(
                    pk=self.eval_run_id,
                    executor_pid=self.executor.pid,
                    executor_host=self.executor.host,
                    status=EvalRunStatus.INTERRUPTED,
                ).update(status=EvalRunStatus.RUNNING, error="", finished=None)
            return
        holder = EvalRun.objects.filter(pk=self.eval_run_id).values("executor_pid", "executor_host").first()
        if holder is None:
            raise StorageError(f"eval run {self.eval_run_id} no longer exists in the database")
        raise StorageError(
            f"eval run {self.eval_run_id} was taken over by PID {holder['executor_pid']} on "
            f"{holder['executor_host']}; this process stops"
        )

    def _notify(self, eval_run_ids: set[str]) -> None:
        """Tell listeners (the live pages' consumers) that results of these runs are committed."""
        for eval_run_id in eval_run_ids:
            for receiver, outcome in results_written.send_robust(sender=DjangoEvalStore, eval_run_id=eval_run_id):
                if isinstance(outcome, Exception):  # a push is an optimisation; the database tail still delivers
                    log.warning(
                        "could not notify live pages of eval run %s (%s)", eval_run_id, receiver, exc_info=outcome
                    )


def _shorten_switch_interval() -> None:
    """Set the thread switch interval to :data:`_SWITCH_S` while a writer thread runs (counted: the
    interval is restored when the last one stops); a shorter interval set by the host is kept."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, _SWITCH_S))
        _switch_users += 1


def _restore_switch_interval() -> None:
    """Undo one :func:`_shorten_switch_interval` (the last one puts the saved interval back)."""
    global _switch_users
    with _switch_lock:
        if _switch_users == 0:
            return
        _switch_users -= 1
        if _switch_users == 0:
            sys.setswitchinterval(_switch_saved)
