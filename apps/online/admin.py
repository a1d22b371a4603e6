"""Authoring rules and alerts in the admin; scores and firings are read-only there."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from apps.online.models import Alert, AlertFiring, OnlineScore, ScoringRule
from apps.online.services import check_rule_fields
from evalcore.errors import InvalidInputError


class ScoringRuleForm(forms.ModelForm[ScoringRule]):
    """The admin's rule form: the same checks as the API and the portal (scorer specs that build,
    a rate in 0..1), each error shown on its field."""

    class Meta:
        model = ScoringRule
        fields = "__all__"

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        keys = ("scorers", "sample_rate", "window_minutes", "attributes", "tags")
        try:
            check_rule_fields({k: data[k] for k in keys if k in data and data[k] is not None})
        except InvalidInputError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, str(exc))
        return data


class AlertInline(admin.TabularInline[Alert, ScoringRule]):
    model = Alert
    extra = 0
    fields = [
        "name",
        "score_name",
        "direction",
        "min_effect",
        "alpha",
        "min_n",
        "consecutive",
        "baseline_hours",
        "webhook_url",
        "payload_format",
        "active",
    ]


@admin.register(ScoringRule)
class ScoringRuleAdmin(admin.ModelAdmin[ScoringRule]):
    list_display = ["name", "active", "service", "target", "model", "sample_rate", "window_minutes", "created"]
    list_filter = ["active"]
    search_fields = ["name", "service", "target"]
    inlines = [AlertInline]
    raw_id_fields = ["owner", "reference_set"]

    form = ScoringRuleForm

    def save_model(self, request: HttpRequest, obj: ScoringRule, form: Any, change: bool) -> None:
        if not change and obj.owner is None:
            obj.owner = request.user  # type: ignore[assignment]  # the admin's user is logged in
        super().save_model(request, obj, form, change)


@admin.register(OnlineScore)
class OnlineScoreAdmin(admin.ModelAdmin[OnlineScore]):
    list_display = ["rule", "run", "window_start", "sampled", "state", "reason", "passed", "attempts"]
    list_filter = ["state", "reason", "rule"]
    raw_id_fields = ["rule", "run"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AlertFiring)
class AlertFiringAdmin(admin.ModelAdmin[AlertFiring]):
    list_display = ["alert", "fired_at", "window_start", "delivery", "delivery_attempts"]
    list_filter = ["delivery"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
