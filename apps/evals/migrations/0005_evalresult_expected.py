# Results keep what they were scored against: the expected value and its hash.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0004_evalresult_unscored"),
    ]

    operations = [
        migrations.AddField(
            model_name="evalresult",
            name="expected",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="evalresult",
            name="expected_hash",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
