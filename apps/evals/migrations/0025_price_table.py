"""Issue 27: the versioned price table and stored costs (placeholder: its operations are written by the work of that issue)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals", "0024_run_numbers_names")]

    operations = []  # type: ignore[var-annotated]
