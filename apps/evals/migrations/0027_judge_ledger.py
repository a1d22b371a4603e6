"""Issue 28: the judge and scorer invocation ledger (``ScorerInvocation``) and versioned judge
specs (``JudgeSpecVersion``, e.g. an aligned judge)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evals", "0026_target_cache")]

    operations = [
        migrations.CreateModel(
            name="JudgeSpecVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("version", models.IntegerField()),
                ("spec", models.JSONField(help_text="the scorer spec record {name, args, version}")),
                ("report", models.JSONField(blank=True, default=dict)),
                ("created", models.DateTimeField(auto_now_add=True)),
                (
                    "eval_set",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="evals.evalset",
                    ),
                ),
            ],
            options={
                "ordering": ["name", "version"],
                "constraints": [models.UniqueConstraint(fields=("name", "version"), name="judgespec_unique_version")],
            },
        ),
        migrations.CreateModel(
            name="ScorerInvocation",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(choices=[("judge", "judge"), ("scorer", "scorer")], max_length=8)),
                ("scorer", models.CharField(help_text="the scorer's name (its spec's name)", max_length=200)),
                ("spec", models.JSONField(blank=True, default=dict, help_text="the scorer spec record, when known")),
                ("judge_model", models.CharField(blank=True, default="", max_length=200)),
                ("case_id", models.CharField(blank=True, default="", max_length=300)),
                ("repeat_index", models.IntegerField(blank=True, null=True)),
                ("trace_id", models.CharField(blank=True, default="", max_length=64)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("queued", "queued"),
                            ("running", "running"),
                            ("done", "done"),
                            ("errored", "errored"),
                            ("skipped", "skipped"),
                        ],
                        max_length=8,
                    ),
                ),
                ("reason", models.CharField(blank=True, default="", max_length=300)),
                ("latency_ms", models.FloatField(blank=True, null=True)),
                ("tokens_in", models.IntegerField(blank=True, null=True)),
                ("tokens_out", models.IntegerField(blank=True, null=True)),
                (
                    "calls",
                    models.IntegerField(
                        blank=True, help_text="model calls made (retries and samples included)", null=True
                    ),
                ),
                (
                    "cost_usd",
                    models.FloatField(blank=True, help_text="null: no price known for the judge model", null=True),
                ),
                ("created", models.DateTimeField()),
                ("finished", models.DateTimeField(blank=True, null=True)),
                (
                    "eval_run",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="invocations",
                        to="evals.evalrun",
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("eval_run", "case_id", "repeat_index", "scorer", "trace_id"),
                        name="ledger_unique_invocation",
                    )
                ],
                "indexes": [
                    models.Index(condition=~models.Q(trace_id=""), fields=["trace_id"], name="ledger_trace"),
                ],
            },
        ),
    ]
