# A set version's cases are kept once per distinct content (CaseSnapshot), so a run's export writes
# the cases its run was scored against after the set was edited (issue 23, bh-45). Sets whose
# stored cases are still their latest version's (same content hash) get that version's snapshots
# now; older versions' content is gone and their runs export today's cases, as before.

import django.db.models.deletion
from django.db import migrations, models

SNAPSHOT_SQL = (
    "INSERT INTO evals_casesnapshot (eval_set_id, fingerprint, input, expected, has_expected, tags, split, metadata) "
    "SELECT c.eval_set_id, v.fingerprint, c.input, c.expected, c.has_expected, c.tags, c.split, c.metadata "
    "FROM evals_setversioncase v JOIN evals_evalcase c ON c.eval_set_id = %s AND c.case_id = v.case_id "
    "WHERE v.version_id = %s AND NOT EXISTS (SELECT 1 FROM evals_casesnapshot s WHERE s.eval_set_id = %s "
    "AND s.fingerprint = v.fingerprint) ON CONFLICT DO NOTHING"
)


def snapshot_latest_versions(apps, schema_editor):
    EvalSet = apps.get_model("evals", "EvalSet")
    SetVersion = apps.get_model("evals", "SetVersion")
    for eval_set in EvalSet.objects.only("pk", "content_hash").iterator(chunk_size=100):
        latest = SetVersion.objects.filter(eval_set_id=eval_set.pk).order_by("-number").first()
        if latest is None or latest.content_hash != eval_set.content_hash:
            continue
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(SNAPSHOT_SQL, [eval_set.pk, latest.pk, eval_set.pk])


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0021_search_cjk_bigrams"),
    ]

    operations = [
        migrations.CreateModel(
            name="CaseSnapshot",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("fingerprint", models.CharField(max_length=16)),
                ("input", models.JSONField(null=True)),
                ("expected", models.JSONField(blank=True, null=True)),
                ("has_expected", models.BooleanField(default=True)),
                ("tags", models.JSONField(blank=True, default=list)),
                ("split", models.CharField(blank=True, default="", max_length=8)),
                ("metadata", models.JSONField(blank=True, default=dict)),
                (
                    "eval_set",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="evals.evalset",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("eval_set", "fingerprint"), name="casesnapshot_unique_fingerprint")
                ],
            },
        ),
        migrations.RunPython(snapshot_latest_versions, migrations.RunPython.noop),
    ]
