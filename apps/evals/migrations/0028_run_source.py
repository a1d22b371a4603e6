"""Issue 29: where an imported run came from (tool, version, file name + SHA-256, original ids), one
row per imported run, unique per (set, file hash, run key) so a second import of a file adds nothing."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evals", "0027_judge_ledger")]

    operations = [
        migrations.CreateModel(
            name="RunSource",
            fields=[
                (
                    "eval_run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="import_source",
                        serialize=False,
                        to="evals.evalrun",
                    ),
                ),
                ("tool", models.CharField(max_length=32)),
                ("tool_version", models.CharField(blank=True, default="", max_length=64)),
                ("file_format", models.CharField(max_length=64)),
                ("file_name", models.CharField(max_length=255)),
                ("file_path", models.TextField(blank=True, default="")),
                ("sha256", models.CharField(max_length=64)),
                ("run_key", models.CharField(max_length=255)),
                ("original_ids", models.JSONField(blank=True, default=dict)),
                ("imported_only", models.JSONField(blank=True, default=list)),
                ("created", models.DateTimeField(auto_now_add=True)),
                (
                    "eval_set",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="evals.evalset"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["tool", "sha256"], name="runsource_tool_sha")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("eval_set", "sha256", "run_key"), name="runsource_one_run_per_file_key"
                    )
                ],
            },
        ),
    ]
