"""Event.run loses its own index: the unique (run, seq) constraint's index starts with run_id and
serves every lookup by run, so the FK index was a second index updated for each event written.

The index is dropped by name (no table rebuild on SQLite, where an AlterField would copy every
event into a new table).
"""

import django.db.models.deletion
from django.db import migrations, models


def _run_indexes(schema_editor, model):
    column = model._meta.get_field("run").column
    return schema_editor._constraint_names(model, [column], index=True, unique=False, primary_key=False)


def drop_run_index(apps, schema_editor):
    event = apps.get_model("traces", "Event")
    for name in _run_indexes(schema_editor, event):
        schema_editor.execute(schema_editor._delete_index_sql(event, name))


def create_run_index(apps, schema_editor):
    event = apps.get_model("traces", "Event")
    if not _run_indexes(schema_editor, event):
        field = event._meta.get_field("run")
        schema_editor.execute(schema_editor._create_index_sql(event, fields=[field]))


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0002_run_private"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_run_index, create_run_index)],
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="traces.run",
                    ),
                ),
            ],
        ),
    ]
