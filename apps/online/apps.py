"""Online scoring of ingested traces and the alerts on their scores (docs/online.md)."""

from __future__ import annotations

from django.apps import AppConfig


class OnlineConfig(AppConfig):
    name = "apps.online"
    label = "online"
    verbose_name = "Online scoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # the traces floor emits, this floor listens (apps.traces never imports apps.online)
        from apps.online import receivers

        receivers.connect()
