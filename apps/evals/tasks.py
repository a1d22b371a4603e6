"""Runs started from the browser or the API, executed by the task worker (``db_worker``).

The API creates the ``EvalRun`` row (status ``queued``, ``config["executor"] = "task"``) and
enqueues :func:`run_eval_task` with its id; the worker process loads the target from the agents
folder recorded on the run and executes it through ``services.execute_eval_run``. Progress
reaches browsers through the database (the websocket consumer tails it), so no Redis is needed.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.tasks import task

from apps.evals import services
from apps.evals.models import EvalRun, EvalRunStatus

log = logging.getLogger(__name__)

EXECUTOR = "task"
"""``EvalRun.config["executor"]`` of runs executed by the task worker."""


@task()
def run_eval_task(eval_run_id: str) -> dict[str, Any]:
    """Execute a queued eval run to the end.

    A run that is no longer ``queued`` (already executed, or marked interrupted after its worker
    died) is left alone, so a task delivered twice never runs the cases twice.

    Returns:
        ``{"eval_run_id", "status", "n_done", "n_passed"}`` (stored as the task's result).

    Raises:
        EvalRun.DoesNotExist: The run was deleted before the worker got to it.
        LookupError: The target is no longer declared in the run's agents folder (the run is
            marked ``failed`` with the message first).
    """
    with transaction.atomic():
        claimed = EvalRun.objects.filter(pk=eval_run_id, status=EvalRunStatus.QUEUED).update(
            status=EvalRunStatus.RUNNING
        )
    eval_run = EvalRun.objects.select_related("eval_set").get(pk=eval_run_id)
    if not claimed:
        log.warning("eval run %s is %s, not queued: not running it again", eval_run_id, eval_run.status)
        return _outcome(eval_run)
    try:
        spec = services.load_target(eval_run.target_id, eval_run.config.get("agents_dir") or None)
    except (LookupError, FileNotFoundError) as exc:
        EvalRun.objects.filter(pk=eval_run_id).update(status=EvalRunStatus.FAILED, error=str(exc))
        raise
    try:
        outcome = services.execute_eval_run(eval_run, spec)
    except (SystemExit, KeyboardInterrupt):
        # The worker was told to stop now (second signal): the finished cases are stored and
        # the run can be told apart from one that failed on its own.
        EvalRun.objects.filter(pk=eval_run_id).update(
            status=EvalRunStatus.INTERRUPTED, error="interrupted: the task worker was stopped"
        )
        raise
    return _outcome(outcome.eval_run)


def enqueue_eval_run(eval_run: EvalRun) -> str:
    """Enqueue a prepared (committed) run for the worker and return the task id.

    The task id is stored on the run (``config["task_id"]``) so a dead worker's run can be
    found and its task closed.
    """
    result = run_eval_task.enqueue(eval_run.id)
    task_id = str(result.id)
    config = {**eval_run.config, "executor": EXECUTOR, "task_id": task_id}
    EvalRun.objects.filter(pk=eval_run.pk).update(config=config)
    eval_run.config = config
    return task_id


def mark_orphaned_runs() -> int:
    """Mark task-executed runs left ``running`` by a dead worker as ``interrupted``.

    Call it when starting the (only) worker, before it takes tasks: at that moment no task run
    can legitimately be running. CLI runs (another executor) are never touched. The stuck task
    row is closed as failed too, so the queue does not show it running forever.

    Returns:
        How many eval runs were marked interrupted.
    """
    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult

    from apps.evals.services import mark_dead_cli_runs

    mark_dead_cli_runs()
    orphans = list(EvalRun.objects.filter(status=EvalRunStatus.RUNNING, config__executor=EXECUTOR))
    for eval_run in orphans:
        EvalRun.objects.filter(pk=eval_run.pk, status=EvalRunStatus.RUNNING).update(
            status=EvalRunStatus.INTERRUPTED,
            finished=timezone.now(),
            error="interrupted: the task worker stopped before the run finished",
        )
        task_id = eval_run.config.get("task_id")
        if task_id:
            for row in DBTaskResult.objects.filter(id=task_id).running():
                row.set_failed(RuntimeError("the worker running this task stopped"))
    return len(orphans)


def _outcome(eval_run: EvalRun) -> dict[str, Any]:
    return {
        "eval_run_id": eval_run.id,
        "status": eval_run.status,
        "n_done": eval_run.n_done,
        "n_passed": eval_run.n_passed,
    }
