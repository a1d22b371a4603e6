from django.db import migrations


def reset_search_index(apps, schema_editor):
    """Empty the full-text index so every run is indexed again, on its next search, with CJK runs
    written as bigrams (apps.evals.results.search_index.cjk_split): documents written before would not
    match the bigram queries. The table's schema is unchanged."""
    schema_editor.execute("DELETE FROM evals_result_fts")
    apps.get_model("evals", "SearchIndexState").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0020_set_version_cases"),
    ]

    operations = [
        # both ways: the documents written by either version only suit that version's queries
        migrations.RunPython(reset_search_index, reset_search_index),
    ]
