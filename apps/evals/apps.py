from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "apps.evals"
    label = "evals"
    verbose_name = "Evals"

    def ready(self) -> None:
        from apps.evals import checks  # noqa: F401 - registers the system checks
