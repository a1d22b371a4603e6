"""Eval sets, their versions and their cases."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
    (``apps.evals.sets.versions``). Its :class:`SetVersionCase` rows hold each case id with a short
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
    hex digits of their BLAKE2b hash, ``apps.evals.sets.versions.case_fingerprint``)."""

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
    scored against after the set has moved on (``apps.evals.sets.versions.snapshot_cases``)."""

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
