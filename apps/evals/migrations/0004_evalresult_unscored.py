# The "unscored" case status (nothing judged the case), the reason of each status, and the
# run's unscored counter.

from collections import defaultdict

from django.db import migrations, models

from evalcore.types import case_outcome


def restate_results(apps, schema_editor):
    """Re-derive every stored result's status under the verdict rule, and fix the run counters
    and the counts of the stored summaries (a case nothing judged was stored as passed)."""
    EvalResult = apps.get_model("evals", "EvalResult")
    EvalRun = apps.get_model("evals", "EvalRun")
    # eval run -> split -> (old status, new status) -> count
    moves = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    rows = EvalResult.objects.select_related("run").only("id", "eval_run_id", "split", "status", "scores", "run__error")
    for row in rows.iterator(chunk_size=2000):
        outcome = case_outcome(target_errored=bool(row.run.error), scores=row.scores or [])
        if outcome.status.value != row.status:
            # only changed rows are written; the reason of the others is derived when shown
            EvalResult.objects.filter(pk=row.pk).update(
                status=outcome.status.value, passed=outcome.status.value == "passed", reason=outcome.reason.value
            )
            moves[row.eval_run_id][row.split or "unsplit"][(row.status, outcome.status.value)] += 1
    for eval_run_id, by_split in moves.items():
        run = EvalRun.objects.get(pk=eval_run_id)
        summary = dict(run.summary or {})
        total = defaultdict(int)
        for split, changes in by_split.items():
            group = (summary.get("splits") or {}).get(split)
            for (old, new), count in changes.items():
                total[old] -= count
                total[new] += count
                if group is not None:
                    group[old] = group.get(old, 0) - count
                    group[new] = group.get(new, 0) + count
            if group is not None and group.get("n"):
                group["pass_rate"] = group.get("passed", 0) / group["n"]
        for key in ("passed", "failed", "errored", "unscored"):
            setattr(run, f"n_{key}", getattr(run, f"n_{key}") + total[key])
            if summary:
                summary[key] = summary.get(key, 0) + total[key]
        if summary.get("n"):
            summary["pass_rate"] = summary.get("passed", 0) / summary["n"]
        run.summary = summary
        run.save(update_fields=["n_passed", "n_failed", "n_errored", "n_unscored", "summary"])


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0003_result_run_id_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="evalrun",
            name="n_unscored",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="evalresult",
            name="reason",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AlterField(
            model_name="evalresult",
            name="status",
            field=models.CharField(
                choices=[
                    ("passed", "passed"),
                    ("failed", "failed"),
                    ("errored", "errored"),
                    ("unscored", "unscored"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(restate_results, migrations.RunPython.noop),
    ]
