"""The capture page: add a playground conversation as an eval case (served under the
playground's URLs as ``agents:capture``, see ``evalsite.urls``). Members with the capture
permission only.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods

from apps.agents.models import Session
from apps.agents.registry import load_target
from apps.agents.views import get_session_for_user
from apps.core.access import can_capture, playground_required
from apps.core.forms import JSONTextField
from apps.core.pages import render_page
from apps.evals.capture import (
    DuplicateCaseError,
    capture_session_as_case,
    captured_defaults,
    expected_shape,
    usual_set_id,
)
from apps.evals.caseruns import CaseRunRefused, start_case_run
from apps.evals.models import EvalSet, Split
from evalcore.discovery import TargetSpec


class CaptureForm(forms.Form):
    """The captured case, editable before saving (input and expected as JSON)."""

    eval_set = forms.ModelChoiceField(queryset=EvalSet.objects.all(), label="set")
    case_id = forms.CharField(max_length=300)
    split = forms.ChoiceField(choices=Split.choices, initial="dev")
    tags = forms.CharField(required=False, max_length=500, help_text="comma-separated")
    input = JSONTextField()
    expected = JSONTextField(required=False, help_text="final answer and tool trajectory; edit as needed")

    def clean_tags(self) -> list[str]:
        return [t.strip() for t in (self.cleaned_data.get("tags") or "").split(",") if t.strip()]


def _capture_set(request: HttpRequest, session: Session) -> EvalSet | None:
    """The set the capture form is for: the one picked (``eval_set``), else the set the
    session's target was last run on, else its ``default_set`` (by file name), else the first."""
    picked = request.POST.get("eval_set") or request.GET.get("eval_set") or ""
    if picked.isdigit():
        chosen = EvalSet.objects.filter(pk=int(picked)).first()
        if chosen is not None:
            return chosen
    try:
        spec: TargetSpec | None = load_target(session.target_id)
    except (LookupError, FileNotFoundError):
        spec = None
    set_id = usual_set_id(session.target_id, spec)
    return EvalSet.objects.filter(pk=set_id).first() if set_id else EvalSet.objects.first()


@require_http_methods(["GET", "POST"])
@playground_required
def capture(request: HttpRequest, session_id: int) -> HttpResponse:
    """Add this conversation as an eval case: the expected value pre-filled in the shape of the
    set's cases and checked against it before saving; "Save and run it" then runs the new case
    against the session's target at once (its live run page)."""

    if not can_capture(request.user):
        raise PermissionDenied("you need the capture permission")
    session = get_session_for_user(request, session_id)
    eval_set = _capture_set(request, session)
    defaults = captured_defaults(session, eval_set)
    shape = expected_shape(eval_set) if eval_set is not None else None
    if request.method == "POST":
        form = CaptureForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                case = capture_session_as_case(
                    session=session,
                    eval_set=data["eval_set"],
                    split=data["split"],
                    tags=data["tags"],
                    case_id=data["case_id"],
                    input=data["input"],
                    expected=data["expected"],
                    user=request.user,
                )
            except DuplicateCaseError as exc:
                form.add_error("case_id", str(exc))
            except ValueError as exc:
                form.add_error("expected" if "expected" in str(exc) else None, str(exc))
            else:
                messages.success(request, f"case {case.case_id!r} added to set {case.eval_set} ({case.split})")
                if request.POST.get("then") == "run":
                    try:
                        eval_run = start_case_run(
                            eval_set=case.eval_set,
                            case_id=case.case_id,
                            target_id=session.target_id,
                            variant=session.variant,
                            user=request.user,
                        )
                    except CaseRunRefused as exc:
                        messages.warning(request, f"the case is saved but could not be run: {exc}")
                    else:
                        return redirect("evals:eval_run", eval_run.id)
                url = reverse("evals:set", args=[case.eval_set_id]) + "?" + urlencode({"q": case.case_id})
                return redirect(url)
    else:
        form = CaptureForm(
            initial={
                "eval_set": eval_set,
                "case_id": request.GET.get("case_id") or f"playground-{session.pk}",
                # as JSON text: a string value must stay a JSON string ("11"), not become 11
                "input": json.dumps(defaults["input"], indent=2, ensure_ascii=False),
                "expected": ""
                if defaults["expected"] is None
                else json.dumps(defaults["expected"], indent=2, ensure_ascii=False),
                "split": request.GET.get("split") or "dev",
                "tags": request.GET.get("tags") or "",
            }
        )
    status = 400 if request.method == "POST" else 200
    context: dict[str, Any] = {
        "session": session,
        "form": form,
        "run_ids": defaults["run_ids"],
        "shape": shape,
        "eval_set": eval_set,
    }
    return (
        # picking another set re-fills only the expected value (the other fields keep their input)
        render_page(request, "agents/capture.html", context, {"expected-block": "expected_block"})
        if status == 200
        else TemplateResponse(request, "agents/capture.html", context, status=status)
    )


urlpatterns = [
    path("<int:session_id>/capture/", capture, name="capture"),
]
"""Routes joined to the playground's (namespace ``agents``) by ``evalsite.urls``."""
