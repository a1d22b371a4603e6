"""Start an eval run from the portal (members): the form, and its input-kind warning."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.agents.registry import discovered_targets
from apps.core.access import member_required
from apps.core.forms import ascii_int
from apps.core.pages import render_page
from apps.evals.models import EvalCase, EvalSet, Split
from apps.evals.runs.config import RunConfig
from apps.evals.runs.prepare import prepare_eval_run
from apps.evals.runs.simulator import simulator_config_of
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.forms import StartRunForm
from apps.evals.worker.tasks import EXECUTOR, QueueUnavailable, enqueue_eval_run
from evalcore.errors import InvalidInputError

_KIND_WORDS = {
    "conversation": "a conversation ([{role, content}] messages)",
    "text": "text (a string)",
    "json": "JSON values",
}


def input_kind_of(value: Any) -> str:
    """``conversation``, ``text`` or ``json``: the kind of one case input."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value):
        return "conversation"
    return "json"


def input_kind_warning(eval_set: EvalSet | None, spec: Any) -> str:
    """A sentence when the target's declared ``input_kind`` differs from the set's inputs (read
    from its first case); ``""`` when they agree or nothing tells."""
    if eval_set is None or spec is None:
        return ""
    first = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id").only("input").first()
    if first is None:
        return ""
    have = input_kind_of(first.input)
    if have == spec.input_kind:
        return ""
    return (
        f"Target {spec.id} declares input_kind={spec.input_kind}: it takes {_KIND_WORDS[spec.input_kind]}, "
        f"but the inputs of set {eval_set.name} are {_KIND_WORDS[have]}. It may not accept them; if the first "
        "cases all fail with the same error the run is stopped early."
    )


@require_GET
@member_required
def start_eval_run_check(request: HtmxHttpRequest) -> HttpResponse:
    """The start-run form's warning for the picked set and target (htmx, on change)."""
    targets, _ = discovered_targets()
    set_id = request.GET.get("eval_set", "")
    set_pk = ascii_int(set_id)
    eval_set = EvalSet.objects.filter(pk=set_pk).first() if set_pk is not None else None
    warning = input_kind_warning(eval_set, targets.get(request.GET.get("target", "")))
    return TemplateResponse(request, "evals/start_run.html#input_kind", {"input_kind_warning": warning})


@require_http_methods(["GET", "POST"])
@member_required
def start_eval_run(request: HtmxHttpRequest) -> HttpResponse:
    """Start an eval run: prepare it, enqueue it, and go to its live page (the form again with a
    503 when the run queue is unreachable: the run is not created)."""
    status = 200
    targets, problems = discovered_targets()
    form = StartRunForm(request.POST or None, targets=targets, initial={"split": Split.DEV})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            eval_run = prepare_eval_run(
                eval_set=data["eval_set"],
                spec=targets[data["target"]],
                variant=data["variant"] or None,
                split=data["split"],
                allow_test=data["allow_test"],
                user=request.user,
                config=RunConfig(
                    executor=EXECUTOR,
                    simulator=simulator_config_of(
                        data["simulator_model"], base_url=data["simulator_base_url"], seed=data["simulator_seed"]
                    ),
                ),
                name=data["name"],
            )
        except (InvalidInputError, ValueError) as exc:
            form.add_error(None, str(exc))
        else:
            try:
                enqueue_eval_run(eval_run)
            except QueueUnavailable as exc:  # the run was deleted again: nothing was created
                form.add_error(None, exc.message)
                status = 200 if request.htmx else 503  # htmx swaps no 5xx answer: the form shows why
            else:
                url = reverse("evals:eval_run", args=[eval_run.id])
                if request.htmx:
                    response = HttpResponse(status=204)
                    response["HX-Redirect"] = url
                    return response
                return redirect(url)
    variants = {tid: list(spec.variants) for tid, spec in targets.items()}
    picked = form["eval_set"].value()
    picked_pk = ascii_int(picked)
    picked_set = EvalSet.objects.filter(pk=picked_pk).first() if picked_pk is not None else None
    warning = input_kind_warning(picked_set, targets.get(str(form["target"].value() or "")))
    context = {
        "form": form,
        "problems": problems,
        "variants": variants,
        "targets": targets,
        "input_kind_warning": warning,
    }
    response = render_page(request, "evals/start_run.html", context)
    response.status_code = status
    return response
