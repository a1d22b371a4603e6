"""Human reviews in the admin: read-only (reviews are written by their authors in the portal
and the API, never edited by someone else), with each review's history inline."""

from __future__ import annotations

from django.contrib import admin

from apps.core.admin import ReadOnlyAdmin
from apps.evals.models import Review, ReviewRevision


class ReviewRevisionInline(admin.TabularInline):  # type: ignore[type-arg]  # generic in the stubs only
    model = ReviewRevision
    extra = 0
    can_delete = False
    fields = ("verdict", "axis_scores", "comment", "saved", "replaced")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Review)
class ReviewAdmin(ReadOnlyAdmin):
    list_display = ("id", "eval_run", "case_id", "reviewer", "verdict", "updated")
    list_filter = ("verdict",)
    search_fields = ("case_id", "eval_run__id", "reviewer__username", "comment")
    list_select_related = ("eval_run", "reviewer")
    raw_id_fields = ("result", "eval_run")
    list_per_page = 100
    inlines = [ReviewRevisionInline]
