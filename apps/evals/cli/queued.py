"""``evalsite eval --executor queue``: the run is sharded and executed by the queue's workers;
this process only enqueues, follows its progress in the database, and reports.

The workers are ``evalsite queue_worker`` processes (``EVALSITE_QUEUE=rq``) or the database task
worker (``evalsite worker``, the embedded default). Ctrl-C cancels the run (the shards not
done are dropped, the finished cases kept; ``--resume`` queues the rest again).
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time

from django.core.management.base import CommandError
from django.db import connection
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from apps.evals.cli.console import UsageError, run_resume_command
from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.results.executor import live_executors
from apps.evals.results.readback import report_from_db
from apps.evals.runs.config import read_run_config
from apps.evals.runs.execution import EvalRunOutcome
from apps.evals.worker.queue import enqueue_shard, queue_backend, reap, start_sharded_run
from apps.evals.worker.shards import cancel_run, finish_run_if_done, lease_s, reopen_shards
from evalcore.interrupts import stop_on_ctrl_c, stopping_signal

POLL_S = 0.2
"""Seconds between reads of the run's progress."""

NO_WORKER_HINT_S = 10.0
"""A run still queued (no shard taken by any worker) this many seconds after its shards were
enqueued gets one line on stderr saying how many workers are alive and how to start one."""


def run_on_queue(eval_run: EvalRun, console: Console, *, quiet: bool, resume: bool) -> EvalRunOutcome:
    """Shard and enqueue the run (or, resuming, its unfinished shards), wait for its end.

    The first Ctrl-C (under :func:`evalcore.interrupts.two_stage_ctrl_c`) cancels the run
    whenever it comes, also while the shards are still being enqueued: it is a flag this function
    acts on once the enqueueing is complete, never an exception cutting it short.

    Returns:
        The run and its report, rebuilt from the database.

    Raises:
        KeyboardInterrupt: Ctrl-C (the run is cancelled first), or the run was cancelled
            elsewhere.
        CommandError: The run failed (its error is the message).
    """
    stop = threading.Event()
    with stop_on_ctrl_c(stop.set):
        try:
            try:
                _enqueue(eval_run, console, quiet=quiet, resume=resume)
            except _unreachable_queue_errors() as exc:  # Redis down: say so, leave no run queued
                cancel_run(eval_run, by="the CLI: its shards could not be enqueued")
                command = run_resume_command(eval_run)
                raise UsageError(
                    f"could not enqueue the shards of eval run {eval_run.id} on the {queue_backend()} queue: "
                    f"{type(exc).__name__}: {str(exc).rstrip('. ')}. The run is interrupted; once the queue "
                    f"is reachable, this queues it again: {command}"
                ) from None
            _wait(eval_run, console, quiet=quiet, stop=stop)
        except KeyboardInterrupt:  # a Ctrl-C outside two_stage_ctrl_c: cut short wherever it was
            stop.set()
            connection.close()  # the signal may have cut a query short: cancel on a fresh connection
        if stop.is_set():
            cancel_run(eval_run, by=("SIGTERM" if stopping_signal() == signal.SIGTERM else "Ctrl-C") + " in the CLI")
            eval_run.refresh_from_db()
            raise KeyboardInterrupt(eval_run.error)
    if eval_run.status == EvalRunStatus.INTERRUPTED:
        raise KeyboardInterrupt(eval_run.error)
    if eval_run.status == EvalRunStatus.FAILED:
        raise CommandError(f"eval run {eval_run.id} failed: {eval_run.error}")
    report = report_from_db(eval_run.id)
    if eval_run.started and eval_run.finished:  # the workers' time: first claim to the last shard done
        report.elapsed_s = max(0.0, (eval_run.finished - eval_run.started).total_seconds())
    return EvalRunOutcome(eval_run, report)


def _unreachable_queue_errors() -> tuple[type[BaseException], ...]:
    """The errors of a queue that cannot be reached: Redis's (and the socket's) on RQ; none on
    the database task queue (its errors are the database's, reported as such)."""
    if queue_backend() != "rq":
        return ()
    from redis.exceptions import RedisError

    return (RedisError, OSError)


def _enqueue(eval_run: EvalRun, console: Console, *, quiet: bool, resume: bool) -> None:
    """Shard and enqueue a new run, or queue a resumed one's unfinished shards again."""
    if resume:
        EvalRun.objects.filter(pk=eval_run.pk).update(
            status=EvalRunStatus.QUEUED, executor_host="", executor_pid=None, heartbeat_at=None
        )
        pairs = reopen_shards(eval_run)
        folder = read_run_config(eval_run.config).agents_dir
        jobs = [enqueue_shard(pk, token, agents_dir=folder) for pk, token in pairs]
        if not pairs:
            finish_run_if_done(eval_run.id)
    else:
        jobs = start_sharded_run(eval_run, read_run_config(eval_run.config).shard_size)
    eval_run.refresh_from_db()
    if not quiet:
        console.print(f"  {eval_run.n_total} case(s) in {eval_run.n_shards} shard(s); {len(jobs)} queued")


def live_worker_count() -> tuple[int | None, str]:
    """How many workers of this queue are alive (RQ's queue workers, or the database task
    workers), and a note when that cannot be read (``None``, e.g. Redis is down)."""
    if queue_backend() == "rq":
        from apps.evals.worker.rq import alive_queue_workers

        return alive_queue_workers()
    return len(live_executors()), ""


def worker_command() -> str:
    """The command that starts a worker for this database and queue, as the user must type it:
    with ``--db`` when the database is a SQLite file named by ``--db`` / ``EVALSITE_DB`` (a
    worker started without it would serve the default database)."""
    if queue_backend() == "rq":
        return (
            "`evalsite queue_worker` on any host that reaches the database and Redis "
            "(with DATABASE_URL and EVALSITE_REDIS_URL)"
        )
    db = os.environ.get("EVALSITE_DB")
    if os.environ.get("DATABASE_URL"):
        return "`evalsite worker` (with this DATABASE_URL), or `evalsite serve`, which runs one"
    if db:
        words = shlex.join(["evalsite", "worker", "--db", db])
        return f"`{words}`, or `evalsite serve --db {shlex.quote(db)}`, which runs one"
    return "`evalsite worker` (or `evalsite serve`, which runs one)"


def no_worker_hint(
    eval_run_id: str, status: str = EvalRunStatus.QUEUED, workers: tuple[int | None, str] | None = None
) -> str:
    """The line for a run no worker has taken (``queued``) or no live worker runs (``running``,
    its worker gone) after :data:`NO_WORKER_HINT_S`: how many workers are alive on this queue
    (busy ones: the run waits its turn) and, when none is, the command that starts one.
    ``workers``: :func:`live_worker_count`'s answer, when the caller has it already."""
    if status == EvalRunStatus.QUEUED:
        waited = f"no worker has taken a shard of eval run {eval_run_id} in {NO_WORKER_HINT_S:.0f} s"
    else:
        waited = f"eval run {eval_run_id} is waiting for its shards to be delivered again"
    alive, note = workers if workers is not None else live_worker_count()
    if alive is None:
        return f"evalsite: {waited}; {note}. It keeps waiting (Ctrl-C cancels the run)."
    if alive:
        return (
            f"evalsite: {waited}; {alive} worker(s) alive, busy with earlier work: the run waits its turn "
            "(see /status/). Ctrl-C cancels it."
        )
    return (
        f"evalsite: {waited}: no worker is running. Start one: {worker_command()}. "
        "It keeps waiting (Ctrl-C cancels the run)."
    )


def _wait(eval_run: EvalRun, console: Console, *, quiet: bool, stop: threading.Event) -> None:
    """Poll the run (its status and count: one small query every :data:`POLL_S`; lapsed leases
    every lease / 3) until it is no longer queued or running, or ``stop`` is set, showing its
    progress."""
    live = not quiet and (console.is_terminal or sys.stdout.isatty())
    columns = [TextColumn("[bold]queue"), BarColumn(bar_width=16), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=True, disable=not live) as progress:
        task = progress.add_task("queue", total=eval_run.n_total)
        rows = EvalRun.objects.filter(pk=eval_run.pk)
        reap_every = max(POLL_S, lease_s() / 3)  # the workers reap too; this covers none running
        next_reap = 0.0
        hint_at = time.monotonic() + NO_WORKER_HINT_S
        hinted = False
        while not stop.is_set():
            if time.monotonic() >= next_reap:
                reap()
                next_reap = time.monotonic() + reap_every
            status, n_done = rows.values_list("status", "n_done").get()
            progress.update(task, completed=n_done)
            if status not in (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING):
                break
            if time.monotonic() >= hint_at:
                hint_at = time.monotonic() + NO_WORKER_HINT_S
                workers = live_worker_count()
                alive = workers[0]
                # queued this long (no worker, or busy ones), or running with no live worker (its
                # worker died): said once on stderr, also with --quiet, since someone must act;
                # once a worker runs it again, a later loss gets a line of its own
                stuck = status == EvalRunStatus.QUEUED or alive == 0
                if stuck and not hinted:
                    sys.stderr.write(no_worker_hint(eval_run.id, status, workers) + "\n")
                    sys.stderr.flush()
                hinted = stuck
            stop.wait(POLL_S)
    eval_run.refresh_from_db()
    if not quiet and not live:
        console.print(f"  {eval_run.n_done}/{eval_run.n_total} cases")
