"""The playground: chat with a discovered target (each turn a traced run). Members only.

Capturing the conversation as an eval case is an evals page (``apps.evals.views.capture``),
served under the playground's URLs (see ``evalsite.urls``).
"""

from __future__ import annotations

import json
from typing import Any, cast

from asgiref.sync import sync_to_async
from django import forms
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.agents import services
from apps.agents.examples import NO_INPUT, example_source
from apps.agents.models import InputMode, Session
from apps.agents.registry import discovered_targets, load_target
from apps.core.access import AuthenticatedRequest, can_use_playground, playground_required
from apps.core.forms import ascii_int
from apps.core.pages import render_page
from evalcore.discovery import TargetSpec


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
        cast(forms.ChoiceField, self.fields["target"]).choices = [(t, t) for t in self.targets]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
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


def get_session_for_user(request: HttpRequest, session_id: int) -> Session:
    """The session, if it is the signed-in user's own (others' sessions are 404, staff see all)."""
    user = cast(AuthenticatedRequest, request).user
    sessions = Session.objects.all() if user.is_staff else Session.objects.filter(user=user)
    return get_object_or_404(sessions, pk=session_id)


@require_GET
@playground_required
def playground(request: AuthenticatedRequest) -> HttpResponse:
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
    url = reverse("agents:session", args=[session.pk])
    case_pk = request.POST.get("case", "")
    # "Open in playground" from a case page: the chat opens with the case's input typed in
    return redirect(f"{url}?case={case_pk}" if ascii_int(case_pk) is not None else url)


def _as_message(session: Session, value: Any) -> str:
    """A case input typed as a chat message for the session's input mode."""
    if session.input_mode == "conversation" and isinstance(value, list):
        users = [m.get("content", "") for m in value if isinstance(m, dict) and m.get("role") == "user"]
        value = users[-1] if users else ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2)


def _session_context(session: Session, form: ChatForm | None = None) -> dict[str, Any]:
    template, free_field = None, None
    if session.input_mode == "json":
        spec: TargetSpec | None
        try:
            spec = load_target(session.target_id)
        except (LookupError, FileNotFoundError):
            spec = None
        template = services.input_template(session.target_id, spec)
        free_field = services.free_text_field(template, spec)
    return {
        "session": session,
        "messages": session.messages.select_related("run").order_by("id"),
        "form": form or ChatForm(),
        "template": None if template is None else json.dumps(template, ensure_ascii=False, indent=2),
        "free_field": free_field,
        # plain text fills only the free field: the rest of the input comes from the template as shown
        "template_fields": (
            [k for k in template if k != free_field] if free_field and isinstance(template, dict) else []
        ),
    }


@require_GET
@playground_required
def session_detail(request: HttpRequest, session_id: int) -> HttpResponse:
    """The chat; ``?case=<pk>`` types that case's input in, ``?template=1`` the input template."""
    session = get_session_for_user(request, session_id)
    context = _session_context(session)
    initial = ""
    case_pk = request.GET.get("case", "")
    case_number = ascii_int(case_pk)
    if case_number is not None:
        # the input of a case (its page's "Open in playground"): the evals app answers
        value = example_source().case_input(case_number)
        initial = _as_message(session, value) if value is not NO_INPUT else ""
    elif request.GET.get("template") and context["template"]:
        initial = context["template"]
    if initial:
        context["form"] = ChatForm(initial={"content": initial})
    return render_page(request, "agents/session.html", context, {"chat": "chat"})


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
    session = await sync_to_async(get_session_for_user)(request, session_id)
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
