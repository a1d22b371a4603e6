"""Run names people can tell apart (issue 26): every run gets its number among the runs of its
(set, target, variant, split), and a run nobody named gets the made name
(``apps.evals.runs.naming.auto_run_name``, the rule new runs use)."""

from typing import Any

from django.db import migrations, models
from django.db.models import F

from apps.evals.runs.naming import auto_run_name

BATCH = 500


def number_and_name(apps: Any, schema_editor: Any) -> None:
    """Number every run in its (set, target, variant, split) by start time (never-started runs
    last, then by id), and give each unnamed one the made name. Names people gave stay."""
    EvalRun = apps.get_model("evals", "EvalRun")
    rows = (
        EvalRun.objects.select_related("eval_set")
        .only("id", "name", "number", "target_id", "variant", "split", "eval_set__name")
        .order_by("eval_set_id", "target_id", "variant", "split", F("started").asc(nulls_last=True), "id")
    )
    counters: dict[tuple[Any, ...], int] = {}
    batch = []
    for run in rows.iterator(chunk_size=BATCH):
        key = (run.eval_set_id, run.target_id, run.variant, run.split)
        counters[key] = run.number = counters.get(key, 0) + 1
        if not run.name:
            run.name = auto_run_name(
                set_name=run.eval_set.name,
                target_id=run.target_id,
                variant=run.variant,
                split=run.split,
                number=run.number,
            )
        batch.append(run)
        if len(batch) >= BATCH:
            EvalRun.objects.bulk_update(batch, ["number", "name"])
            batch = []
    if batch:
        EvalRun.objects.bulk_update(batch, ["number", "name"])


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0023_search_fold_sqlite"),
    ]

    operations = [
        migrations.AddField(
            model_name="evalrun",
            name="number",
            field=models.PositiveIntegerField(default=0),
        ),
        # names stay as they are on the way back (a made name is as good as none)
        migrations.RunPython(number_and_name, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="evalrun",
            constraint=models.UniqueConstraint(
                condition=models.Q(("number__gt", 0)),
                fields=("eval_set", "target_id", "variant", "split", "number"),
                name="evalrun_unique_number",
            ),
        ),
    ]
