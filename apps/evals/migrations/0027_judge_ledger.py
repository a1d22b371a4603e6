"""Issue 28: the judge and scorer invocation ledger (placeholder: its operations are written by the work of that issue)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals", "0026_target_cache")]

    operations = []  # type: ignore[var-annotated]
