"""The judge ledger in the admin: invocations (read-only: the writer's rows) and the versioned
judge specs (read-only: a new alignment is a new version, never an edit)."""

from __future__ import annotations

from django.contrib import admin

from apps.core.admin import ReadOnlyAdmin
from apps.evals.models import JudgeSpecVersion, ScorerInvocation


@admin.register(ScorerInvocation)
class ScorerInvocationAdmin(ReadOnlyAdmin):
    list_display = (
        "scorer",
        "kind",
        "status",
        "reason",
        "eval_run",
        "case_id",
        "repeat_index",
        "trace_id",
        "latency_ms",
    )
    list_filter = ("status", "kind", "scorer")
    search_fields = ("case_id", "trace_id", "reason", "eval_run__id")
    list_select_related = ("eval_run",)
    list_per_page = 100
    show_full_result_count = False  # a COUNT over every invocation on each page is what the filters avoid


@admin.register(JudgeSpecVersion)
class JudgeSpecVersionAdmin(ReadOnlyAdmin):
    list_display = ("name", "version", "eval_set", "created")
    search_fields = ("name",)
