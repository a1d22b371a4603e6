# Set versions keep their case fingerprints as rows (SetVersionCase) instead of one JSON object,
# so recording and diffing a version of any size runs in the database in bounded memory.

import django.db.models.deletion
from django.db import migrations, models


def fingerprints_to_rows(apps, schema_editor):
    SetVersion = apps.get_model("evals", "SetVersion")
    SetVersionCase = apps.get_model("evals", "SetVersionCase")
    for version in SetVersion.objects.only("pk", "fingerprints").iterator(chunk_size=100):
        items = sorted((version.fingerprints or {}).items())
        for start in range(0, len(items), 5000):
            SetVersionCase.objects.bulk_create(
                [SetVersionCase(version_id=version.pk, case_id=k, fingerprint=v) for k, v in items[start : start + 5000]]
            )


def rows_to_fingerprints(apps, schema_editor):
    SetVersion = apps.get_model("evals", "SetVersion")
    SetVersionCase = apps.get_model("evals", "SetVersionCase")
    for version in SetVersion.objects.only("pk").iterator(chunk_size=100):
        rows = SetVersionCase.objects.filter(version_id=version.pk).values_list("case_id", "fingerprint")
        SetVersion.objects.filter(pk=version.pk).update(fingerprints=dict(rows))


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0019_lean_indexes"),
    ]

    operations = [
        migrations.CreateModel(
            name="SetVersionCase",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("case_id", models.CharField(max_length=300)),
                ("fingerprint", models.CharField(max_length=16)),
                (
                    "version",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="cases",
                        to="evals.setversion",
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("version", "case_id"), name="setversioncase_unique_case")],
            },
        ),
        migrations.RunPython(fingerprints_to_rows, rows_to_fingerprints),
        migrations.RemoveField(
            model_name="setversion",
            name="fingerprints",
        ),
    ]
