from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "apps.traces"
    label = "traces"
    verbose_name = "Traces"
