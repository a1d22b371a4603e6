"""Eval runs and their per-case results.

A result annotates a ``traces.Run`` (output, tokens, timings, error live there) with scores and
the verdict; nothing is stored twice.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from apps.evals.models.sets import EvalSet, SetVersion
from apps.traces.fields import RedactedCharField, RedactedJSONField, RedactedTextField
from evalcore.jsonvalue import MISSING
from evalcore.types import CaseOutcome, CaseStatus, StatusReason, case_outcome, expected_hash

MISSING_HASH = expected_hash(MISSING)


class EvalRunStatus(models.TextChoices):
    """Where an eval run is: ``queued`` -> ``running`` -> ``finished`` / ``failed`` /
    ``interrupted`` (the process died or was stopped; resumable)."""

    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"
    FAILED = "failed", "failed"
    INTERRUPTED = "interrupted", "interrupted"


def new_eval_run_id() -> str:
    return secrets.token_hex(8)


class EvalRun(models.Model):
    """One invocation of (target, variant) over a set and split, with its provenance."""

    id = models.CharField(primary_key=True, max_length=32, default=new_eval_run_id, editable=False)
    eval_set = models.ForeignKey(EvalSet, on_delete=models.PROTECT, related_name="eval_runs")
    target_id = models.CharField(max_length=200)
    variant = models.CharField(max_length=200, blank=True, default="")
    split = models.CharField(max_length=8)  # train / dev / test / all
    model = RedactedCharField(max_length=200, blank=True, default="")
    git_sha = models.CharField(max_length=64, blank=True, default="")
    git_dirty = models.BooleanField(default=False)
    scorer_specs = RedactedJSONField(default=list, blank=True)
    config = RedactedJSONField(default=dict, blank=True)
    set_hash = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=16, choices=EvalRunStatus.choices, default=EvalRunStatus.QUEUED)
    source_eval_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="rescored_runs"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    n_total = models.IntegerField(default=0)
    n_done = models.IntegerField(default=0)
    n_passed = models.IntegerField(default=0)
    n_failed = models.IntegerField(default=0)
    n_errored = models.IntegerField(default=0)
    # cases nothing judged: counted in n_done, never in n_passed
    n_unscored = models.IntegerField(default=0)
    summary = RedactedJSONField(default=dict, blank=True)
    error = RedactedTextField(blank=True, default="")
    # Liveness (apps.evals.runs.liveness): whatever executes a running run (CLI process, task worker)
    # stamps itself here and refreshes ``heartbeat_at`` every few seconds; a run whose heartbeat
    # is older than ``EVALSITE_STALE_AFTER_S`` is marked interrupted by the sweeper
    # (``apps.evals.worker.sweeper``), never by a reader.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    executor_host = models.CharField(max_length=255, blank=True, default="")
    executor_pid = models.IntegerField(null=True, blank=True)
    # run ids whose target was running at the last commit (durable before each target call), so
    # a process that died names the cases in flight; and how often each was in flight at a death
    in_flight = models.JSONField(default=list, blank=True)
    crash_suspects = models.JSONField(default=dict, blank=True)
    # What people say about the run (editable by members): a name, notes, and whether it is the
    # pinned baseline of its set and target (at most one per set and target).
    # The name is made when the run is created unless one is given (apps.evals.runs.naming);
    # blank only on rows no code wrote since (the 0024 migration named the older ones).
    name = models.CharField(max_length=200, blank=True, default="")
    # the run's place among the runs of its (set, target, variant, split): 1, 2, ... ("#3" in the
    # made name); 0 on a row written by code older than the numbering
    number = models.PositiveIntegerField(default=0)
    notes = models.TextField(blank=True, default="")
    pinned = models.BooleanField(default=False)
    # the set's version this run was prepared against (apps.evals.sets.versions)
    set_version = models.ForeignKey(
        SetVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_runs"
    )
    # a sharded run (apps.evals.worker.shards): how many shards it was split into (0: one process runs it)
    n_shards = models.IntegerField(default=0)

    class Meta:
        ordering = ["-started"]
        permissions = [
            ("start_evalrun", "Can start eval runs"),
            ("use_playground", "Can chat with targets in the playground"),
            ("capture_case", "Can capture a playground session as an eval case"),
        ]
        indexes = [
            # run history filtered by set (and target/variant), newest first
            models.Index(fields=["eval_set", "-started"], name="evalrun_set_started"),
            models.Index(fields=["eval_set", "target_id", "variant", "split"], name="evalrun_set_target_variant"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["eval_set", "target_id"], condition=models.Q(pinned=True), name="evalrun_one_pinned_baseline"
            ),
            # two runs created at once never share a number (apps.evals.runs.naming retries)
            models.UniqueConstraint(
                fields=["eval_set", "target_id", "variant", "split", "number"],
                condition=models.Q(number__gt=0),
                name="evalrun_unique_number",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.target_id}/{self.variant or '-'}"

    @property
    def pass_rate(self) -> float | None:
        return self.n_passed / self.n_done if self.n_done else None


class ResultStatus(models.TextChoices):
    """A case's outcome: the values of ``evalcore.types.CaseStatus``."""

    PASSED = CaseStatus.PASSED.value, "passed"
    FAILED = CaseStatus.FAILED.value, "failed"
    ERRORED = CaseStatus.ERRORED.value, "errored"
    UNSCORED = CaseStatus.UNSCORED.value, "unscored"


class EvalResult(models.Model):
    """A per-case annotation of a run: scores, the verdict, and what it was scored against.

    ``expected`` / ``expected_hash`` keep the case's expected value as the scorers saw it, so a
    later edit of the set never changes what an old run's page shows (``expected_hash`` empty:
    a result stored before this was recorded).
    """

    # no index of its own: the unique (eval_run, case_id, repeat_index) index and the (eval_run,
    # id) one serve every lookup by run (one index less to write per result)
    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results", db_index=False)
    case_id = models.CharField(max_length=300)
    repeat_index = models.IntegerField(default=0)
    split = models.CharField(max_length=8, blank=True, default="")
    # a re-scored eval run annotates the same runs as its source: a run can have several results
    run = models.ForeignKey("traces.Run", on_delete=models.PROTECT, related_name="eval_results")
    scores = RedactedJSONField(default=list)
    passed = models.BooleanField()
    status = models.CharField(max_length=16, choices=ResultStatus.choices)
    # why the case got its status (evalcore.types.StatusReason); "" on results stored before it
    reason = models.CharField(max_length=32, blank=True, default="")
    expected = models.JSONField(null=True, blank=True)
    # sha256 of the expected value as scored (evalcore.types.expected_hash); "" when not recorded
    expected_hash = models.CharField(max_length=64, blank=True, default="")
    # the mean of numeric scores, for "sort by score" without reading JSON
    score = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["eval_run", "id"]
        constraints = [
            models.UniqueConstraint(fields=["eval_run", "case_id", "repeat_index"], name="evalresult_unique_case")
        ]
        indexes = [
            # run detail filtered by status, in arrival order (id doubles as the live seq)
            models.Index(fields=["eval_run", "status", "id"], name="evalresult_run_status"),
            # unfiltered arrival order and the live high-water mark (MAX(id)) of one run; without it
            # PostgreSQL walks the primary key past every later run's results
            models.Index(fields=["eval_run", "id"], name="evalresult_run_id"),
        ]

    def __str__(self) -> str:
        return f"{self.eval_run_id}:{self.case_id}"

    @property
    def outcome(self) -> CaseOutcome:
        """The status and why; derived from the scores and the run's error when not stored."""
        if self.reason:
            return CaseOutcome(CaseStatus(self.status), StatusReason(self.reason))
        return case_outcome(target_errored=bool(self.run.error), scores=self.scores or [])

    @property
    def expected_recorded(self) -> bool:
        """The expected value the result was scored against is stored with it."""
        return bool(self.expected_hash)

    @property
    def expected_missing(self) -> bool:
        """The case had no expected value when this result was scored."""
        return self.expected_hash == MISSING_HASH


class SearchIndexState(models.Model):
    """How far a run's results are in the full-text index (``apps.evals.results.search_index``): every
    result with an id up to ``indexed_upto`` is indexed."""

    eval_run = models.OneToOneField(EvalRun, on_delete=models.CASCADE, primary_key=True, related_name="search_index")
    indexed_upto = models.BigIntegerField(default=0)
