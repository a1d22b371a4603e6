"""The shards of sharded eval runs (``apps.evals.worker.shards``); registered with the app through
``apps.evals.models``, which imports them (a module of its own: ``models.py`` stays short)."""

from __future__ import annotations

from django.db import models


class ShardStatus(models.TextChoices):
    """Where a shard is: ``queued`` -> ``running`` (leased by a worker) -> ``done``;
    ``cancelled`` when its run was cancelled before it finished."""

    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    CANCELLED = "cancelled", "cancelled"


class EvalShard(models.Model):
    """A slice of a sharded eval run's cases, executed by one queue worker at a time.

    ``token`` names the current delivery: a worker claims the shard with it (a stale or
    duplicate delivery finds another token and does nothing), and keeps ``lease_until`` in the
    future while it runs; a shard whose lease lapsed is delivered again with a new token. The
    worker commits ``in_flight`` (run ids whose target is running) before each target call, and
    ``crash_suspects`` counts the deaths each case was in flight at (see ``apps.evals.worker.shards``).
    """

    eval_run = models.ForeignKey("evals.EvalRun", on_delete=models.CASCADE, related_name="shards")
    index = models.IntegerField()
    case_ids = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=ShardStatus.choices, default=ShardStatus.QUEUED)
    token = models.CharField(max_length=32, blank=True, default="")
    attempts = models.IntegerField(default=0)
    worker = models.CharField(max_length=300, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    in_flight = models.JSONField(default=list, blank=True)
    crash_suspects = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["eval_run", "index"]
        constraints = [models.UniqueConstraint(fields=["eval_run", "index"], name="evalshard_unique_index")]
        indexes = [models.Index(fields=["status", "lease_until"], name="evalshard_status_lease")]

    def __str__(self) -> str:
        return f"{self.eval_run_id}#{self.index}"
