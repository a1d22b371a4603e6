"""Runs started from the browser or the API, executed by the task worker (``db_worker``).

The API creates the ``EvalRun`` row (status ``queued``, ``config["executor"] = "task"``) and
enqueues :func:`run_eval_task` with its id; the worker process loads the target from the agents
folder recorded on the run and executes it through ``execution.execute_eval_run``. Progress
reaches browsers through the database (the websocket consumer tails it), so no Redis is needed.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from django.db import transaction
from django.tasks import task

from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.results.executor import executor_fields
from apps.evals.runs.config import read_run_config
from apps.evals.runs.earlystop import EarlyStopError, early_stop_k
from apps.evals.runs.execution import execute_eval_run
from apps.evals.runs.liveness import mark_stale_runs
from apps.evals.runs.plan import load_run_target
from apps.evals.runs.resume import claim_queued_resume
from apps.evals.worker.heartbeats import close_orphaned_tasks, stop_reason
from apps.evals.worker.queue import resume_sharded, sharded_runs, start_sharded_run
from apps.evals.worker.sweeper import index_run
from evalcore.errors import EvalsiteError

log = logging.getLogger(__name__)

EXECUTOR: Final = "task"
"""``RunConfig.executor`` of runs executed by the task worker."""


@task()
def run_eval_task(eval_run_id: str, resume: bool = False) -> dict[str, Any]:
    """Execute a queued eval run to the end (``resume``: only its cases without a result).

    A run that is no longer ``queued`` (already executed, or marked interrupted after its worker
    died) is left alone, so a task delivered twice never runs the cases twice. The claim stamps
    this worker process on the run, whose heartbeat then shows it alive (``apps.evals.runs.liveness``).

    Returns:
        ``{"eval_run_id", "status", "n_done", "n_passed"}`` (stored as the task's result).

    Raises:
        EvalRun.DoesNotExist: The run was deleted before the worker got to it.
        LookupError: The target is no longer declared in the run's agents folder (the run is
            marked ``failed`` with the message first).
    """
    mark_stale_runs()  # the worker's turn to notice runs whose process died
    with transaction.atomic():
        claimed = EvalRun.objects.filter(pk=eval_run_id, status=EvalRunStatus.QUEUED).update(
            status=EvalRunStatus.RUNNING, **executor_fields()
        )
    eval_run = EvalRun.objects.select_related("eval_set").get(pk=eval_run_id)
    if not claimed:
        log.warning("eval run %s is %s, not queued: not running it again", eval_run_id, eval_run.status)
        return _outcome(eval_run)
    try:
        spec = load_run_target(eval_run)
    except (LookupError, FileNotFoundError) as exc:
        EvalRun.objects.filter(pk=eval_run_id).update(status=EvalRunStatus.FAILED, error=str(exc))
        raise
    try:
        outcome = execute_eval_run(eval_run, spec, resume=resume)
    except EarlyStopError:
        # stopped early (the target cannot take the set's input): the run is marked failed
        # with the sentence saying so; the task itself did its job
        eval_run.refresh_from_db()
        return _outcome(eval_run)
    except (SystemExit, KeyboardInterrupt):
        # The worker was told to stop now (second signal): the finished cases are stored and
        # the run can be told apart from one that failed on its own.
        why = stop_reason() or "the task worker was stopped"
        EvalRun.objects.filter(pk=eval_run_id).update(status=EvalRunStatus.INTERRUPTED, error=f"interrupted: {why}")
        raise
    index_run(eval_run_id)  # off the request path: the run page's search finds its words at once
    return _outcome(outcome.eval_run)


def resume_in_worker(eval_run: EvalRun) -> str:
    """Queue the remaining cases of an interrupted or failed run for the task worker.

    Works for runs started anywhere (CLI, portal, another host): the target is loaded from the
    agents folder recorded on the run (``config["agents_dir"]``).

    Returns:
        The task id.

    Raises:
        RunBusy: Another process holds the run, or it is not interrupted / failed.
        ResumeRefused: The run cannot be resumed here (judge options, changed set, target gone).
    """
    # a run the page showed interrupted may not be marked yet (no sweep since its process died)
    if eval_run.status == EvalRunStatus.RUNNING and mark_stale_runs(force=True):
        eval_run.refresh_from_db()
    if eval_run.n_shards:  # a sharded run: its unfinished shards go back to the queue
        return ",".join(resume_sharded(eval_run)[:1]) or eval_run.id
    claim_queued_resume(eval_run)
    result = run_eval_task.enqueue(eval_run.id, resume=True)
    task_id = str(result.id)
    config = read_run_config(eval_run.config).updated(executor=EXECUTOR, task_id=task_id)
    EvalRun.objects.filter(pk=eval_run.pk).update(config=config.stored())
    eval_run.refresh_from_db()
    return task_id


class QueueUnavailable(EvalsiteError):
    """The run queue (Redis, with ``EVALSITE_QUEUE=rq``) could not take a new run: the run was
    deleted again, so nothing was started (HTTP 503; a client may simply try again)."""


def enqueue_eval_run(eval_run: EvalRun) -> str:
    """Enqueue a prepared (committed) run for the worker and return the task id.

    The task id is stored on the run (``config["task_id"]``) so a dead worker's run can be
    found and its task closed. With ``EVALSITE_SHARDED_RUNS`` the run is split into shards
    instead (``apps.evals.worker.queue``) and the first shard's job id is returned.

    Raises:
        QueueUnavailable: Redis is unreachable. The run and its shards are deleted first (jobs
            enqueued before the failure then deliver shards that no longer exist, which a worker
            skips), so an answer saying so means nothing was created: no run starts later by
            itself, and a client that retries gets one run, not two.
    """
    try:
        return _enqueue_eval_run(eval_run)
    except Exception as exc:
        if not _queue_outage(exc):
            raise
        EvalRun.objects.filter(pk=eval_run.pk).delete()
        log.warning("eval run %s not started: the run queue is unreachable (%s)", eval_run.pk, exc)
        raise QueueUnavailable(
            "the run queue (Redis, EVALSITE_REDIS_URL) is unreachable: the run was not started and nothing "
            "was created; try again once Redis is back (evalsite queue_worker processes wait for it)"
        ) from None


def _queue_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the queue's Redis is unreachable (or refused the command)."""
    try:
        from redis.exceptions import RedisError
    except ImportError:  # no Redis client installed: not an RQ setup
        return False
    return isinstance(exc, RedisError)


def _enqueue_eval_run(eval_run: EvalRun) -> str:
    if sharded_runs():
        # the portal's early-stop default (on: the first K cases all erroring one way stop the
        # run) travels with the run; the shards' writers apply it across shards
        config = read_run_config(eval_run.config)
        config = config.updated(early_stop=early_stop_k(config.updated(executor=EXECUTOR)))
        EvalRun.objects.filter(pk=eval_run.pk).update(config=config.stored())
        eval_run.config = config.stored()
        return start_sharded_run(eval_run)[0]
    result = run_eval_task.enqueue(eval_run.id)
    task_id = str(result.id)
    config = read_run_config(eval_run.config).updated(executor=EXECUTOR, task_id=task_id)
    EvalRun.objects.filter(pk=eval_run.pk).update(config=config.stored())
    eval_run.config = config.stored()
    return task_id


def mark_orphaned_runs() -> int:
    """Mark runs whose executing process died as ``interrupted`` and close their tasks.

    Runs are found by their heartbeat (``liveness.mark_stale_runs``: a dead worker of this host
    at once, any other executor once its heartbeat is stale; never a run of a live worker, see
    ``workers.live_executors``); a task row still ``running`` whose worker is gone is closed as
    failed (``workers.close_orphaned_tasks``), so the queue does not show it running forever.
    Called by ``serve`` before it starts the worker and whenever the worker has to be restarted.

    Returns:
        How many eval runs were marked interrupted.
    """
    marked = mark_stale_runs(force=True)
    close_orphaned_tasks()
    return marked


def _outcome(eval_run: EvalRun) -> dict[str, Any]:
    return {
        "eval_run_id": eval_run.id,
        "status": eval_run.status,
        "n_done": eval_run.n_done,
        "n_passed": eval_run.n_passed,
    }
