"""The task workers' own rows (``apps.evals.worker.heartbeats``)."""

from __future__ import annotations

from django.db import models


class TaskWorker(models.Model):
    """A task worker process (``evalsite worker``) and its own heartbeat (``apps.evals.worker.heartbeats``).

    The worker writes its row when it starts, refreshes ``heartbeat_at`` every
    ``EVALSITE_HEARTBEAT_S`` seconds from a thread of its own (busy or idle), and sets ``stopped``
    with ``exit_reason`` when it ends (or its supervisor does, when it died). ``id`` is the worker
    id it gives the queue (``DBTaskResult.worker_ids``), so a task names the worker that took it.
    ``namespace`` identifies the host's boot and PID namespace: a PID is checked only by a process
    of the same one (two containers may share a host name). ``supervisor_pid`` is the ``serve``
    that started it (none for a worker started by hand) and ``restarts`` how many workers that
    ``serve`` had restarted before this one.
    """

    id = models.CharField(primary_key=True, max_length=64)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    namespace = models.CharField(max_length=100, blank=True, default="")
    backend = models.CharField(max_length=32, default="default")
    queues = models.CharField(max_length=200, blank=True, default="")
    started = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    stopped = models.DateTimeField(null=True, blank=True)
    exit_reason = models.CharField(max_length=300, blank=True, default="")
    supervisor_pid = models.IntegerField(null=True, blank=True)
    restarts = models.IntegerField(default=0)

    class Meta:
        ordering = ["-started"]
        indexes = [models.Index(fields=["stopped", "heartbeat_at"], name="taskworker_live")]

    def __str__(self) -> str:
        return f"worker PID {self.pid} on {self.host}"
