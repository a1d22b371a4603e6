"""Issue 27: the versioned price table (``ModelPrice``) and each case's stored cost and latency
(``CaseCost``), and the starting table every new install is seeded with (version 1 of each model).

The seed is data, not a fetch: the figures below were copied by hand from the vendors' public price
pages (USD per million tokens, standard tier, no batch discount) as read on the date in
:data:`SEED_SOURCE`; ``docs/costs.md`` lists the same table. Edit prices in the admin (a change
makes a new version); never here.
"""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

SEED_SOURCE = "vendor price pages (openai.com/api/pricing, anthropic.com/pricing), read 2025-08-20"
"""Where the seed came from and when it was read."""

SEED_PRICES: tuple[tuple[str, str, str, str, str], ...] = (
    # model, input, output, cached input, reasoning (USD per million tokens)
    ("gpt-4o", "2.50", "10.00", "1.25", "10.00"),
    ("gpt-4o-mini", "0.15", "0.60", "0.075", "0.60"),
    ("gpt-4.1", "2.00", "8.00", "0.50", "8.00"),
    ("gpt-4.1-mini", "0.40", "1.60", "0.10", "1.60"),
    ("gpt-4.1-nano", "0.10", "0.40", "0.025", "0.40"),
    ("gpt-5", "1.25", "10.00", "0.125", "10.00"),
    ("gpt-5-mini", "0.25", "2.00", "0.025", "2.00"),
    ("gpt-5-nano", "0.05", "0.40", "0.005", "0.40"),
    ("o3", "2.00", "8.00", "0.50", "8.00"),
    ("o4-mini", "1.10", "4.40", "0.275", "4.40"),
    ("claude-opus-4-1", "15.00", "75.00", "1.50", "75.00"),
    ("claude-sonnet-4-0", "3.00", "15.00", "0.30", "15.00"),
    ("claude-3-5-haiku-latest", "0.80", "4.00", "0.08", "4.00"),
    # the bundled offline model runs on this machine: no per-token price
    ("local:smollm2", "0", "0", "0", "0"),
)
"""The starting table: one version-1 row per model."""


def seed_prices(apps: Any, schema_editor: Any) -> None:
    """Add version 1 of every seeded model that has no price yet (prices someone added stay)."""
    ModelPrice = apps.get_model("evals", "ModelPrice")
    have = set(ModelPrice.objects.values_list("model", flat=True))
    ModelPrice.objects.bulk_create(
        ModelPrice(
            model=model,
            version=1,
            input_usd_per_m=inp,
            output_usd_per_m=out,
            cached_input_usd_per_m=cached,
            reasoning_usd_per_m=reasoning,
            source=SEED_SOURCE,
        )
        for model, inp, out, cached, reasoning in SEED_PRICES
        if model not in have
    )


class Migration(migrations.Migration):
    dependencies = [("evals", "0024_run_numbers_names")]

    operations = [
        migrations.CreateModel(
            name="ModelPrice",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("model", models.CharField(max_length=200)),
                ("version", models.PositiveIntegerField()),
                ("input_usd_per_m", models.DecimalField(decimal_places=6, max_digits=12)),
                ("output_usd_per_m", models.DecimalField(decimal_places=6, max_digits=12)),
                ("cached_input_usd_per_m", models.DecimalField(decimal_places=6, max_digits=12)),
                ("reasoning_usd_per_m", models.DecimalField(decimal_places=6, max_digits=12)),
                ("source", models.CharField(blank=True, default="", max_length=300)),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["model", "-version"],
                "constraints": [models.UniqueConstraint(fields=("model", "version"), name="modelprice_unique_version")],
            },
        ),
        migrations.CreateModel(
            name="CaseCost",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("target_model", models.CharField(blank=True, default="", max_length=200)),
                ("target_usd", models.FloatField(blank=True, null=True)),
                ("judge_usd", models.FloatField(blank=True, null=True)),
                ("judge_calls", models.IntegerField(default=0)),
                ("simulator_usd", models.FloatField(blank=True, null=True)),
                ("simulator_calls", models.IntegerField(default=0)),
                ("total_usd", models.FloatField(blank=True, null=True)),
                ("tokens_estimated", models.BooleanField(default=False)),
                ("wall_ms", models.FloatField(blank=True, null=True)),
                ("model_ms", models.FloatField(blank=True, null=True)),
                ("ttft_ms", models.FloatField(blank=True, null=True)),
                (
                    "eval_run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="case_costs",
                        to="evals.evalrun",
                    ),
                ),
                (
                    "result",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="cost", to="evals.evalresult"
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["eval_run", "wall_ms"], name="casecost_run_wall"),
                ],
            },
        ),
        migrations.RunPython(seed_prices, migrations.RunPython.noop),
    ]
