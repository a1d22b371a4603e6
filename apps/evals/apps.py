from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig
from django.conf import settings

if TYPE_CHECKING:
    from evalcore.discovery import TargetSpec


def export_finished_run(sender: Any, **kwargs: Any) -> None:
    """``eval_run_finished`` listener: with ``EVALSITE_OTLP_ENDPOINT`` set, hand the run to
    :func:`apps.evals.exports.otel.on_eval_run_finished`. The OpenTelemetry SDK is imported only
    then: a command-line run without an endpoint never loads it (start-up time)."""
    if not settings.EVALSITE_OTLP_ENDPOINT:
        return
    from apps.evals.exports.otel import on_eval_run_finished

    on_eval_run_finished(sender, **kwargs)


class _CaseExamples:
    """The playground's example source (:class:`apps.evals.sets.capture.EvalCaseExamples`),
    imported on its first question: the capture module pulls in the playground's services and
    the case editors, which a command-line run never asks for (start-up time, issue 30)."""

    def sample_input(self, target_id: str, spec: TargetSpec | None) -> Any:
        from apps.evals.sets.capture import EvalCaseExamples

        return EvalCaseExamples().sample_input(target_id, spec)

    def case_input(self, case_pk: int) -> Any:
        from apps.evals.sets.capture import EvalCaseExamples

        return EvalCaseExamples().case_input(case_pk)


def _store_cache_figures(sender: Any, **kwargs: Any) -> None:
    """``eval_run_finished`` listener: :func:`apps.evals.runs.target_cache.store_cache_figures`,
    imported on the first finished run (not at start-up)."""
    from apps.evals.runs.target_cache import store_cache_figures

    store_cache_figures(sender, **kwargs)


def _on_results_written(sender: Any, **kwargs: Any) -> None:
    """Push to the live pages (``apps.evals.views.live``, imported on the first push: it imports
    channels, which a command-line run that no page watches never needs; issue 30). Without a
    Redis channel layer the push is a no-op (``notify_eval_run``): nothing is imported."""
    backend = str(getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND", ""))
    if "redis" not in backend.lower():  # as apps.evals.views.live.redis_layer_configured
        return
    from apps.evals.views.live import on_results_written

    on_results_written(sender, **kwargs)


class EvalsConfig(AppConfig):
    name = "apps.evals"
    label = "evals"
    verbose_name = "Evals"

    def ready(self) -> None:
        # Imported here, not at the top: they import models, which need the app registry ready.
        from apps.agents.examples import set_example_source
        from apps.evals import checks  # noqa: F401 - registers the system checks
        from apps.evals.events import eval_run_finished, results_written

        # the store sends, the live pages' consumers listen (the store never imports them)
        results_written.connect(_on_results_written, dispatch_uid="evals.consumers.on_results_written")
        # a finished run's traces go out over OTLP when EVALSITE_OTLP_ENDPOINT is set
        eval_run_finished.connect(export_finished_run, dispatch_uid="evals.otel_export.on_eval_run_finished")
        # a run that used the target cache keeps its cached count and called cases' time (leaderboard)
        eval_run_finished.connect(_store_cache_figures, dispatch_uid="evals.target_cache.store_cache_figures")
        # the playground's example inputs come from eval cases (agents never import evals)
        set_example_source(_CaseExamples())
