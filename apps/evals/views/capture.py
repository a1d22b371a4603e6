"""The capture pages: add a playground conversation (``agents:capture``, under the
playground's URLs) or an ingested OTLP trace (``traces:capture``, under the trace pages') as an
eval case; see ``evalsite.urls``. Users with the capture permission only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods

from apps.agents.registry import load_target
from apps.agents.views import get_session_for_user
from apps.core.access import can_capture, playground_required, viewer_required
from apps.core.forms import JSONTextField, ascii_int
from apps.core.pages import render_page
from apps.evals.models import EvalCase, EvalSet, Split
from apps.evals.sets.capture import (
    DuplicateCaseError,
    add_captured_case,
    capture_session_as_case,
    captured_defaults,
    conversation_defaults,
    expected_shape,
    usual_set_id,
)
from apps.evals.sets.tag_text import TagsTextField
from apps.evals.sets.trace_capture import is_ingested, trace_case_metadata, trace_defaults
from apps.evals.worker.caseruns import CaseRunRefused, start_case_run
from apps.traces.access import readable_runs
from evalcore.discovery import TargetSpec
from evalcore.targets import ResolvedTarget


class CaptureForm(forms.Form):
    """The captured case, editable before saving (input and expected as JSON)."""

    eval_set = forms.ModelChoiceField(queryset=EvalSet.objects.all(), label="set")
    case_id = forms.CharField(max_length=300)
    split = forms.ChoiceField(choices=Split.choices, initial="dev")
    tags = TagsTextField(help_text="comma-separated")
    input = JSONTextField()
    expected = JSONTextField(required=False, help_text="final answer and tool trajectory; edit as needed")


_CASE_FIELDS = ("eval_set", "split", "tags", "case_id", "input", "expected")


def _case_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The captured case's fields from a valid :class:`CaptureForm`'s cleaned data."""
    return {name: data[name] for name in _CASE_FIELDS}


@dataclass(slots=True)
class _Source:
    """What a capture page turns into a case: a playground conversation or an ingested trace."""

    heading: str
    back_url: str
    back_label: str
    action_url: str
    default_case_id: str
    target_id: str
    variant: str
    defaults: Callable[[EvalSet | None], dict[str, Any]]
    save: Callable[[dict[str, Any], Any], EvalCase]
    can_run: bool = True
    # a playground conversation: the other way to capture it (whole / last turn), and a warning
    # when the whole conversation goes to a target that cannot play it turn by turn
    switch_url: str = ""
    switch_label: str = ""
    conversation_note: str = ""


def _target_spec(target_id: str) -> TargetSpec | None:
    try:
        return load_target(target_id)
    except (LookupError, FileNotFoundError):
        return None


def _resolved(target_id: str, variant: str) -> ResolvedTarget | None:
    """The target a capture would run against (``None``: not declared, or an unknown variant)."""
    spec = _target_spec(target_id)
    if spec is None:
        return None
    try:
        return spec.resolve(variant or None)[0]
    except (LookupError, ValueError):
        return None


def _capture_set(request: HttpRequest, target_id: str) -> EvalSet | None:
    """The set the capture form is for: the one picked (``eval_set``), else the set the
    target was last run on, else its ``default_set`` (by file name), else the first."""
    picked = request.POST.get("eval_set") or request.GET.get("eval_set") or ""
    picked_pk = ascii_int(picked)
    if picked_pk is not None:
        chosen = EvalSet.objects.filter(pk=picked_pk).first()
        if chosen is not None:
            return chosen
    set_id = usual_set_id(target_id, _target_spec(target_id))
    return EvalSet.objects.filter(pk=set_id).first() if set_id else EvalSet.objects.first()


def _capture_page(request: HttpRequest, source: _Source) -> HttpResponse:
    """The capture form: the expected value pre-filled in the shape of the set's cases and
    checked against it before saving; "Save and run it" then runs the new case against the
    source's target at once (its live run page)."""
    eval_set = _capture_set(request, source.target_id)
    defaults = source.defaults(eval_set)
    shape = expected_shape(eval_set) if eval_set is not None else None
    if request.method == "POST":
        form = CaptureForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                case = source.save(data, request.user)
            except DuplicateCaseError as exc:
                form.add_error("case_id", str(exc))
            except ValueError as exc:
                field = getattr(exc, "field", None)
                if isinstance(field, str) and field not in form.fields:
                    # a JSON path in a conversation case ("input.turns[1]"): shown beside its field
                    root = field.split(".")[0].split("[")[0]
                    field = root if root in form.fields else None
                if field not in form.fields:
                    field = "expected" if "expected" in str(exc) else None
                form.add_error(field, str(exc))
            else:
                messages.success(request, f"case {case.case_id!r} added to set {case.eval_set} ({case.split})")
                if request.POST.get("then") == "run" and source.can_run:
                    try:
                        eval_run = start_case_run(
                            eval_set=case.eval_set,
                            case_id=case.case_id,
                            target_id=source.target_id,
                            variant=source.variant,
                            user=request.user,
                        )
                    except CaseRunRefused as exc:
                        messages.warning(request, f"the case is saved but could not be run: {exc}")
                    else:
                        return redirect("evals:eval_run", eval_run.id)
                url = reverse("evals:set", args=[case.eval_set_id]) + "?" + urlencode({"q": case.case_id})
                return redirect(url)
    else:
        if defaults["input"] is None:  # say so rather than offer the input `null`
            messages.warning(
                request,
                "no input was found in this source (no input messages on its spans or turns): type the case's "
                "input below",
            )
        form = CaptureForm(
            initial={
                "eval_set": eval_set,
                "case_id": request.GET.get("case_id") or source.default_case_id,
                # as JSON text: a string value must stay a JSON string ("11"), not become 11
                "input": ""
                if defaults["input"] is None
                else json.dumps(defaults["input"], indent=2, ensure_ascii=False),
                "expected": ""
                if defaults["expected"] is None
                else json.dumps(defaults["expected"], indent=2, ensure_ascii=False),
                "split": request.GET.get("split") or "dev",
                "tags": request.GET.get("tags") or "",
            }
        )
    status = 400 if request.method == "POST" else 200
    context: dict[str, Any] = {
        "source": source,
        "form": form,
        "run_ids": defaults["run_ids"],
        "shape": shape,
        "eval_set": eval_set,
        # a conversation case: the turns offered from the chat, shown beside the JSON to edit
        "turns": defaults.get("turns"),
    }
    return (
        # picking another set re-fills only the expected value (the other fields keep their input)
        render_page(request, "agents/capture.html", context, {"expected-block": "expected_block"})
        if status == 200
        else TemplateResponse(request, "agents/capture.html", context, status=status)
    )


@require_http_methods(["GET", "POST"])
@playground_required
def capture(request: HttpRequest, session_id: int) -> HttpResponse:
    """Add this conversation as an eval case (see :func:`_capture_page`)."""

    if not can_capture(request.user):
        raise PermissionDenied("you need the capture permission")
    session = get_session_for_user(request, session_id)
    whole = request.GET.get("capture") != "last"

    def save(data: dict[str, Any], user: Any) -> EvalCase:
        return capture_session_as_case(session=session, user=user, **_case_fields(data))

    here = reverse("agents:capture", args=[session.pk])
    switch_url = switch_label = note = ""
    if conversation_defaults(session) is not None:
        if whole:
            switch_url, switch_label = f"{here}?capture=last", "capture only the last turn instead"
            resolved = _resolved(session.target_id, session.variant)
            if resolved is not None and not resolved.conversational:
                note = (
                    f"{session.target_id} is not a conversational target (a function with a 'session' parameter, or "
                    "an object with conversational = True): it is called once with the whole conversation and must "
                    "answer every turn, else running this case errors"
                )
        else:
            switch_url, switch_label = here, "capture the whole conversation (one case, every turn)"
    source = _Source(
        heading="Add this conversation as an eval case",
        back_url=reverse("agents:session", args=[session.pk]),
        back_label="← back to the chat",
        action_url=here if whole else f"{here}?capture=last",
        default_case_id=f"playground-{session.pk}",
        target_id=session.target_id,
        variant=session.variant,
        defaults=lambda eval_set: captured_defaults(session, eval_set, whole=whole),
        save=save,
        switch_url=switch_url,
        switch_label=switch_label,
        conversation_note=note,
    )
    return _capture_page(request, source)


@require_http_methods(["GET", "POST"])
@viewer_required
def trace_capture(request: HttpRequest, pk: int) -> HttpResponse:
    """Add an ingested (OTLP) trace as an eval case: real traffic captured like a playground
    conversation. "Save and run it" is offered when the trace's service is an Evalsite target."""
    if not can_capture(request.user):
        raise PermissionDenied("you need the capture permission")
    run = get_object_or_404(readable_runs(request.user), pk=pk)
    if not is_ingested(run):
        raise Http404("only traces sent to the OTLP endpoint are added as cases here")

    def save(data: dict[str, Any], user: Any) -> EvalCase:
        return add_captured_case(metadata=trace_case_metadata(run, user), user=user, **_case_fields(data))

    source = _Source(
        heading="Add this trace as an eval case",
        back_url=reverse("traces:detail", args=[run.pk]),
        back_label="← back to the trace",
        action_url=reverse("traces:capture", args=[run.pk]),
        default_case_id=f"trace-{run.trace_id[:16]}",
        target_id=run.target_id,
        variant="",
        defaults=lambda eval_set: trace_defaults(run, eval_set),
        save=save,
        can_run=_target_spec(run.target_id) is not None,
    )
    return _capture_page(request, source)


urlpatterns = [
    path("<int:session_id>/capture/", capture, name="capture"),
]
"""Routes joined to the playground's (namespace ``agents``) by ``evalsite.urls``."""

trace_urlpatterns = [
    path("<int:pk>/capture/", trace_capture, name="capture"),
]
"""Routes joined to the trace pages' (namespace ``traces``) by ``evalsite.urls``."""
