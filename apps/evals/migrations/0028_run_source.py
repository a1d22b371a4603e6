"""Issue 29: where an imported run came from (placeholder: its operations are written by the work of that issue)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals", "0027_judge_ledger")]

    operations = []  # type: ignore[var-annotated]
