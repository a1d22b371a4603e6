"""Eval runs and their results in the admin: read-only. Dates show as everywhere in the portal
(``2026-12-05 18:31 UTC``: ``DATETIME_FORMAT`` of ``evalsite/formats/en/formats.py``)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.core.admin import ReadOnlyAdmin
from apps.evals.models import EvalResult, EvalRun


@admin.register(EvalRun)
class EvalRunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "name",
        "eval_set",
        "target_id",
        "variant",
        "split",
        "status",
        "n_done",
        "n_passed",
        "started",
    )
    list_filter = ("status", "split", "eval_set", "target_id")
    search_fields = ("id", "name", "target_id", "variant", "git_sha")
    list_select_related = ("eval_set",)
    list_per_page = 50
    show_full_result_count = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalRun]:
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name == "evals_evalrun_changelist":
            return qs.defer("summary", "config", "scorer_specs")
        return qs


@admin.register(EvalResult)
class EvalResultAdmin(ReadOnlyAdmin):
    list_display = ("id", "eval_run", "case_id", "status", "score", "split")
    list_filter = ("status", "split")
    search_fields = ("case_id", "eval_run__id")
    raw_id_fields = ("eval_run", "run")
    show_full_result_count = False  # a count over millions of results on every page is wasted work
    list_per_page = 100
    list_select_related = ("eval_run",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalResult]:
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name == "evals_evalresult_changelist":
            return qs.defer("scores", "expected")
        return qs
