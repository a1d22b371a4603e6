"""API tokens get a scope. Tokens made before keep what a CLI or CI token needs (``write``:
read, start and edit runs, review, capture, send traces) but no longer the staff power of
their user (deleting runs): an ``admin`` token for that is made anew (README, JSON API)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("core", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(
                choices=[("read", "read"), ("write", "write"), ("admin", "admin")], default="write", max_length=8
            ),
        ),
    ]
