"""Where an imported eval run came from (``evalsite import-run``): one row per imported run.

A run made by Evalsite has no row here; a run read from another tool's file (an Inspect log, a
promptfoo results file, an OpenAI Evals export, a Braintrust experiment) has exactly one, naming
the tool and its version, the file (name and SHA-256 of its bytes) and the ids the tool gave the
run. The unique rule (set, file hash, run key) is what makes a second import of the same file a
no-op: the import finds the row and answers the run already stored instead of adding another.
"""

from __future__ import annotations

from django.db import models

from apps.evals.models.runs import EvalRun
from apps.evals.models.sets import EvalSet


class RunSource(models.Model):
    """The provenance of one imported eval run.

    Fields:
        eval_run: The imported run (one row per run; deleted with it).
        eval_set: The set the run was imported into (the unique rule is per set: the same file
            imported into another set makes another run there).
        tool: ``inspect``, ``promptfoo``, ``openai_evals`` or ``braintrust``.
        tool_version: The tool's version as the file records it (``""`` when it does not).
        file_format: The format read, with its version (e.g. ``promptfoo results v3 (json)``).
        file_name: The file's base name; ``file_path`` the absolute path it was read from.
        sha256: SHA-256 of the file's bytes (of the folder's files in order, for a folder).
        run_key: The run's key within the file (a file may hold several runs: promptfoo one per
            provider x prompt, an OpenAI Evals export one per eval run).
        original_ids: The ids the tool gave (eval id, run id, prompt id, provider...).
        imported_only: Scorer names whose scores were imported but that Evalsite cannot run
            again (a model grader, a script): scored, not re-runnable.
        created: When the import was made.
    """

    eval_run = models.OneToOneField(EvalRun, on_delete=models.CASCADE, primary_key=True, related_name="import_source")
    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="+")
    tool = models.CharField(max_length=32)
    tool_version = models.CharField(max_length=64, blank=True, default="")
    file_format = models.CharField(max_length=64)
    file_name = models.CharField(max_length=255)
    file_path = models.TextField(blank=True, default="")
    sha256 = models.CharField(max_length=64)
    run_key = models.CharField(max_length=255)
    original_ids = models.JSONField(default=dict, blank=True)
    imported_only = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["eval_set", "sha256", "run_key"], name="runsource_one_run_per_file_key"),
        ]
        indexes = [models.Index(fields=["tool", "sha256"], name="runsource_tool_sha")]

    def __str__(self) -> str:
        return f"{self.tool} {self.file_name} ({self.run_key})"
