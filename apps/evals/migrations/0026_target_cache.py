"""Issue 27: cached target responses (placeholder: its operations are written by the work of that issue)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals", "0025_price_table")]

    operations = []  # type: ignore[var-annotated]
