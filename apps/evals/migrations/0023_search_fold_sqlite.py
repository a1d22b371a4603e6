from django.db import migrations


def reset_search_index(apps, schema_editor):
    """Empty the full-text index so every run is indexed again with its documents folded on SQLite
    as on PostgreSQL (apps.evals.results.search_index.fold: fullwidth ＡＢ is ab there too): SQLite
    documents written before were not folded, and the now folded queries would miss them. The
    table's schema is unchanged; the sweeper indexes again. PostgreSQL's documents were folded
    already: kept."""
    if schema_editor.connection.vendor != "sqlite":
        return
    schema_editor.execute("DELETE FROM evals_result_fts")
    apps.get_model("evals", "SearchIndexState").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0022_case_snapshots"),
    ]

    operations = [
        # both ways: the documents written by either version only suit that version's queries
        migrations.RunPython(reset_search_index, reset_search_index),
    ]
