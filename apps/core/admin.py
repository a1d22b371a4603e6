"""The read-only admin base every app's run-written rows use, and the API tokens' admin."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.core.models import ApiToken


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in the stubs only
    """Rows written by runs: browse and delete, never hand-edit."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ("name", "user", "prefix", "scope", "created", "last_used", "expires")
    list_filter = ("scope",)
    exclude = ("token_hash",)
    list_per_page = 100
