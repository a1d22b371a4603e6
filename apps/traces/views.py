"""Trace pages: recent runs (payloads deferred) and one run's span tree."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from apps.core.access import can_capture, viewer_required
from apps.core.pages import render_page
from apps.traces.access import readable_runs
from apps.traces.otel_ingest import SOURCE
from apps.traces.queries import span_tree


@require_GET
@viewer_required
def trace_list(request: HttpRequest) -> HttpResponse:
    """Recent runs, optionally of one target; large JSON columns are not read."""
    runs = readable_runs(request.user).defer("final_answer", "metadata", "step_metrics").order_by("-started")
    target = request.GET.get("target", "")
    if target:
        runs = runs.filter(target_id=target)
    page = Paginator(runs, 50).get_page(request.GET.get("page") or 1)
    return render_page(request, "traces/list.html", {"page": page, "target": target}, {"traces-table": "table"})


@require_GET
@viewer_required
def trace_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: its output, error, tokens, and the span tree with timings, tool arguments and results."""
    # another member's playground conversation is a 404, as on the playground itself
    run = get_object_or_404(readable_runs(request.user), pk=pk)
    results = run.eval_results.select_related("eval_run").only(
        "id", "case_id", "status", "eval_run__id", "eval_run__variant"
    )
    ingested = (run.metadata or {}).get("source") == SOURCE
    context = {
        "run": run,
        "tree": span_tree(run),
        "results": results[:20],
        "ingested": ingested,
        # an ingested (OTLP) trace is real traffic: it can become an eval case, as a playground chat can
        "can_add_case": ingested and can_capture(request.user),
    }
    return render_page(request, "traces/detail.html", context)
