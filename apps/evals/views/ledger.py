"""Pages of the judge reliability ledger: a run's invocations by scorer, status and reason (with
the judge's cost), loaded into the run page; a set's flakiness report per judge."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from apps.core.access import viewer_required
from apps.core.pages import render_page
from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries.flakiness import flakiness
from apps.evals.queries.ledger import judges_side_by_side, run_ledger
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.forms import CompareForm


@require_GET
@viewer_required
def eval_run_ledger(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """A run's ledger: per scorer, invocations by status with coverage ``done / results``, the
    reasons of errored and skipped ones, calls and tokens, and the judge's cost on a line of its own."""
    eval_run = get_object_or_404(EvalRun, pk=run_id)
    context = {"eval_run": eval_run, "ledger": run_ledger(eval_run)}
    return render_page(request, "evals/ledger.html", context, {"ledger": "ledger"})


@require_GET
@viewer_required
def set_flakiness(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """A set's flakiness report (``?judge=MODEL`` narrows it to the runs that judge graded): flip
    rates per score and axis with Wilson intervals and coverage, and the flaky cases."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    judge_model = (request.GET.get("judge") or "").strip()[:200]
    report = flakiness(eval_set, judge_model=judge_model)
    context = {"eval_set": eval_set, "report": report}
    return render_page(request, "evals/flakiness.html", context, {"flakiness": "flakiness"})


@require_GET
@viewer_required
def compare_judges(request: HtmxHttpRequest) -> HttpResponse:
    """Both runs' judges side by side (loaded into the compare page): each judge's spec, verdict
    coverage, ledger and cost on a line of its own, their agreement and the cases they disagree on."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return TemplateResponse(request, "evals/_judges.html", {"judges": None}, status=400)
    judges = judges_side_by_side(form.cleaned_data["run_a"], form.cleaned_data["run_b"])
    return TemplateResponse(request, "evals/_judges.html", {"judges": judges})
