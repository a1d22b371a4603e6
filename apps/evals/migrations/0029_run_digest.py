"""Issue 30, floor 5: placeholder for the pages-at-a-million work (filled in by that work, or left
empty: an empty migration changes nothing)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals", "0028_run_source")]

    operations: list[migrations.operations.base.Operation] = []
