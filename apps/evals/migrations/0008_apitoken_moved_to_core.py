"""``ApiToken`` moves to the ``core`` app: state only, the table and its rows stay."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('evals', '0007_apitoken_expiry'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='ApiToken')],
            database_operations=[],
        ),
    ]
