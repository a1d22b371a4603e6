from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app shares: role checks, page rendering, API tokens (the lowest Django layer)."""

    name = "apps.core"
    label = "core"
    verbose_name = "Accounts and API tokens"
