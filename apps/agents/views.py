"""The playground: chat with a discovered target (each turn a traced run), then capture the
conversation as an eval case. Members only.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django import forms
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.agents import services
from apps.agents.models import InputMode, Session
from apps.evals.access import can_capture, can_use_playground, playground_required
from apps.evals.forms import JSONTextField
from apps.evals.models import EvalSet, Split
from apps.evals.views import discovered_targets, render_page


class NewSessionForm(forms.Form):
    target = forms.ChoiceField(choices=[])
    variant = forms.CharField(required=False, max_length=200)
    input_mode = forms.ChoiceField(
        choices=[("auto", "auto: what the target declares (input_kind)"), *InputMode.choices],
        initial="auto",
        required=False,
        label="send",
        help_text="what the target receives each turn: match the inputs of its eval set",
    )

    def __init__(self, *args: Any, targets: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.targets = targets or {}
        self.fields["target"].choices = [(t, t) for t in self.targets]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        spec = self.targets.get(data.get("target") or "")
        variant = (data.get("variant") or "").strip()
        if spec is not None and spec.variants and variant and variant not in spec.variants:
            self.add_error("variant", f"no variant {variant!r} (variants: {', '.join(spec.variants)})")
        data["variant"] = variant
        if data.get("input_mode") in ("", "auto", None):
            data["input_mode"] = spec.input_kind if spec is not None else "conversation"
        return data


class ChatForm(forms.Form):
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=20000, label="message")


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


def _get_session_for_user(request: HttpRequest, session_id: int) -> Session:
    """The session, if it is the user's own (others' sessions are 404, staff see all)."""
    sessions = Session.objects.all() if request.user.is_staff else Session.objects.filter(user=request.user)
    return get_object_or_404(sessions, pk=session_id)


@require_GET
@playground_required
def playground(request: HttpRequest) -> HttpResponse:
    targets, problems = discovered_targets()
    context = {
        "form": NewSessionForm(targets=targets),
        "targets": targets,
        "problems": problems,
        "sessions": Session.objects.filter(user=request.user)[:20],
    }
    return render_page(request, "agents/playground.html", context)


@require_POST
@playground_required
def new_session(request: HttpRequest) -> HttpResponse:
    targets, problems = discovered_targets()
    form = NewSessionForm(request.POST, targets=targets)
    if not form.is_valid():
        context = {"form": form, "targets": targets, "problems": problems, "sessions": Session.objects.none()}
        return TemplateResponse(request, "agents/playground.html", context, status=400)
    session = services.start_session(
        user=request.user,
        target_id=form.cleaned_data["target"],
        variant=form.cleaned_data["variant"],
        input_mode=form.cleaned_data["input_mode"],
    )
    return redirect("agents:session", session.pk)


def _session_context(session: Session, form: ChatForm | None = None) -> dict[str, Any]:
    return {
        "session": session,
        "messages": session.messages.select_related("run").order_by("id"),
        "form": form or ChatForm(),
    }


@require_GET
@playground_required
def session_detail(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _get_session_for_user(request, session_id)
    return render_page(request, "agents/session.html", _session_context(session), {"chat": "chat"})


@require_POST
async def send_message(request: HttpRequest, session_id: int) -> HttpResponse:
    """Run one turn; htmx gets the refreshed chat partial, a plain post is redirected back.

    Async (with the access checks of ``playground_required`` done inline): a turn waits on the
    target for up to its timeout, and a sync view would hold the server's one shared thread
    for sync views, freezing every other page meanwhile.
    """
    user = await request.auser()
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not await sync_to_async(can_use_playground)(user):
        raise PermissionDenied("you need the member role to use the playground")
    session = await sync_to_async(_get_session_for_user)(request, session_id)
    form = ChatForm(request.POST)
    status = 200
    error = ""
    if form.is_valid():
        try:
            await services.achat_turn(session=session, content=form.cleaned_data["content"])
            form = ChatForm()
        except services.BadInputError as exc:
            form.add_error("content", str(exc))
            status = 400
        except LookupError as exc:
            error, status = str(exc), 409
    else:
        status = 400
    if not getattr(request, "htmx", False) and status == 200:
        return redirect("agents:session", session.pk)
    context = {**await sync_to_async(_session_context)(session, form), "error": error}
    template = "agents/session.html#chat" if getattr(request, "htmx", False) else "agents/session.html"
    return TemplateResponse(request, template, context, status=status)


@require_http_methods(["GET", "POST"])
@playground_required
def capture(request: HttpRequest, session_id: int) -> HttpResponse:
    """Add this conversation as an eval case (the expected value pre-filled, editable)."""
    if not can_capture(request.user):
        raise PermissionDenied("you need the capture permission")
    session = _get_session_for_user(request, session_id)
    defaults = services.captured_defaults(session)
    if request.method == "POST":
        form = CaptureForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                case = services.capture_session_as_case(
                    session=session,
                    eval_set=data["eval_set"],
                    split=data["split"],
                    tags=data["tags"],
                    case_id=data["case_id"],
                    input=data["input"],
                    expected=data["expected"],
                    user=request.user,
                )
            except services.DuplicateCaseError as exc:
                form.add_error("case_id", str(exc))
            except ValueError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"case {case.case_id!r} added to set {case.eval_set} ({case.split})")
                url = reverse("evals:set", args=[case.eval_set_id]) + "?" + urlencode({"q": case.case_id})
                return redirect(url)
    else:
        form = CaptureForm(
            initial={
                "case_id": f"playground-{session.pk}",
                "input": defaults["input"],
                "expected": defaults["expected"],
                "split": "dev",
            }
        )
    status = 400 if request.method == "POST" else 200
    context = {"session": session, "form": form, "run_ids": defaults["run_ids"]}
    return (
        render_page(request, "agents/capture.html", context)
        if status == 200
        else TemplateResponse(request, "agents/capture.html", context, status=status)
    )
