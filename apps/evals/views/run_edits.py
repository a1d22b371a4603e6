"""People's edits of an eval run (issue 13 §2): name and notes, the pinned baseline (members),
and delete with a confirmation page (staff)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods, require_POST

from apps.core.access import member_required, role_required
from apps.evals.models import EvalRun
from apps.evals.runs.edits import delete_eval_run, deletion_preview, edit_eval_run, pin_baseline
from apps.evals.views import HtmxHttpRequest
from evalcore.errors import EvalsiteError


@require_POST
@member_required
def edit_eval_run_view(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Save the run's name and notes (members); back to the run page with what happened."""
    eval_run = get_object_or_404(EvalRun, pk=run_id)
    try:
        edit_eval_run(eval_run, name=request.POST.get("name", ""), notes=request.POST.get("notes", ""))
    except EvalsiteError as exc:
        messages.error(request, f"Not saved: {exc}")
    else:
        messages.success(request, "Name and notes saved.")
    return redirect("evals:eval_run", run_id=eval_run.pk)


@require_POST
@member_required
def pin_eval_run(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Pin the run as its set and target's baseline (``pinned=1``) or unpin it (members)."""
    eval_run = get_object_or_404(EvalRun, pk=run_id)
    pinned = request.POST.get("pinned") == "1"
    try:
        pin_baseline(eval_run, pinned)
    except EvalsiteError as exc:
        messages.error(request, f"Not pinned: {exc}")
        return redirect("evals:eval_run", run_id=eval_run.pk)
    if pinned:
        messages.success(request, f"Pinned as the baseline of {eval_run.target_id} on this set.")
    else:
        messages.success(request, "Unpinned.")
    return redirect("evals:eval_run", run_id=eval_run.pk)


@require_http_methods(["GET", "POST"])
@role_required(lambda user: bool(user.is_staff), "only staff can delete runs")
def delete_eval_run_view(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    """Staff only: GET asks for confirmation (what will be removed), POST deletes."""
    eval_run = get_object_or_404(EvalRun.objects.select_related("eval_set"), pk=run_id)
    if request.method == "GET":
        context = {"eval_run": eval_run, "deleted": deletion_preview(eval_run)}
        return TemplateResponse(request, "evals/run_delete.html", context)
    try:
        deleted = delete_eval_run(eval_run)
    except EvalsiteError as exc:
        messages.error(request, f"Not deleted: {exc}")
        return redirect("evals:eval_run", run_id=eval_run.pk)
    messages.success(request, f"Deleted run {run_id}: {deleted.results} result(s) and {deleted.traces} trace(s).")
    return redirect("evals:eval_runs")
