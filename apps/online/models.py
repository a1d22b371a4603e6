"""Scoring rules, their per-trace scores, alerts and alert firings.

One :class:`OnlineScore` row per (rule, trace the rule matched): sampled or not, and where a
sampled trace's scoring stands (``pending`` with a reason, ``scored`` or ``errored`` with a
reason). Coverage is counted from these rows, so the counts of a window always add up:
matched = not sampled + pending + scored + errored.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.evals.models import EvalSet
from apps.traces.models import Run


class ScoringRule(models.Model):
    """Which ingested traces (filters, a sample rate) get which scorer specs."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True, default="")
    active = models.BooleanField(default=True)
    # filters: an empty one matches every trace
    service = models.CharField(max_length=200, blank=True, default="", help_text="the trace's service.name")
    target = models.CharField(max_length=200, blank=True, default="", help_text="the trace's target id")
    model = models.CharField(max_length=200, blank=True, default="", help_text="the trace's model (exact)")
    attributes = models.JSONField(
        default=dict,
        blank=True,
        help_text='span attributes every match carries, e.g. {"deployment.environment": "prod"}',
    )
    tags = models.JSONField(default=list, blank=True, help_text="tags every match carries (all of them)")
    sample_rate = models.FloatField(default=1.0, help_text="share of matched traces scored, 0..1 (by trace id hash)")
    scorers = models.JSONField(default=list, help_text='scorer specs as offline runs take them, e.g. ["exact_match"]')
    reference_set = models.ForeignKey(
        EvalSet,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="expected values: the case whose input equals the trace's",
    )
    window_minutes = models.PositiveIntegerField(default=60, help_text="length of one window, minutes")
    created = models.DateTimeField(auto_now_add=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ScoreState(models.TextChoices):
    NOT_SAMPLED = "not_sampled", "not sampled"
    PENDING = "pending", "pending"
    SCORED = "scored", "scored"
    ERRORED = "errored", "errored"


class Reason(models.TextChoices):
    """Why a sampled trace is pending or errored (never a silent "pending")."""

    NONE = "", "—"
    QUEUED = "queued", "queued for the worker"
    NO_JUDGE = "no_judge", "no judge configured"
    JUDGE_UNREACHABLE = "judge_unreachable", "judge unreachable"
    RATE_LIMITED = "rate_limited", "rate-limited"
    SCORER_ERROR = "scorer_error", "scorer error"
    TRACE_ERROR = "trace_error", "the trace itself errored"


class OnlineScore(models.Model):
    """One rule's verdict on one trace it matched."""

    rule = models.ForeignKey(ScoringRule, on_delete=models.CASCADE, related_name="scores", db_index=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="online_scores")
    window_start = models.DateTimeField()
    sampled = models.BooleanField()
    state = models.CharField(max_length=16, choices=ScoreState.choices)
    reason = models.CharField(max_length=24, choices=Reason.choices, blank=True, default="")
    detail = models.TextField(blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    scores = models.JSONField(default=list, blank=True)  # the scorers' Score records
    values = models.JSONField(default=dict, blank=True)  # score name -> bool / number, for windows and alerts
    passed = models.BooleanField(null=True, blank=True)  # the case verdict (None: nothing judged it)
    matched_at = models.DateTimeField(auto_now_add=True)
    scored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "run"], name="onlinescore_unique_rule_run")]
        indexes = [
            # a rule's windows and their counts; the alert's window reads
            models.Index(fields=["rule", "window_start"], name="onlinescore_rule_window"),
            # the worker's queue: pending rows
            models.Index(fields=["state", "rule"], name="onlinescore_state_rule"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_id}:{self.run_id} {self.state}"


class Direction(models.TextChoices):
    DROP = "drop", "drop"
    RISE = "rise", "rise"
    EITHER = "either", "either"


class PayloadFormat(models.TextChoices):
    JSON = "json", "JSON (documented body)"
    SLACK = "slack", "Slack-compatible"


class Alert(models.Model):
    """A window-vs-baseline test on one score of a rule (see :mod:`evalcore.alerts`)."""

    rule = models.ForeignKey(ScoringRule, on_delete=models.CASCADE, related_name="alerts")
    name = models.CharField(max_length=200)
    score_name = models.CharField(max_length=200, help_text="the score tested, e.g. exact_match or rubric_judge")
    direction = models.CharField(max_length=8, choices=Direction.choices, default=Direction.DROP)
    min_effect = models.FloatField(default=0.1, help_text="smallest change that fires (pass rate points or mean)")
    alpha = models.FloatField(default=0.01, help_text="significance level of the test")
    min_n = models.PositiveIntegerField(default=30, help_text="scored traces each window needs")
    consecutive = models.PositiveIntegerField(default=1, help_text="windows in a row that must fire")
    baseline_hours = models.PositiveIntegerField(default=24, help_text="baseline: the hours before the window")
    baseline_start = models.DateTimeField(null=True, blank=True, help_text="pinned baseline start (with end)")
    baseline_end = models.DateTimeField(null=True, blank=True)
    webhook_url = models.URLField(max_length=1000, blank=True, default="")
    payload_format = models.CharField(max_length=8, choices=PayloadFormat.choices, default=PayloadFormat.JSON)
    active = models.BooleanField(default=True)
    # the evaluation cursor: {"last_window": iso, "streak": n, "firing": bool, "history": [...]}
    state = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["rule", "name"]
        constraints = [models.UniqueConstraint(fields=["rule", "name"], name="alert_unique_rule_name")]

    def __str__(self) -> str:
        return f"{self.rule} / {self.name}"


class Delivery(models.TextChoices):
    PENDING = "pending", "pending"
    DELIVERED = "delivered", "delivered"
    FAILED = "failed", "failed"
    NONE = "none", "no webhook"


class AlertFiring(models.Model):
    """One firing with its evidence (windows, counts, the test and its p-value)."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="firings")
    fired_at = models.DateTimeField(auto_now_add=True)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    evidence = models.JSONField(default=dict)
    delivery = models.CharField(max_length=12, choices=Delivery.choices, default=Delivery.PENDING)
    delivery_error = models.TextField(blank=True, default="")
    delivery_attempts = models.PositiveIntegerField(default=0)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-fired_at"]

    def __str__(self) -> str:
        return f"{self.alert} @ {self.window_start:%Y-%m-%d %H:%M}"
