"""``ApiToken``, moved here from ``evals``: state only, on the existing ``evals_apitoken`` table
(created by ``evals.0001_initial``), so tokens made before the move keep working."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('evals', '0008_apitoken_moved_to_core'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApiToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100)),
                        ('prefix', models.CharField(max_length=12)),
                        ('token_hash', models.CharField(max_length=64, unique=True)),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('last_used', models.DateTimeField(blank=True, null=True)),
                        ('expires', models.DateTimeField(blank=True, null=True)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={'db_table': 'evals_apitoken'},
                ),
            ],
            database_operations=[],
        ),
    ]
