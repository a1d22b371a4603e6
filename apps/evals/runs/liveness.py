"""Liveness of running eval runs: who executes a run, its heartbeat, and marking dead runs.

Whatever executes a run (an ``evalsite eval`` process, the portal's task worker) *claims* it
atomically (one UPDATE guarded by the status) and stamps itself on the row (``executor_host``,
``executor_pid``); its result writer then refreshes ``heartbeat_at`` every
``settings.EVALSITE_HEARTBEAT_S`` seconds (2 s by default) and keeps ``in_flight`` (the run ids
whose target is running) committed with its next batch (before each target call on a resume).

:func:`mark_stale_runs` marks a ``running`` run ``interrupted`` when its heartbeat is older than
``settings.EVALSITE_STALE_AFTER_S`` (15 s by default), or at once when its executor is a process
of this host that no longer exists. It is cheap (one query over running runs, at most once a
second per process) and is called by the sweeper (:mod:`apps.evals.worker.sweeper`: ``serve``
and every worker, each second), the task worker and the CLI, never by a page or the API, so a
dead run is shown as such within seconds, wherever its process ran.

Who executes a run, its heartbeat's period and whether a process is alive:
:mod:`apps.evals.results.executor`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.results.executor import (
    Executor,
    current_run_id,
    executor_fields,
    live_executors,
    pid_alive,
    stale_after_s,
)
from evalcore.errors import ConflictError
from evalcore.processes import kill_all

log = logging.getLogger(__name__)

_last_check = 0.0
_CHECK_EVERY_S = 1.0


def executor_label(eval_run: EvalRun) -> str:
    """``PID 123 on host``: the process stamped on ``eval_run`` as executing it; ``""`` when none is."""
    return str(Executor(eval_run.executor_host, eval_run.executor_pid)) if eval_run.executor_pid else ""


class RunBusy(ConflictError):
    """The run is being executed by another live process (its message names PID and host)."""


def describe_holder(eval_run: EvalRun) -> str:
    """``PID 123 on host-a (heartbeat 1.2 s ago)`` for a running run."""
    who = f"PID {eval_run.executor_pid} on {eval_run.executor_host}" if eval_run.executor_pid else "another process"
    if eval_run.heartbeat_at:
        age = (timezone.now() - eval_run.heartbeat_at).total_seconds()
        who += f" (heartbeat {max(age, 0):.1f} s ago)"
    return who


def claim_for_resume(
    eval_run_id: str, *, status: str = EvalRunStatus.RUNNING, executor: Executor | None = None
) -> None:
    """Take an interrupted or failed run for resuming, atomically (one guarded UPDATE).

    Args:
        eval_run_id: The run.
        status: The status it gets (``running`` for a CLI resume, ``queued`` for the worker).
        executor: Stamped on the run (default this process); ``None`` fields for a queued run.

    Raises:
        RunBusy: Another process holds it (``already being resumed by PID ... on HOST``), or it
            is not interrupted / failed.
    """
    mark_stale_runs(force=True)
    fields: dict[str, Any] = {"status": status, "finished": None, "error": ""}
    if status == EvalRunStatus.RUNNING:
        fields.update(executor_fields(executor))
    else:
        fields.update({"executor_host": "", "executor_pid": None, "heartbeat_at": None})
    claimed = EvalRun.objects.filter(
        pk=eval_run_id, status__in=[EvalRunStatus.INTERRUPTED, EvalRunStatus.FAILED]
    ).update(**fields)
    if claimed:
        return
    eval_run = EvalRun.objects.get(pk=eval_run_id)
    raise RunBusy(busy_reason(eval_run) or f"eval run {eval_run.id} could not be claimed")


def busy_reason(eval_run: EvalRun) -> str | None:
    """Why ``eval_run`` cannot be taken for resuming now (``None``: it is interrupted or failed)."""
    if eval_run.status in (EvalRunStatus.INTERRUPTED, EvalRunStatus.FAILED):
        return None
    if eval_run.status == EvalRunStatus.RUNNING:
        return f"eval run {eval_run.id} is already being resumed by {describe_holder(eval_run)}"
    if eval_run.status == EvalRunStatus.QUEUED:
        return f"eval run {eval_run.id} is already queued for the task worker"
    return f"eval run {eval_run.id} is {eval_run.status}; only interrupted or failed runs resume"


def mark_stale_runs(*, force: bool = False) -> int:
    """Mark running runs whose executor is gone as ``interrupted``, with the reason.

    A run is gone when its heartbeat is older than :func:`stale_after_s`, or (fast path) its
    executor is a process of this host that no longer exists; never while its executor is a task
    worker whose own heartbeat is fresh (:func:`is_alive`: a worker of another ``serve``, or
    of another PID namespace sharing the host name). The reason names the process and the cases
    that were in flight. Throttled to once a second per process unless ``force``.

    Returns:
        How many runs were marked.
    """
    global _last_check
    now_mono = time.monotonic()
    if not force and now_mono - _last_check < _CHECK_EVERY_S:
        return 0
    _last_check = now_mono
    now = timezone.now()
    cutoff = now - timedelta(seconds=stale_after_s())
    here = socket.gethostname()
    # a sharded run has no one executor: its shards' leases say who is alive (apps.evals.worker.shards)
    candidates = EvalRun.objects.filter(status=EvalRunStatus.RUNNING, n_shards=0).filter(
        Q(heartbeat_at__lt=cutoff)
        | Q(heartbeat_at__isnull=True, started__lt=cutoff)
        | Q(executor_host=here, executor_pid__isnull=False)
    )
    marked = 0
    live: set[tuple[str, int]] | None = None
    for eval_run in candidates.only("id", "heartbeat_at", "started", "executor_host", "executor_pid", "in_flight"):
        reason = _death_reason(eval_run, cutoff, here)
        if reason is not None and eval_run.executor_pid:
            if live is None:  # a live task worker's runs are its own (another serve, another namespace)
                live = live_executors()
            if (eval_run.executor_host, eval_run.executor_pid) in live:
                continue
        if reason is None:
            continue
        marked += EvalRun.objects.filter(
            pk=eval_run.pk,
            status=EvalRunStatus.RUNNING,
            executor_pid=eval_run.executor_pid,
            heartbeat_at=eval_run.heartbeat_at,
        ).update(status=EvalRunStatus.INTERRUPTED, finished=now, error=reason)
    if marked:
        log.info("marked %d eval run(s) whose process ended as interrupted", marked)
    return marked


def show_apparent_status(runs: Iterable[EvalRun]) -> None:
    """Show dead runs as interrupted without writing: a reader's view of :func:`mark_stale_runs`.

    Each ``running`` run (not sharded) whose executor is gone by the same rules (heartbeat older
    than :func:`stale_after_s`, or a process of this host that no longer exists, never a live
    task worker's run) gets ``status`` ``interrupted`` and the reason as ``error`` *on the
    object only*, as healthchecks computes a check's status from its last ping: a page reads the
    truth even before a sweep (``apps.evals.worker.sweeper``) has written it. At most one query
    (the live workers), and only when a run looks dead.
    """
    now = timezone.now()
    cutoff = now - timedelta(seconds=stale_after_s())
    here = socket.gethostname()
    live: set[tuple[str, int]] | None = None
    for eval_run in runs:
        if eval_run.status != EvalRunStatus.RUNNING or eval_run.n_shards:
            continue
        reason = _death_reason(eval_run, cutoff, here)
        if reason is None:
            continue
        if eval_run.executor_pid:
            if live is None:
                live = live_executors()
            if (eval_run.executor_host, eval_run.executor_pid) in live:
                continue
        eval_run.status = EvalRunStatus.INTERRUPTED
        eval_run.error = reason


def _death_reason(eval_run: EvalRun, cutoff: Any, here: str) -> str | None:
    pid = eval_run.executor_pid
    who = f"PID {pid} on {eval_run.executor_host}" if pid else "its process"
    if eval_run.executor_host == here and pid and pid != os.getpid() and not pid_alive(pid):
        reason = f"interrupted: the process executing it ({who}) ended"
    elif (eval_run.heartbeat_at or eval_run.started) and (eval_run.heartbeat_at or eval_run.started) < cutoff:
        last = eval_run.heartbeat_at or eval_run.started
        reason = (
            f"interrupted: no heartbeat from {who} since {last:%Y-%m-%d %H:%M:%S} UTC (more than {stale_after_s():g} s)"
        )
    else:
        return None
    return _death_reason_text(eval_run.id, eval_run.in_flight or [], reason.removeprefix("interrupted: "))


def _case_label(eval_run_id: str, run_id: str) -> str:
    return run_id.removeprefix(f"{eval_run_id}:")


_real_exit = os._exit


def exit_now(code: int) -> None:
    """End the process at once, *not* counted against a case (e.g. the user's second Ctrl-C).

    ``os._exit`` is guarded while a run executes (see :func:`exit_guard`); Evalsite's own
    deliberate exits go around the guard. The subprocesses the cases started are killed first
    (``os._exit`` skips the run's own cleanup, :mod:`evalcore.processes`).
    """
    kill_all()
    _real_exit(code)


INTERRUPTED_EXIT = 3
"""The status a guarded process ends with when a target calls ``os._exit(0)`` during a run: the
run was interrupted, so the process must not report success (a CI gate would pass)."""

EXIT_RECORD_WAIT_S = 30.0
"""How long a guarded exit waits for the run's row to be updated (a locked SQLite file) before
the process ends anyway."""


@contextmanager
def os_exit_guarded(before_exit: Callable[[int, str | None], None]) -> Iterator[None]:
    """The one guard around ``os._exit``: while inside, a call to it first lets the run record why.

    ``os._exit`` skips every cleanup, so without it a run would only be found dead by its
    heartbeat. A guarded call:

    1. reads the case that called it (:data:`current_run_id`, on the calling thread);
    2. runs ``before_exit(code, caller)`` on a thread of its own, waiting at most
       :data:`EXIT_RECORD_WAIT_S` (the caller may be an event loop's thread, where Django refuses
       database calls: an async target calling ``os._exit``); nothing it raises, and no wait past
       that, keeps the process from ending;
    3. kills the subprocesses the cases started (:mod:`evalcore.processes`) and ends the process
       with the target's status, or :data:`INTERRUPTED_EXIT` for a status of 0 (the run was
       interrupted: the process must not report success, a CI gate would pass).

    Evalsite's own deliberate exits go around the guard (:func:`exit_now`). The previous
    ``os._exit`` is put back on leaving.
    """
    previous = os._exit

    def record(code: int, caller: str | None) -> None:  # pragma: no cover - the process ends after it
        try:
            before_exit(code, caller)
        except BaseException:  # logged: the process ends anyway
            log.exception("could not record os._exit(%s) of %s", code, caller)

    def guarded_exit(code: int) -> None:  # pragma: no cover - the process ends here
        status = code if code else INTERRUPTED_EXIT
        try:
            caller = current_run_id.get()
            recorder = threading.Thread(target=record, args=(code, caller), name="evalsite-exit-record")
            recorder.start()
            recorder.join(EXIT_RECORD_WAIT_S)
        except BaseException:  # noqa: BLE001 - nothing may keep the process from ending
            pass
        finally:
            kill_all()
            _real_exit(status)

    os._exit = guarded_exit  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = previous


@contextmanager
def exit_guard(
    eval_run_id: str,
    announce: Callable[[str], None] | None = None,
    store: Any = None,
) -> Iterator[None]:
    """While a run executes, a target calling ``os._exit`` first records that it did (through
    :func:`os_exit_guarded`).

    The guard marks the run interrupted and counts the exit against the case whose target called
    it (``crash_suspects``, via :data:`current_run_id`) before the process ends, so the next resume
    errors that case instead of running it (and dying) again. Segfaults cannot be caught: the
    cases in flight then run again one at a time, and one that crashes alone twice is errored.

    ``announce`` (e.g. the CLI's line on stderr) is called with the reason recorded on the run
    (``"interrupted: the process called os._exit(3); case(s) in flight: ..."``) just before the
    process ends, so the person who started it is told why it stopped.

    With the run's result writer (``store``, a ``DjangoEvalStore``) the cases that finished are
    committed first (``flush``; they may still wait in its batch), and the cases in flight as the
    process knows them (``in_flight_now``: marks not yet committed included) are recorded.
    """

    def record(code: int, caller: str | None) -> None:  # pragma: no cover - the process ends after it
        in_flight = None
        if store is not None:
            try:
                store.flush()
            except Exception:  # the writer failed: what it stored is kept; the exit is recorded anyway
                log.warning("could not commit the finished cases before os._exit", exc_info=True)
            in_flight = store.in_flight_now()
        said = record_self_exit(eval_run_id, code, caller, in_flight=in_flight)
        if announce is not None and said:
            announce(said)

    with os_exit_guarded(record):
        yield


def record_self_exit(
    eval_run_id: str, code: int, caller: str | None = None, *, in_flight: list[str] | None = None
) -> str | None:
    """Count a process exit against the case that called it (see :func:`exit_guard`).

    Args:
        eval_run_id: The run being executed.
        code: The exit code (named in the run's error).
        caller: The run id of the case whose target called ``os._exit``, when known.
        in_flight: The run ids in flight as the process knows them (its marks may not all be
            committed yet); recorded on the run with ``caller`` (default: the committed marks).

    Returns:
        The reason recorded on the run, or ``None`` when nothing could be recorded.
    """
    from django.db import transaction

    try:
        with transaction.atomic():
            row = EvalRun.objects.filter(pk=eval_run_id).values("in_flight", "crash_suspects").first()
            if not row:
                return None
            counts = dict(row["crash_suspects"] or {})
            if in_flight is None:
                in_flight = [rid for rid in row["in_flight"] or [] if isinstance(rid, str)]
            if caller is not None and caller not in in_flight:
                in_flight = [caller, *in_flight]
            if caller is not None:  # the case that called os._exit: errored on the next resume
                counts[caller] = counts.get(caller, 0) + 2
            elif len(in_flight) == 1:  # called from elsewhere, but one case ran: that one
                counts[in_flight[0]] = counts.get(in_flight[0], 0) + 1
            what = f"the process called os._exit({code})"
            if caller is not None:
                what = f"the target of case {_case_label(eval_run_id, caller)} called os._exit({code})"
            reason = _death_reason_text(eval_run_id, in_flight, what)
            EvalRun.objects.filter(pk=eval_run_id).update(
                in_flight=in_flight,
                crash_suspects=counts,
                status=EvalRunStatus.INTERRUPTED,
                finished=timezone.now(),
                error=reason,
            )
        return reason
    except Exception:
        log.exception("could not record os._exit on eval run %s", eval_run_id)
        return None


def _death_reason_text(eval_run_id: str, in_flight: list[str], what: str) -> str:
    reason = f"interrupted: {what}"
    if in_flight:
        cases = ", ".join(_case_label(eval_run_id, rid) for rid in in_flight[:10])
        more = f" and {len(in_flight) - 10} more" if len(in_flight) > 10 else ""
        reason += f"; case(s) in flight: {cases}{more}"
    return reason
