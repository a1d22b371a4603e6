"""The price table in the admin: add a model's prices, or change them, which saves a new version
(the old one stays: runs costed with it keep their costs until ``evalsite reprice``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.evals.models import ModelPrice
from apps.evals.results.costs import add_price_version


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in the stubs only
    list_display = (
        "model",
        "version",
        "input_usd_per_m",
        "output_usd_per_m",
        "cached_input_usd_per_m",
        "reasoning_usd_per_m",
        "created",
        "source",
    )
    search_fields = ("model",)
    readonly_fields = ("version", "created")
    list_per_page = 100

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a version is history: runs name it in the prices they were costed with

    def save_model(self, request: HttpRequest, obj: ModelPrice, form: Any, change: bool) -> None:
        """Every save is a new version of the model's prices (an edit never rewrites one)."""
        saved = add_price_version(
            model=obj.model,
            input_usd_per_m=obj.input_usd_per_m,
            output_usd_per_m=obj.output_usd_per_m,
            cached_input_usd_per_m=obj.cached_input_usd_per_m,
            reasoning_usd_per_m=obj.reasoning_usd_per_m,
            source=obj.source,
        )
        obj.pk, obj.version, obj.created = saved.pk, saved.version, saved.created
        obj._state.adding = False
