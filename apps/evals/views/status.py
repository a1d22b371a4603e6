"""The status page: task workers, queues, running runs and the serve supervising the worker."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from apps.core.access import viewer_required
from apps.core.pages import page_sections, render_page
from apps.evals.views import HtmxHttpRequest
from apps.evals.worker.status import site_status


@require_GET
@viewer_required
def status(request: HtmxHttpRequest) -> HttpResponse:
    """``/status/``: every fact from the database (see ``apps.evals.worker.status``); the page refreshes its
    figures every 5 s (the ``status`` partial)."""
    sections = [html for _, html in page_sections.send(sender="status", request=request) if html]
    return render_page(
        request, "evals/status.html", {"status": site_status(), "sections": sections}, {"status": "status"}
    )
