"""Runs (one summary row per execution of a target) and their append-only trace events.

Like healthchecks' ``Check``/``Ping``: the ``Run`` row is a summary kept up to date from its
``Event`` log, and events carry a per-run sequence number.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.traces.fields import (
    OutputJSONField,
    PayloadJSONField,
    RedactedCharField,
    RedactedJSONField,
    StorableCharField,
)


class RunStatus(models.TextChoices):
    RUNNING = "running", "running"
    OK = "ok", "ok"
    ERROR = "error", "error"
    TIMEOUT = "timeout", "timeout"


class Run(models.Model):
    """One execution of a target on one input (an eval case, or a playground turn)."""

    run_id = models.CharField(max_length=512, unique=True)
    trace_id = models.CharField(max_length=512, db_index=True)
    target_id = models.CharField(max_length=200, blank=True, default="")
    started = models.DateTimeField()
    elapsed_ms = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    finish_reason = RedactedCharField(max_length=64, blank=True, default="")
    final_answer = OutputJSONField(null=True, blank=True)  # as the target produced it: never redacted
    model = RedactedCharField(max_length=200, blank=True, default="")
    tokens_in = models.IntegerField(null=True, blank=True)
    tokens_out = models.IntegerField(null=True, blank=True)
    step_metrics = models.JSONField(default=dict, blank=True)
    metadata = RedactedJSONField(default=dict, blank=True)
    error = RedactedJSONField(null=True, blank=True)
    # who may read it (see apps.traces.access): a playground turn is private to its owner
    private = models.BooleanField(default=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-started"]
        indexes = [
            # the trace list filtered by target, newest first
            models.Index(fields=["target_id", "-started"], name="run_target_started"),
        ]

    def __str__(self) -> str:
        return self.run_id


class Event(models.Model):
    """One append-only trace event. ``payload`` may be large: list queries defer it."""

    # no index of its own: the unique (run, seq) constraint's index serves lookups by run (one
    # index less to update for every event written)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    trace_id = models.CharField(max_length=512)
    seq = models.IntegerField()
    ts = models.DateTimeField()
    type = models.CharField(max_length=32)
    name = RedactedCharField(max_length=300, blank=True, default="")
    payload = PayloadJSONField(default=dict, blank=True)  # only its "error" is redacted
    preview = StorableCharField(max_length=300, blank=True, default="")  # cut from the stored payload
    payload_bytes = models.IntegerField(default=0)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="event_unique_run_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type} {self.name}"
