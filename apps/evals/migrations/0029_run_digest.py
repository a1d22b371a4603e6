"""Issue 30, floor 5: a finished run's compact per-case digest (``RunDigest``), so the compare
page of two million-result runs merges two arrays instead of joining two million rows."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("evals", "0028_run_source")]

    operations = [
        migrations.CreateModel(
            name="RunDigest",
            fields=[
                (
                    "eval_run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="digest",
                        serialize=False,
                        to="evals.evalrun",
                    ),
                ),
                ("version", models.PositiveSmallIntegerField(default=1)),
                ("n_done", models.IntegerField()),
                ("status", models.CharField(max_length=16)),
                ("n_results", models.IntegerField()),
                ("max_result_id", models.BigIntegerField()),
                ("built", models.DateTimeField(auto_now=True)),
                ("data", models.BinaryField()),
            ],
        ),
    ]
