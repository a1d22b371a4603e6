"""Figure blocks loaded after their pages: a run's distributions (score, latency, tokens)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from apps.core.access import viewer_required
from apps.evals.models import EvalRun
from apps.evals.queries.figures import run_distributions
from apps.evals.views import HtmxHttpRequest


@require_GET
@viewer_required
def eval_run_distributions(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Histograms of the run's per-case score, latency and tokens with p50 / p95 marked."""
    eval_run = get_object_or_404(EvalRun, pk=run_id)
    context = {"eval_run": eval_run, "histograms": run_distributions(eval_run)}
    return TemplateResponse(request, "evals/distributions.html", context)
