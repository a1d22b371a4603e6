"""Compare pages: two eval runs of a set case by case, per-scorer deltas, one case side by side."""

from __future__ import annotations

import math
from dataclasses import dataclass
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
from apps.evals.queries.compare_many import (
    CASE_FILTERS,
    CASE_SORTS,
    ManyView,
    ParetoRow,
    case_table,
    compare_many_runs,
    load_runs,
    many_scorer_deltas,
    many_slices,
    pareto_rows,
    parse_run_ids,
)
from apps.evals.queries.conversations import align_transcripts, attach_conversations, turn_flips
from apps.evals.queries.previews import attach_previews
from apps.evals.queries.runs import latest_runs
from apps.evals.queries.slices import comparison_slices
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.forms import CompareForm
from apps.traces.access import run_visibility
from evalcore.compare_many import PairReading
from evalcore.errors import InvalidInputError


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
    """Pick any two runs of a set; aligned cases, flips first, paired statistics. With
    ``runs=A,B,C`` (and optionally ``baseline``): the N-way comparison (:func:`_compare_many`)."""
    if request.GET.get("runs"):
        return _compare_many(request)
    picks = request.GET.getlist("pick")
    context: dict[str, Any]
    if picks:
        # Ticked on the runs list: the older run is the baseline.
        runs = list(EvalRun.objects.filter(pk__in=picks).order_by("started", "pk").values_list("pk", flat=True))
        if len(picks) == 2 and len(runs) == 2:
            return redirect(_compare_url(runs[0], runs[1]))
        if len(picks) > 2 and len(runs) == len(picks):
            return redirect(f"{reverse('evals:compare')}?{urlencode({'runs': ','.join(runs)})}")
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


def _many(request: HtmxHttpRequest) -> ManyView:
    """The N-way comparison named by ``runs`` (comma-separated ids, in order) and ``baseline``.

    Raises:
        InvalidInputError: Fewer than two runs, an unknown or repeated run, runs of different sets
            or splits, a baseline not among them.
    """
    runs = load_runs(parse_run_ids(request.GET.getlist("runs")))
    view = compare_many_runs(runs, request.GET.get("baseline") or None)
    for index, run in enumerate(view.runs):
        run.compare_label = view.name(index)  # type: ignore[attr-defined]  # the short label the blocks show
    return view


def _case_page_args(request: HtmxHttpRequest) -> dict[str, Any]:
    sort = request.GET.get("sort") or "split"
    only = request.GET.get("only") or "all"
    return {
        "page": ascii_int(request.GET.get("page") or "1") or 1,
        "sort": sort if sort in CASE_SORTS else "split",
        "only": only,
        "q": (request.GET.get("q") or "")[:300],
    }


def _compare_many(request: HtmxHttpRequest) -> HttpResponse:
    """``/compare/?runs=A,B,C&baseline=A``: k runs of a set compared at once: the ranking with
    intervals and the group no test tells from the best, each run against the baseline
    (Holm-corrected) and the flip matrix; the per-case table (cases that split the variants
    first), scorers, slices and the quality x cost x latency view load after it; the table's
    pages, filters and order are this URL's too (``page``, ``sort``, ``only``, ``q``), so a pushed
    page of it reloads whole."""
    if request.htmx and request.htmx.target == "many-cases":
        response: HttpResponse = compare_many_cases(request)
        return response
    try:
        view = _many(request)
    except InvalidInputError as exc:
        refused: dict[str, Any] = {"error": str(exc), "view": None, "runs_text": ",".join(request.GET.getlist("runs"))}
        return TemplateResponse(request, "evals/compare_many.html", refused, status=400)
    context: dict[str, Any] = {
        "view": view,
        "query": _many_query(view),
        "cases_query": urlencode(
            [("runs", ",".join(run.pk for run in view.runs)), ("baseline", view.baseline_run.pk)]
            + [(key, request.GET[key]) for key in ("page", "sort", "only", "q") if request.GET.get(key)]
        ),
        "flip_rows": _flip_rows(view),
        "names": [view.name(i) for i in range(len(view.runs))],
        "ranking": [
            (entry, view.runs[entry.variant], view.name(entry.variant), _gap(entry.to_best))
            for entry in view.comparison.ranking
        ],
        "best_names": [view.name(i) for i in view.comparison.best_group],
        "pairs": [(p, view.runs[p.b], view.name(p.b)) for p in view.comparison.pairs],
    }
    return render_page(request, "evals/compare_many.html", context, {"many-cases": "cases"})


@dataclass(slots=True)
class Gap:
    """A run's pass rate minus the best's (points <= 0) with the interval of that difference."""

    delta: float | None
    low: float | None
    high: float | None


def _gap(reading: PairReading | None) -> Gap | None:
    """The reading against the best holds the run as A and the best as B: negate it."""
    if reading is None:
        return None
    interval = reading.interval
    return Gap(
        None if reading.delta is None else -reading.delta,
        None if interval is None else -interval.high,
        None if interval is None else -interval.low,
    )


def _many_query(view: ManyView) -> str:
    return urlencode({"runs": ",".join(run.pk for run in view.runs), "baseline": view.runs[view.baseline].pk})


def _case_filters(view: ManyView) -> list[tuple[str, str]]:
    labels = {
        "all": "every case",
        "split": "cases that split the variants",
        "all_pass": "passed by all",
        "all_fail": "failed by all",
    }
    choices = [(key, labels[key]) for key in CASE_FILTERS]
    for i in range(len(view.runs)):
        choices.append((f"passed:{i}", f"passed by {view.name(i)}"))
        choices.append((f"failed:{i}", f"failed by {view.name(i)}"))
    return choices


def _flip_rows(view: ManyView) -> list[tuple[str, list[int | None]]]:
    """The flip matrix as rows: (run name, cases it passed that each other run failed; ``None`` on the diagonal)."""
    flips = view.comparison.flips
    return [
        (view.name(i), [None if i == j else flips[i][j] for j in range(len(view.runs))]) for i in range(len(view.runs))
    ]


@require_GET
@viewer_required
def compare_many_cases(request: HtmxHttpRequest) -> HttpResponse:
    """A page of the N-way per-case table (sort, filter, case id search)."""
    try:
        view = _many(request)
        cases = case_table(view.runs, **_case_page_args(request))
    except InvalidInputError as exc:
        return TemplateResponse(request, "evals/compare_many.html#error", {"error": str(exc)}, status=400)
    context = {
        "view": view,
        "cases": cases,
        "names": [view.name(i) for i in range(len(view.runs))],
        "case_filters": _case_filters(view),
        "case_sorts": CASE_SORTS,
        "query": _many_query(view),
    }
    return TemplateResponse(request, "evals/compare_many.html#cases", context)


def _many_block(request: HtmxHttpRequest, part: str) -> HttpResponse:
    """A block of the N-way page loaded after it (the partial named ``part``)."""
    try:
        view = _many(request)
    except InvalidInputError as exc:
        return TemplateResponse(request, "evals/compare_many.html#error", {"error": str(exc)}, status=400)
    context: dict[str, Any] = {"view": view}
    if part == "scorers":
        context["variants"] = many_scorer_deltas(view)
    elif part == "slices":
        context["variants"] = many_slices(view)
    else:
        context["rows"] = pareto_rows(view)
        context["chart"] = pareto_chart(context["rows"], view)
    return TemplateResponse(request, f"evals/compare_many.html#{part}", context)


@require_GET
@viewer_required
def compare_many_scorers(request: HtmxHttpRequest) -> HttpResponse:
    """Per-scorer deltas of each run against the baseline, Holm over runs x scorers (reads every score)."""
    return _many_block(request, "scorers")


@require_GET
@viewer_required
def compare_many_slices(request: HtmxHttpRequest) -> HttpResponse:
    """Each run's slices against the baseline, corrected as the A/B page's are."""
    return _many_block(request, "slices")


@require_GET
@viewer_required
def compare_many_pareto(request: HtmxHttpRequest) -> HttpResponse:
    """Quality x cost x latency of the runs, the Pareto front marked, each point with its intervals."""
    return _many_block(request, "pareto")


@dataclass(slots=True)
class ChartPoint:
    """One variant placed on the Pareto chart (SVG user units), its interval bars included."""

    name: str
    x: float
    y: float
    x_low: float
    x_high: float
    y_low: float
    y_high: float
    on_front: bool


@dataclass(slots=True)
class ParetoChart:
    """Quality (y, pass rate) against latency or cost (x) for the SVG on the N-way page."""

    x_label: str
    width: int
    height: int
    points: list[ChartPoint]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    front: str
    """The SVG ``points`` of the polyline through the front, left to right."""


_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 560, 300, 56, 20, 16, 44


def pareto_chart(rows: list[ParetoRow], view: ManyView) -> ParetoChart | None:
    """The chart's geometry, or ``None`` when no run has a latency or cost to plot against."""
    axis = "latency" if all(r.point.latency is not None for r in rows) else None
    if axis is None and all(r.point.cost is not None for r in rows):
        axis = "cost"
    if axis is None or not rows:
        return None
    xs = [getattr(r.point, axis) for r in rows]
    x_max = max((a.high if a.high is not None else a.value) for a in xs) * 1.08 or 1.0
    y_values = [(r.point.quality.low if r.point.quality.low is not None else r.point.quality.value) for r in rows]
    y_min = max(0.0, math.floor(min(y_values) * 10) / 10 - 0.1)
    y_span = (1.0 - y_min) or 1.0

    def px(value: float) -> float:
        return round(_LEFT + (_W - _LEFT - _RIGHT) * value / x_max, 1)

    def py(value: float) -> float:
        return round(_TOP + (_H - _TOP - _BOTTOM) * (1.0 - (value - y_min) / y_span), 1)

    points = []
    for index, (row, x) in enumerate(zip(rows, xs, strict=True)):
        q = row.point.quality
        points.append(
            ChartPoint(
                view.name(index),
                px(x.value),
                py(q.value),
                px(x.low if x.low is not None else x.value),
                px(x.high if x.high is not None else x.value),
                py(q.low if q.low is not None else q.value),
                py(q.high if q.high is not None else q.value),
                row.mark.on_front,
            )
        )
    front = sorted((p for p in points if p.on_front), key=lambda p: p.x)
    x_ticks = [
        (px(x_max * i / 4), f"{x_max * i / 4:,.0f}" if axis == "latency" else f"{x_max * i / 4:.4f}") for i in range(5)
    ]
    y_ticks = [(py(y_min + y_span * i / 4), f"{(y_min + y_span * i / 4) * 100:.0f}%") for i in range(5)]
    kind = "median" if rows[0].latency_kind == "p50" else "mean"
    label = f"{kind} latency per case (ms)" if axis == "latency" else "cost per case (USD)"
    return ParetoChart(label, _W, _H, points, x_ticks, y_ticks, " ".join(f"{p.x},{p.y}" for p in front))
