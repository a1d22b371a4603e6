"""The judge reliability ledger: one row per scorer or judge invocation, offline or online
(issue 28), and the versioned judge specs an alignment produces.

A ledger row says what happened to one ask: ``queued`` -> ``running`` -> ``done`` / ``errored``
(with its reason) / ``skipped`` (with its reason), its latency, tokens and cost. Aggregates read
their coverage from it, so a score that was never produced is a counted gap with a reason, never
a silent "pending".
"""

from __future__ import annotations

from django.db import models

from apps.evals.models.runs import EvalRun
from apps.evals.models.sets import EvalSet
from apps.traces.fields import RedactedJSONField


class InvocationKind(models.TextChoices):
    """What was invoked: an LLM judge, or a plain (code) scorer."""

    JUDGE = "judge", "judge"
    SCORER = "scorer", "scorer"


class InvocationStatus(models.TextChoices):
    """Where one invocation is. ``errored`` and ``skipped`` always carry a reason."""

    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    ERRORED = "errored", "errored"
    SKIPPED = "skipped", "skipped"


class ScorerInvocation(models.Model):
    """One scorer or judge invocation on one case (offline: eval run + case + repeat) or one
    trace (online scoring: ``trace_id``). Written by :mod:`apps.evals.results.ledger` only."""

    kind = models.CharField(max_length=8, choices=InvocationKind.choices)
    scorer = models.CharField(max_length=200, help_text="the scorer's name (its spec's name)")
    spec = models.JSONField(default=dict, blank=True, help_text="the scorer spec record, when known")
    judge_model = models.CharField(max_length=200, blank=True, default="")
    eval_run = models.ForeignKey(
        EvalRun, null=True, blank=True, on_delete=models.CASCADE, related_name="invocations", db_index=False
    )
    case_id = models.CharField(max_length=300, blank=True, default="")
    repeat_index = models.IntegerField(null=True, blank=True)
    trace_id = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=8, choices=InvocationStatus.choices)
    reason = models.CharField(max_length=300, blank=True, default="")
    latency_ms = models.FloatField(null=True, blank=True)
    tokens_in = models.IntegerField(null=True, blank=True)
    tokens_out = models.IntegerField(null=True, blank=True)
    calls = models.IntegerField(null=True, blank=True, help_text="model calls made (retries and samples included)")
    cost_usd = models.FloatField(null=True, blank=True, help_text="null: no price known for the judge model")
    created = models.DateTimeField()
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # one row per scorer per case of an eval run: a batch written again (a re-delivered
            # shard) skips it; online rows (no eval run: NULLs are distinct) are never merged.
            # Also the index of a run's ledger and its counts (eval_run first).
            models.UniqueConstraint(
                fields=["eval_run", "case_id", "repeat_index", "scorer", "trace_id"], name="ledger_unique_invocation"
            ),
        ]
        indexes = [
            # online scoring: a trace's invocations
            models.Index(fields=["trace_id"], name="ledger_trace", condition=~models.Q(trace_id="")),
        ]

    def __str__(self) -> str:
        where = f"{self.eval_run_id}:{self.case_id}#{self.repeat_index}" if self.eval_run_id else self.trace_id
        return f"{self.scorer} {self.status} on {where}"


class JudgeSpecVersion(models.Model):
    """A named, versioned judge spec (e.g. an aligned judge): ``name`` v``version`` holds the
    rubric judge's spec record and, for an aligned one, its alignment report (κ before/after on
    locked test labels, α between people). Versions are never edited: a new alignment is a new
    version."""

    name = models.CharField(max_length=100)
    version = models.IntegerField()
    # redacted: an aligned rubric quotes people's comments, which may quote a credential
    spec = RedactedJSONField(help_text="the scorer spec record {name, args, version}")
    eval_set = models.ForeignKey(EvalSet, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    report = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="judgespec_unique_version")]

    def __str__(self) -> str:
        return f"{self.name}@v{self.version}"

    @property
    def label(self) -> str:
        """``name@vN``: how ``--judge SPEC`` names it."""
        return f"{self.name}@v{self.version}"
