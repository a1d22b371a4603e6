"""Compare pages: two eval runs of a set case by case, per-scorer deltas, one case side by side."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.core.access import viewer_required
from apps.core.forms import ascii_int
from apps.core.pages import render_page
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from apps.evals.queries.compare import COMPARE_ONLY, compare_neighbours, compare_runs, scorer_deltas, suggested_partner
from apps.evals.queries.conversations import align_transcripts, attach_conversations, turn_flips
from apps.evals.queries.previews import attach_previews
from apps.evals.queries.runs import latest_runs
from apps.evals.queries.slices import comparison_slices
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.forms import CompareForm
from apps.traces.access import run_visibility


def _compare_url(a: str, b: str) -> str:
    return f"{reverse('evals:compare')}?a={a}&b={b}"


@require_GET
@viewer_required
def compare_case(request: HtmxHttpRequest) -> HttpResponse:
    """One case of a comparison: input, expected, A's and B's outputs side by side (diffed
    against each other; a conversation case turn by turn, the first turn where they differ
    marked), both runs' scores, and links to both traces."""
    form = CompareForm(request.GET)
    case_id = request.GET.get("case", "")
    repeat_index = ascii_int(request.GET.get("repeat") or "0")
    repeat_index = -1 if repeat_index is None else repeat_index
    if not form.is_valid() or not case_id or repeat_index < 0:
        raise Http404("give two comparable runs (a, b) and a case id")
    run_a, run_b = form.cleaned_data["run_a"], form.cleaned_data["run_b"]
    # the expected value recorded with each result is not shown here (the case's is): not read
    readable = EvalResult.objects.select_related("run").defer("expected").filter(run_visibility(request.user, "run__"))
    pair = {
        side: get_object_or_404(readable, eval_run=run, case_id=case_id, repeat_index=repeat_index)
        for side, run in (("a", run_a), ("b", run_b))
    }
    case = EvalCase.objects.filter(eval_set_id=run_a.eval_set_id, case_id=case_id).first()
    # previous / next in the comparison table's order (flips first), within its filter
    only = request.GET.get("only") if request.GET.get("only") in COMPARE_ONLY else None
    previous, following = compare_neighbours(run_a, run_b, case_id, repeat_index, only=only)

    def case_url(key: tuple[str, int] | None) -> str | None:
        if key is None:
            return None
        query = {"a": run_a.pk, "b": run_b.pk, "case": key[0], "repeat": key[1], **({"only": only} if only else {})}
        return f"{reverse('evals:compare_case')}?{urlencode(query)}"

    context = {
        "run_a": run_a,
        "run_b": run_b,
        "a": pair["a"],
        "b": pair["b"],
        "case": case,
        "case_id": case_id,
        "alignment": align_transcripts(pair["a"], pair["b"], case),
        "only": only,
        "previous_url": case_url(previous),
        "next_url": case_url(following),
    }
    return render_page(request, "evals/compare_case.html", context)


@require_GET
@viewer_required
def compare(request: HtmxHttpRequest) -> HttpResponse:
    """Pick any two runs of a set; aligned cases, flips first, paired statistics."""
    picks = request.GET.getlist("pick")
    context: dict[str, Any]
    if picks:
        # Ticked on the runs list: the older run is the baseline.
        runs = list(EvalRun.objects.filter(pk__in=picks).order_by("started", "pk").values_list("pk", flat=True))
        if len(picks) == 2 and len(runs) == 2:
            return redirect(_compare_url(runs[0], runs[1]))
        form = CompareForm({"a": picks[0], "b": ""})
        form.is_valid()
        form.add_error(None, f"tick exactly two runs to compare (you ticked {len(picks)})")
        context = {"form": form, "view": None, "picker_runs": latest_runs(), "sets": EvalSet.objects.all()}
        return render_page(request, "evals/compare.html", context)
    given_a, given_b = request.GET.get("a"), request.GET.get("b")
    if bool(given_a) != bool(given_b):
        # "compare with…" from a run page: suggest the natural baseline instead of an error
        chosen = EvalRun.objects.filter(pk=given_a or given_b).first()
        baseline = suggested_partner(chosen) if chosen else None
        if chosen and baseline:
            a, b = (chosen.pk, baseline.pk) if given_a else (baseline.pk, chosen.pk)
            return redirect(_compare_url(a, b))
        form = CompareForm(initial={"a": given_a or "", "b": given_b or ""})
        context = {
            "form": form,
            "view": None,
            "picker_runs": latest_runs(chosen.eval_set_id if chosen else None),
            "sets": EvalSet.objects.all(),
            "note": "no other run of this set to compare with yet" if chosen else f"no run {given_a or given_b!r}",
        }
        return render_page(request, "evals/compare.html", context)
    form = CompareForm(request.GET) if given_a or given_b else CompareForm()
    view = None
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        view = compare_runs(data["run_a"], data["run_b"], page=data.get("page") or 1, only=data.get("only") or None)
        attach_previews(result for row in view.rows for result in (row.a, row.b))  # one query, this page only
        attach_conversations(result for row in view.rows for result in (row.a, row.b))  # one query
    set_id = request.GET.get("set")
    set_pk = ascii_int(set_id) if set_id else None
    if set_id and set_pk is None:  # not an id at all (letters, other scripts' digits, past 18 digits)
        raise Http404(f"no set {set_id[:40]!r}")
    picker_runs = latest_runs(set_pk)
    context = {"form": form, "view": view, "picker_runs": picker_runs, "sets": EvalSet.objects.all()}
    return render_page(request, "evals/compare.html", context, {"compare-rows": "rows"})


@require_GET
@viewer_required
def compare_scorers(request: HtmxHttpRequest) -> HttpResponse:
    """Per-scorer deltas with bootstrap intervals (loaded after the compare page: reads every score)."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return TemplateResponse(request, "evals/compare.html#scorers", {"form": form, "deltas": None}, status=400)
    deltas = scorer_deltas(form.cleaned_data["run_a"], form.cleaned_data["run_b"])
    return TemplateResponse(request, "evals/compare.html#scorers", {"form": form, "deltas": deltas})


@require_GET
@viewer_required
def compare_turns(request: HtmxHttpRequest) -> HttpResponse:
    """Flips per turn of the conversation cases in both runs (loaded after the compare page: it
    reads every conversation result's scores; nothing when the set has no conversation)."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return TemplateResponse(request, "evals/_turn_flips.html", {"turn_flips": []}, status=400)
    flips = turn_flips(form.cleaned_data["run_a"], form.cleaned_data["run_b"])
    return TemplateResponse(request, "evals/_turn_flips.html", {"turn_flips": flips})


SLICES_SHOWN = 30
"""Slices listed on the compare page (the API lists them all)."""


@require_GET
@viewer_required
def compare_slices_view(request: HtmxHttpRequest) -> HttpResponse:
    """Where did B get worse: the comparison by tag, split and metadata field (loaded after the
    compare page), flagged slices first in words, then the table by contribution."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return TemplateResponse(request, "evals/compare.html#slices", {"form": form, "slices": None}, status=400)
    slices = comparison_slices(form.cleaned_data["run_a"], form.cleaned_data["run_b"])
    context = {
        "form": form,
        "slices": slices[:SLICES_SHOWN],
        "n_slices": len(slices),
        "flagged": [s for s in slices if s.significant],
    }
    return TemplateResponse(request, "evals/compare.html#slices", context)
