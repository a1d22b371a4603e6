"""Online scoring off the request path, on the same task queue as runs.

The OTLP endpoint's commit sends ``traces_ingested`` (``apps.traces.signals``); the receiver
calls :func:`enqueue_traces`, which enqueues the run ids on the queue runs use: :func:`score_traces_job`
on RQ (``EVALSITE_QUEUE=rq``, ``evalsite queue_worker``), else :func:`score_traces_task` for the task
worker (``evalsite serve`` / ``db_worker``, the embedded default). The job matches them to the rules,
scores the sampled ones, then tests the alerts and delivers their webhooks. With an immediate
tasks backend (tests, ``EVALSITE_TASKS_BACKEND``) the task runs at once in the sender's process.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import close_old_connections, connections
from django.tasks import task

from apps.evals.worker.queue import ONLINE_JOB, queue_backend, rq_queue
from apps.online.alerting import deliver_pending, evaluate_alerts
from apps.online.models import ScoringRule
from apps.online.services import backfill, match_traces, score_pending

log = logging.getLogger(__name__)


def online_pass() -> dict[str, Any]:
    """One worker pass: score every pending row due, test the alerts, deliver their webhooks.

    Returns:
        ``{"scored", "errored", "pending", "fired", "delivered"}`` counts.
    """
    scored = score_pending()
    fired = evaluate_alerts()
    delivered = deliver_pending()
    return {
        "scored": scored.scored,
        "errored": scored.errored,
        "pending": scored.pending,
        "fired": fired,
        "delivered": delivered,
    }


def score_traces(run_ids: list[str]) -> dict[str, Any]:
    """Match new traces to the active rules, then run :func:`online_pass`."""
    matched = match_traces(run_ids)
    return {"matched": matched.matched, "sampled": matched.sampled, **online_pass()}


@task()
def score_traces_task(run_ids: list[str]) -> dict[str, Any]:
    """The tasks-framework job (the embedded default): :func:`score_traces`."""
    return score_traces(run_ids)


def score_traces_job(run_ids: list[str]) -> dict[str, Any]:
    """The RQ job (``EVALSITE_QUEUE=rq``; ``ONLINE_JOB`` of ``apps.evals.worker.queue``), on
    connections of its own as a shard job is: :func:`score_traces`."""
    close_old_connections()
    try:
        return score_traces(run_ids)
    finally:
        connections.close_all()


@task()
def backfill_task(rule_id: int, start: str, end: str) -> dict[str, Any]:
    """Apply rule ``rule_id`` to the traces that started in ``[start, end)`` (ISO times), then
    run :func:`online_pass`."""
    rule = ScoringRule.objects.get(pk=rule_id)
    matched = backfill(rule, start=datetime.fromisoformat(start), end=datetime.fromisoformat(end))
    return {"matched": matched.matched, "sampled": matched.sampled, **online_pass()}


def enqueue_traces(run_ids: list[str]) -> None:
    """Hand new traces to the worker (nothing when no rule is active: no task per request then).

    A queue that refuses the task is logged, not raised: the traces are stored, and a backfill
    over their time applies the rules later.
    """
    if not run_ids or not ScoringRule.objects.filter(active=True).exists():
        return
    try:
        if queue_backend() == "rq":
            rq_queue().enqueue(ONLINE_JOB, list(run_ids), job_timeout=-1, result_ttl=3600, failure_ttl=86400)
        else:
            score_traces_task.enqueue(list(run_ids))
    except Exception:  # the OTLP sender's answer must not depend on the scoring queue
        log.exception("online scoring: %d traces not enqueued (backfill their time to score them)", len(run_ids))


def enqueue_backfill(rule: ScoringRule, *, start: datetime, end: datetime) -> str:
    """Enqueue a backfill of ``rule`` over ``[start, end)``; returns the task id."""
    return str(backfill_task.enqueue(rule.pk, start.isoformat(), end.isoformat()).id)
