"""Playground sessions and messages in the admin (read-only: they are a record of what was said)."""

from __future__ import annotations

from django.contrib import admin

from apps.agents.models import Message, Session
from apps.core.admin import ReadOnlyAdmin


class MessageInline(admin.TabularInline):  # type: ignore[type-arg]  # generic in the stubs only
    model = Message
    fields = ("role", "content", "run", "created")
    readonly_fields = fields
    extra = 0
    can_delete = False
    raw_id_fields = ("run",)

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "target_id", "variant", "user", "created", "title")
    list_filter = ("target_id",)
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "role", "created")
    list_filter = ("role",)
    raw_id_fields = ("session", "run")
