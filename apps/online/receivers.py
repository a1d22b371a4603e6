"""What this app listens to: new ingested traces, and the trace page asking for sections."""

from __future__ import annotations

from typing import Any

from django.utils.safestring import SafeString

from apps.core.pages import page_sections
from apps.traces.signals import trace_page_sections, traces_ingested

# apps.online.tasks and apps.online.views are imported by the receivers, when a signal comes:
# importing them here (the scoring services, the judge's model client) cost every command's
# start-up ~0.3 s, `evalsite eval` included (issue 30)

_UID = "apps.online"


def connect() -> None:
    """Connect the receivers (called once from ``OnlineConfig.ready``)."""
    traces_ingested.connect(on_traces_ingested, dispatch_uid=f"{_UID}.ingested")
    trace_page_sections.connect(on_trace_page, dispatch_uid=f"{_UID}.trace_page")
    page_sections.connect(on_page, dispatch_uid=f"{_UID}.page")


def on_traces_ingested(sender: Any, run_ids: list[str], **kwargs: Any) -> None:
    """Enqueue the new traces for the active rules (matching and scoring run in the worker)."""
    from apps.online.tasks import enqueue_traces

    enqueue_traces(run_ids)


def on_trace_page(sender: Any, run: Any, request: Any, **kwargs: Any) -> SafeString | str:
    """The trace's online scores section (``""`` when no rule matched it)."""
    from apps.online.views import trace_scores_section

    return trace_scores_section(request, run)


def on_page(sender: Any, request: Any, **kwargs: Any) -> SafeString | str:
    """The status page's "Alerts" section (the latest firings)."""
    if sender != "status":
        return ""
    from apps.online.views import status_section

    return status_section(request)
