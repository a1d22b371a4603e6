"""The online scoring pages: the rules list (with a new-rule form), one rule's page (coverage per
window, its pass rate over time with intervals, alerts and firings, backfill), and the section
the trace page shows (``apps.traces.signals.trace_page_sections``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.core.access import can_start_runs, member_required, viewer_required
from apps.core.pages import render_page
from apps.online.forms import AlertForm, BackfillForm, RuleForm
from apps.online.models import ScoringRule
from apps.online.queries import Coverage, recent_firings, rule_alerts, rule_totals, rule_windows, trace_scores
from apps.online.services import create_rule
from apps.online.tasks import enqueue_backfill
from apps.traces.models import Run
from evalcore.errors import InvalidInputError

CHART_W, CHART_H = 640, 160


@dataclass(frozen=True, slots=True)
class ChartPoint:
    """One window on the rule's chart: x, the pass rate's y and its interval's bar (pixels)."""

    x: float
    y: float
    y_low: float
    y_high: float
    cover: Coverage


def chart_points(windows: list[Coverage]) -> list[ChartPoint]:
    """Pass rate per window as SVG points (y down: 0 at the bottom), windows without a verdict
    left out (never drawn as 0)."""
    judged = [w for w in windows if w.judged and w.interval is not None and w.interval.low is not None]
    if not judged:
        return []
    step = CHART_W / max(1, len(judged))

    def y(value: float) -> float:
        return round(CHART_H - value * CHART_H, 1)

    points = []
    for index, cover in enumerate(judged):
        interval = cover.interval
        assert interval is not None and interval.low is not None and interval.high is not None
        points.append(
            ChartPoint(
                round(step * (index + 0.5), 1), y(cover.pass_rate or 0.0), y(interval.low), y(interval.high), cover
            )
        )
    return points


@require_http_methods(["GET", "POST"])
@viewer_required
def rule_list(request: HttpRequest) -> HttpResponse:
    """Every rule with its coverage totals; members create rules here."""
    form = RuleForm(request.POST or None)
    if request.method == "POST":
        if not can_start_runs(request.user):
            return HttpResponse("only members can create scoring rules", status=403)
        if form.is_valid():
            data = dict(form.cleaned_data)
            try:
                rule = create_rule(owner=request.user, **data)
            except InvalidInputError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, str(exc))
            else:
                messages.success(request, f"Rule {rule.name!r} created: new traces it matches are scored.")
                return redirect("online:rule", rule.pk)
    rules = [(rule, rule_totals(rule)) for rule in ScoringRule.objects.order_by("name")]
    context = {
        "rules": rules,
        "form": form,
        "can_edit": can_start_runs(request.user),
        "firings": recent_firings(limit=10),
    }
    return render_page(request, "online/rules.html", context)


@require_GET
@viewer_required
def rule_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One rule: filters, coverage per window, pass rate over time with intervals, alerts, firings."""
    rule = get_object_or_404(ScoringRule.objects.select_related("reference_set"), pk=pk)
    windows = rule_windows(rule)
    context = {
        "rule": rule,
        "windows": list(reversed(windows)),
        "totals": rule_totals(rule),
        "points": chart_points(windows),
        "chart_w": CHART_W,
        "chart_h": CHART_H,
        "alerts": rule_alerts(rule),
        "firings": recent_firings(rule=rule, limit=20),
        "alert_form": AlertForm(),
        "backfill_form": BackfillForm(),
        "can_edit": can_start_runs(request.user),
    }
    return render_page(request, "online/rule.html", context, {"windows": "windows"})


@require_POST
@member_required
def add_alert(request: HttpRequest, pk: int) -> HttpResponse:
    """Add an alert to a rule."""
    rule = get_object_or_404(ScoringRule, pk=pk)
    form = AlertForm(request.POST)
    if form.is_valid():
        if rule.alerts.filter(name=form.cleaned_data["name"]).exists():
            messages.error(request, f"the rule has an alert named {form.cleaned_data['name']!r}")
        else:
            alert = form.save(commit=False)
            alert.rule = rule
            alert.save()
            messages.success(request, f"Alert {alert.name!r} added.")
    else:
        errors = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
        messages.error(request, f"alert not added: {errors}")
    return redirect("online:rule", rule.pk)


@require_POST
@member_required
def start_backfill(request: HttpRequest, pk: int) -> HttpResponse:
    """Apply a rule to a past time range (in the worker)."""
    rule = get_object_or_404(ScoringRule, pk=pk)
    form = BackfillForm(request.POST)
    if form.is_valid():
        enqueue_backfill(rule, start=form.cleaned_data["start"], end=form.cleaned_data["end"])
        messages.success(request, "Backfill queued: the worker matches and scores the range's traces.")
    else:
        errors = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
        messages.error(request, f"backfill not started: {errors}")
    return redirect("online:rule", rule.pk)


def trace_scores_section(request: HttpRequest, run: Run) -> SafeString | str:
    """The trace page's "Online scores" section; ``""`` when no rule matched the trace."""
    scores = trace_scores(run)
    if not scores:
        return ""
    html = render_to_string("online/_trace_scores.html", {"scores": scores}, request=request)
    return mark_safe(html)


def status_section(request: HttpRequest) -> SafeString:
    """The status page's "Alert firings" section: the latest firings, or a line saying none."""
    html = render_to_string("online/_status_firings.html", {"firings": recent_firings(limit=10)}, request=request)
    return mark_safe(html)
