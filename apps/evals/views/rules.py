"""The rule-adherence blocks (issue 15): a run's per-rule aggregates and two runs' per-rule flips.

Both read every result's ``rule_adherence`` score, so the run and compare pages load them after
the page (``hx-trigger="load"``, with a plain link as the fallback), as the compare page does
with its per-scorer deltas; a case's own rules are on its page (:func:`.eval_runs.result_detail`).
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from apps.core.access import viewer_required
from apps.evals.models import EvalRun
from apps.evals.queries.rules import compare_rules, run_rule_aggregates
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.forms import CompareForm

FLIP_CASES_SHOWN = 20
"""Case links a flip row lists before "and N more" (the API lists every flip, paginated)."""


@require_GET
@viewer_required
def eval_run_rules(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Per rule across the run: honoured / ignored / absent / not-applicable shares, coverage."""
    eval_run = get_object_or_404(EvalRun, pk=run_id)
    context = {"eval_run": eval_run, "rules": run_rule_aggregates(eval_run)}
    return TemplateResponse(request, "evals/rules.html#run_rules", context)


@require_GET
@viewer_required
def compare_rule_flips(request: HtmxHttpRequest) -> HttpResponse:
    """Per-rule flips between runs ``a`` and ``b`` (e.g. ``honoured → rule_absent``), with their cases."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return TemplateResponse(request, "evals/rules.html#compare_rules", {"compare": None}, status=400)
    compare = compare_rules(form.cleaned_data["run_a"], form.cleaned_data["run_b"])
    context = {"compare": compare, "shown": FLIP_CASES_SHOWN}
    return TemplateResponse(request, "evals/rules.html#compare_rules", context)
