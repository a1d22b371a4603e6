"""Eval sets, their cases, eval runs and per-case results.

A result annotates a ``traces.Run`` (output, tokens, timings, error live there) with scores and
the verdict; nothing is stored twice.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from apps.evals.shard_models import EvalShard, ShardStatus  # noqa: F401 - registered with the app here, imported from here
from apps.traces.fields import RedactedCharField, RedactedJSONField, RedactedTextField
from evalcore.jsonvalue import MISSING
from evalcore.types import CaseOutcome, CaseStatus, StatusReason, case_outcome, expected_hash

MISSING_HASH = expected_hash(MISSING)


class Split(models.TextChoices):
    """A case's split; the values are ``evalcore.types.SPLITS`` (checked in tests)."""

    TRAIN = "train", "train"
    DEV = "dev", "dev"
    TEST = "test", "test"


class EvalSet(models.Model):
    """A named case bank (file-first; mirrored here for browsing, authoring and runs)."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True, default="")
    source_path = models.CharField(max_length=1000, blank=True, default="")
    content_hash = models.CharField(max_length=64, blank=True, default="")
    split_aliases = models.JSONField(
        default=dict,
        blank=True,
        help_text="the file's split names mapped at the last import ({file name: split}), e.g. {'validate': 'test'}",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SetVersion(models.Model):
    """One state of a set's cases: each import or edit that changed them yields the next number
    (``apps.evals.set_versions``). Its :class:`SetVersionCase` rows hold each case id with a short
    hash of its content (input, expected, tags, split, metadata), so two versions can be diffed by
    id (in the database: a version of a million cases is never held in memory)."""

    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="versions")
    number = models.IntegerField()
    content_hash = models.CharField(max_length=64, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    source = models.CharField(max_length=1000, blank=True, default="")
    n_cases = models.IntegerField(default=0)
    added = models.IntegerField(default=0)
    updated = models.IntegerField(default=0)
    removed = models.IntegerField(default=0)

    class Meta:
        ordering = ["eval_set", "-number"]
        constraints = [models.UniqueConstraint(fields=["eval_set", "number"], name="setversion_unique_number")]

    def __str__(self) -> str:
        return f"{self.eval_set_id} v{self.number}"


class SetVersionCase(models.Model):
    """One case of a set version: its id and the fingerprint of its stored columns (the first 16
    hex digits of their BLAKE2b hash, ``apps.evals.set_versions.case_fingerprint``)."""

    # no index of its own: the unique (version, case_id) index serves every lookup by version
    version = models.ForeignKey(SetVersion, on_delete=models.CASCADE, related_name="cases", db_index=False)
    case_id = models.CharField(max_length=300)
    fingerprint = models.CharField(max_length=16)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "case_id"], name="setversioncase_unique_case")]

    def __str__(self) -> str:
        return f"{self.version_id}:{self.case_id}"


class CaseSnapshot(models.Model):
    """A case's content as a version of its set held it, stored once per distinct content (the
    fingerprint of :class:`SetVersionCase`), so a run's export writes the case its run was
    scored against after the set has moved on (``apps.evals.set_versions.snapshot_cases``)."""

    # no index of its own: the unique (eval_set, fingerprint) index serves every lookup
    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="+", db_index=False)
    fingerprint = models.CharField(max_length=16)
    input = models.JSONField(null=True)
    expected = models.JSONField(null=True, blank=True)
    has_expected = models.BooleanField(default=True)
    tags = models.JSONField(default=list, blank=True)
    split = models.CharField(max_length=8, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["eval_set", "fingerprint"], name="casesnapshot_unique_fingerprint")
        ]

    def __str__(self) -> str:
        return f"{self.eval_set_id}:{self.fingerprint}"


class EvalCase(models.Model):
    # no index of its own: the unique (eval_set, case_id) index serves every lookup by set
    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="cases", db_index=False)
    case_id = models.CharField(max_length=300)
    input = models.JSONField()
    expected = models.JSONField(null=True, blank=True)
    has_expected = models.BooleanField(default=True)
    tags = models.JSONField(default=list, blank=True)
    split = models.CharField(max_length=8, choices=Split.choices)
    metadata = models.JSONField(default=dict, blank=True)
    position = models.IntegerField(default=0)

    class Meta:
        ordering = ["eval_set", "position", "case_id"]
        constraints = [models.UniqueConstraint(fields=["eval_set", "case_id"], name="evalcase_unique_set_case")]
        indexes = [
            # per-split counts and the cases browser filtered by split
            models.Index(fields=["eval_set", "split", "position"], name="evalcase_set_split"),
            # a run of every split reads its cases in the set's order, a chunk at a time
            # (sets.iter_set_cases); lookups by set alone use the unique (set, case id) index
            models.Index(fields=["eval_set", "position"], name="evalcase_set_position"),
        ]

    def __str__(self) -> str:
        return f"{self.eval_set_id}:{self.case_id}"


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
    # Liveness (apps.evals.liveness): whatever executes a running run (CLI process, task worker)
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
    name = models.CharField(max_length=200, blank=True, default="")
    notes = models.TextField(blank=True, default="")
    pinned = models.BooleanField(default=False)
    # the set's version this run was prepared against (apps.evals.set_versions)
    set_version = models.ForeignKey(
        SetVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_runs"
    )
    # a sharded run (apps.evals.shards): how many shards it was split into (0: one process runs it)
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
            )
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.target_id}/{self.variant or '-'}"

    @property
    def pass_rate(self) -> float | None:
        return self.n_passed / self.n_done if self.n_done else None


class TaskWorker(models.Model):
    """A task worker process (``evalsite worker``) and its own heartbeat (``apps.evals.workers``).

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


class ReviewVerdict(models.TextChoices):
    """A person's verdict on a result."""

    PASS = "pass", "pass"
    FAIL = "fail", "fail"
    UNSURE = "unsure", "unsure"


class Review(models.Model):
    """A person's grade of one result: a verdict, 0..5 scores on the judge's rubric axes
    (``evalcore.judge.AXES``) and a comment, each optional but not all three. One per (result,
    reviewer): a reviewer edits their own; every edit keeps the state it replaces as a
    :class:`ReviewRevision`.

    ``eval_run`` and ``case_id`` repeat the result's, so a run's or a set's reviews are read
    without a join through the results.
    """

    result = models.ForeignKey(EvalResult, on_delete=models.CASCADE, related_name="reviews")
    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="reviews")
    case_id = models.CharField(max_length=300)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="eval_reviews")
    # "" for a review that is only a comment or axis scores: it votes in no verdict figure
    verdict = models.CharField(max_length=8, choices=ReviewVerdict.choices, blank=True)
    axis_scores = models.JSONField(default=dict, blank=True)
    comment = models.TextField(blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["result", "created"]
        permissions = [("review_result", "Can review eval results")]
        constraints = [models.UniqueConstraint(fields=["result", "reviewer"], name="review_unique_reviewer")]
        indexes = [models.Index(fields=["eval_run", "case_id"], name="review_run_case")]

    def __str__(self) -> str:
        return f"{self.eval_run_id}:{self.case_id} {self.verdict} by {self.reviewer_id}"


class ReviewRevision(models.Model):
    """The state of a review before one of its edits (the history; newest last)."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="revisions")
    verdict = models.CharField(max_length=8, choices=ReviewVerdict.choices, blank=True)
    axis_scores = models.JSONField(default=dict, blank=True)
    comment = models.TextField(blank=True, default="")
    saved = models.DateTimeField(help_text="when this state was saved (the review's updated time then)")
    replaced = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["review", "id"]


class SearchIndexState(models.Model):
    """How far a run's results are in the full-text index (``apps.evals.search_index``): every
    result with an id up to ``indexed_upto`` is indexed."""

    eval_run = models.OneToOneField(EvalRun, on_delete=models.CASCADE, primary_key=True, related_name="search_index")
    indexed_upto = models.BigIntegerField(default=0)


class ReviewAssignment(models.Model):
    """A result handed to a person to review (the queue's "assigned to me" filter)."""

    result = models.ForeignKey(EvalResult, on_delete=models.CASCADE, related_name="assignments")
    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="review_assignments")
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_assignments")
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["result", "assignee"], name="assignment_unique")]
        indexes = [models.Index(fields=["eval_run", "assignee"], name="assignment_run_assignee")]
