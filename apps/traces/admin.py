"""Runs and events are written by runs: read-only in the admin; event payloads stay unread in lists."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.core.admin import ReadOnlyAdmin
from apps.traces.models import Event, Run


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("run_id", "target_id", "status", "elapsed_ms", "tokens_in", "tokens_out", "started")
    list_filter = ("status", "target_id")
    search_fields = ("run_id", "trace_id")
    show_full_result_count = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        qs = super().get_queryset(request)
        # The change page shows everything; the list does not read the large JSON columns.
        return (
            qs
            if request.resolver_match and "change" in (request.resolver_match.url_name or "")
            else qs.defer("final_answer", "metadata", "step_metrics")
        )


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("run", "seq", "type", "name", "preview", "payload_bytes", "ts")
    list_filter = ("type",)
    search_fields = ("run__run_id", "name")
    list_select_related = ("run",)
    raw_id_fields = ("run",)
    show_full_result_count = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Event]:
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name == "traces_event_changelist":
            return qs.defer("payload", "run__final_answer", "run__metadata", "run__step_metrics")
        return qs
