"""The evals pages: runs, run detail, a case, compare, sets, splits, trends, start a run.

One function view per page, one template per page with named partials; ``request.htmx`` picks
the partial (the ``HX-Target`` names which). Every page needs a login and the viewer role;
starting a run needs the member role.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.agents.registry import discovered_targets
from apps.core import access
from apps.core.access import member_required, viewer_required
from apps.core.pages import render_page
from apps.evals.caseruns import CaseRunRefused, start_case_run
from apps.evals.consumers import LIVE_ROWS
from apps.evals.forms import CaseFilterForm, CompareForm, ResultFilterForm, RunFilterForm, StartRunForm, TrendsForm
from apps.evals.liveness import RunBusy, mark_stale_runs
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from apps.evals.prepare import prepare_eval_run
from apps.evals.queries import (
    NEWEST_FIRST,
    RESULT_STATUSES,
    compare_runs,
    has_tag,
    latest_runs,
    run_results,
    scorer_deltas,
)
from apps.evals.resume import ResumeRefused
from apps.evals.sets import split_counts, test_split_runs
from apps.evals.tasks import EXECUTOR, enqueue_eval_run, resume_in_worker
from apps.evals.templatetags.evals_charts import Point, Series, line_chart
from apps.evals.templatetags.evals_tags import points
from apps.traces.access import run_visibility
from apps.traces.queries import span_tree
from evalcore.discovery import UnknownVariantError
from evalcore.splits import HeldOutError
from evalcore.types import MISSING, expected_hash

LIVE_STATUSES = ("queued", "running")
RESUMABLE_STATUSES = ("interrupted", "failed")


@dataclass(slots=True)
class ScoredExpected:
    """The expected value a result was scored against, and how the set's case differs today.

    Attributes:
        has: The result was scored against an expected value (``False``: the case had none).
        value: That value.
        recorded: Stored with the result; ``False`` for results stored before that, whose
            expected value can only be read from today's set.
        changed: The set's case differs today (edited expected value, or removed).
        today_has, today: Today's expected value of the case (when it still exists).
        case_gone: The case is no longer in the set.
    """

    has: bool
    value: Any
    recorded: bool
    changed: bool
    today_has: bool = False
    today: Any = None
    case_gone: bool = False


def scored_expected(result: EvalResult, case: EvalCase | None, eval_run: EvalRun) -> ScoredExpected:
    """What ``result`` was scored against (see :class:`ScoredExpected`)."""
    today_has = bool(case and case.has_expected)
    today = case.expected if case and case.has_expected else None
    if not result.expected_recorded:
        # older result: only today's value exists; the run's set hash tells whether the set moved
        changed = case is None or bool(eval_run.set_hash and eval_run.set_hash != eval_run.eval_set.content_hash)
        return ScoredExpected(today_has, today, False, changed, today_has, today, case is None)
    today_hash = expected_hash(today if today_has else MISSING) if case is not None else None
    return ScoredExpected(
        has=not result.expected_missing,
        value=result.expected,
        recorded=True,
        changed=today_hash != result.expected_hash,
        today_has=today_has,
        today=today,
        case_gone=case is None,
    )


def _get_eval_run_for_user(request: HttpRequest, run_id: str) -> EvalRun:
    """The eval run (404 when missing); access is checked by the decorators (roles are global)."""
    return get_object_or_404(EvalRun.objects.select_related("eval_set", "created_by"), pk=run_id)


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return redirect("evals:runs")


@require_GET
@viewer_required
def run_list(request: HttpRequest) -> HttpResponse:
    """All eval runs, filtered (set, target, variant, split, status), newest first, paginated."""
    mark_stale_runs()  # a run whose process died shows interrupted, not running
    form = RunFilterForm(request.GET or None)
    runs = EvalRun.objects.select_related("eval_set").defer("summary", "config", "scorer_specs")
    data = form.cleaned_data if form.is_valid() else {}
    if data.get("set"):
        runs = runs.filter(eval_set=data["set"])
    for key in ("target", "variant"):
        if data.get(key):
            runs = runs.filter(**{f"{key}_id" if key == "target" else key: data[key]})
    for key in ("split", "status"):
        if data.get(key):
            runs = runs.filter(**{key: data[key]})
    page = Paginator(runs.order_by(NEWEST_FIRST, "-pk"), 50).get_page(data.get("page") or 1)
    context = {"form": form, "page": page, "runs": page.object_list}
    return render_page(request, "evals/runs.html", context, {"runs-table": "table"})


@require_GET
@viewer_required
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    """A run: summary, per-split aggregates, and one page of the case table (never all of it).

    An interrupted or failed run offers members a resume button (see :func:`resume_run`).
    """
    mark_stale_runs()
    eval_run = _get_eval_run_for_user(request, run_id)
    form = ResultFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    results = run_results(
        eval_run,
        status=data.get("status") or None,
        search=data.get("q") or None,
        order=data.get("order") or None,
        page=data.get("page") or 1,
    )
    # case links keep the filter, so "next case" steps through e.g. the failures only
    case_filter = {k: data[k] for k in ("status", "q") if data.get(k)}
    context = {
        "eval_run": eval_run,
        "form": form,
        "results": results,
        "case_qs": urlencode(case_filter),
        "live": eval_run.status in LIVE_STATUSES,
        "can_resume": eval_run.status in RESUMABLE_STATUSES
        and not eval_run.source_eval_run_id
        and access.can_start_runs(request.user),
        # a live run shows its newest cases in a bounded block the websocket replaces whole
        "latest": (
            list(EvalResult.objects.filter(eval_run=eval_run).select_related("run").order_by("-id")[:LIVE_ROWS])
            if eval_run.status in LIVE_STATUSES
            else []
        ),
        "live_rows": LIVE_ROWS,
        "test_runs": test_split_runs(eval_run.eval_set, variant=eval_run.variant, target_id=eval_run.target_id),
    }
    return render_page(request, "evals/run_detail.html", context, {"results": "results", "run-summary": "summary"})


@require_POST
@member_required
def resume_run(request: HttpRequest, run_id: str) -> HttpResponse:
    """Queue the remaining cases of an interrupted or failed run for the task worker (members).

    Any run can be resumed here, whatever started it (CLI, portal, another host): the target
    comes from the agents folder recorded on the run. Refusals (another process holds it, the
    set changed, the judge's options are needed) come back as a message on the run page.
    """
    eval_run = _get_eval_run_for_user(request, run_id)
    try:
        resume_in_worker(eval_run)
    except (RunBusy, ResumeRefused) as exc:
        messages.error(request, f"Not resumed: {exc}")
    else:
        messages.success(request, f"Resuming: {eval_run.n_total - eval_run.n_done} remaining case(s) queued.")
    return redirect("evals:run", run_id=eval_run.pk)


@require_GET
@viewer_required
def result_detail(request: HttpRequest, run_id: str, result_id: int) -> HttpResponse:
    """One case of a run: actual vs expected diff, every score, and the trace as a span tree."""
    eval_run = _get_eval_run_for_user(request, run_id)
    readable = EvalResult.objects.select_related("run").filter(run_visibility(request.user, "run__"))
    result = get_object_or_404(readable, pk=result_id, eval_run=eval_run)
    case = EvalCase.objects.filter(eval_set_id=eval_run.eval_set_id, case_id=result.case_id).first()
    # previous / next within the filter the list was showing (status, case-id search)
    status = request.GET.get("status") if request.GET.get("status") in RESULT_STATUSES else None
    search = (request.GET.get("q") or "").strip()[:200] or None
    siblings = EvalResult.objects.filter(eval_run=eval_run)
    if status:
        siblings = siblings.filter(status=status)
    if search:
        siblings = siblings.filter(case_id__icontains=search)
    case_filter = {k: v for k, v in (("status", status), ("q", search)) if v}
    context = {
        "case_qs": urlencode(case_filter),
        "filter_label": " · ".join(f"{k}: {v}" for k, v in case_filter.items()),
        "eval_run": eval_run,
        "result": result,
        "outcome": result.outcome,
        "case": case,
        "expected": scored_expected(result, case, eval_run),
        "tree": span_tree(result.run),
        "previous": siblings.filter(id__lt=result.id).order_by("-id").values_list("id", flat=True).first(),
        "next": siblings.filter(id__gt=result.id).order_by("id").values_list("id", flat=True).first(),
    }
    return render_page(request, "evals/result_detail.html", context)


@require_POST
@member_required
def rerun_case(request: HttpRequest, run_id: str, result_id: int) -> HttpResponse:
    """Run this one case again with the run's target and variant; go to the new run's page."""
    eval_run = _get_eval_run_for_user(request, run_id)
    result = get_object_or_404(EvalResult, pk=result_id, eval_run=eval_run)
    try:
        new_run = start_case_run(
            eval_set=eval_run.eval_set,
            case_id=result.case_id,
            target_id=eval_run.target_id,
            variant=eval_run.variant,
            user=request.user,
        )
    except CaseRunRefused as exc:
        messages.error(request, f"could not re-run case {result.case_id!r}: {exc}")
        return redirect("evals:result", eval_run.pk, result.pk)
    return redirect("evals:run", new_run.id)


@require_GET
@viewer_required
def compare_case(request: HttpRequest) -> HttpResponse:
    """One case of a comparison: input, expected, A's and B's outputs side by side (diffed
    against each other), both runs' scores, and links to both traces."""
    form = CompareForm(request.GET)
    case_id = request.GET.get("case", "")
    try:
        repeat_index = int(request.GET.get("repeat") or 0)
    except ValueError:
        repeat_index = -1
    if not form.is_valid() or not case_id or repeat_index < 0:
        raise Http404("give two comparable runs (a, b) and a case id")
    run_a, run_b = form.cleaned_data["run_a"], form.cleaned_data["run_b"]
    pair = {}
    for side, run in (("a", run_a), ("b", run_b)):
        pair[side] = get_object_or_404(
            EvalResult.objects.select_related("run").filter(run_visibility(request.user, "run__")),
            eval_run=run,
            case_id=case_id,
            repeat_index=repeat_index,
        )
    case = EvalCase.objects.filter(eval_set_id=run_a.eval_set_id, case_id=case_id).first()
    context = {"run_a": run_a, "run_b": run_b, "a": pair["a"], "b": pair["b"], "case": case, "case_id": case_id}
    return render_page(request, "evals/compare_case.html", context)


def _suggested_partner(run: EvalRun) -> EvalRun | None:
    """The run to compare ``run`` with: the same target's latest earlier run of the set (a
    baseline), else any other run of the set, newest first."""
    others = EvalRun.objects.filter(eval_set_id=run.eval_set_id).exclude(pk=run.pk).exclude(status="queued")
    earlier = others.filter(target_id=run.target_id)
    if run.started is not None:
        earlier = earlier.filter(started__lt=run.started)
    return earlier.order_by(NEWEST_FIRST, "-pk").first() or others.order_by(NEWEST_FIRST, "-pk").first()


@require_GET
@viewer_required
def compare(request: HttpRequest) -> HttpResponse:
    """Pick any two runs of a set; aligned cases, flips first, paired statistics."""
    picks = request.GET.getlist("pick")
    if picks:
        # Ticked on the runs list: the older run is the baseline.
        runs = list(EvalRun.objects.filter(pk__in=picks).order_by("started", "pk").values_list("pk", flat=True))
        if len(picks) == 2 and len(runs) == 2:
            return redirect(f"{reverse('evals:compare')}?a={runs[0]}&b={runs[1]}")
        form = CompareForm({"a": picks[0], "b": ""})
        form.is_valid()
        form.add_error(None, f"tick exactly two runs to compare (you ticked {len(picks)})")
        context = {"form": form, "view": None, "picker_runs": latest_runs(), "sets": EvalSet.objects.all()}
        return render_page(request, "evals/compare.html", context)
    given_a, given_b = request.GET.get("a"), request.GET.get("b")
    if bool(given_a) != bool(given_b):
        # "compare with…" from a run page: suggest the natural baseline instead of an error
        chosen = EvalRun.objects.filter(pk=given_a or given_b).first()
        baseline = _suggested_partner(chosen) if chosen else None
        if chosen and baseline:
            a, b = (chosen.pk, baseline.pk) if given_a else (baseline.pk, chosen.pk)
            return redirect(f"{reverse('evals:compare')}?a={a}&b={b}")
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
    set_id = request.GET.get("set")
    picker_runs = latest_runs(int(set_id) if set_id and set_id.isdigit() else None)
    context = {"form": form, "view": view, "picker_runs": picker_runs, "sets": EvalSet.objects.all()}
    return render_page(request, "evals/compare.html", context, {"compare-rows": "rows"})


@require_GET
@viewer_required
def compare_scorers(request: HttpRequest) -> HttpResponse:
    """Per-scorer deltas with bootstrap intervals (loaded after the compare page: reads every score)."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return TemplateResponse(request, "evals/compare.html#scorers", {"form": form, "deltas": None}, status=400)
    deltas = scorer_deltas(form.cleaned_data["run_a"], form.cleaned_data["run_b"])
    return TemplateResponse(request, "evals/compare.html#scorers", {"form": form, "deltas": deltas})


@require_GET
@viewer_required
def set_list(request: HttpRequest) -> HttpResponse:
    sets = EvalSet.objects.all()
    rows = []
    counts: dict[int, dict[str, int]] = defaultdict(lambda: {"train": 0, "dev": 0, "test": 0})
    for row in EvalCase.objects.values("eval_set_id", "split").annotate(n=Count("id")):
        counts[row["eval_set_id"]][row["split"]] = row["n"]
    run_counts = {r["eval_set_id"]: r["n"] for r in EvalRun.objects.values("eval_set_id").annotate(n=Count("id"))}
    for eval_set in sets:
        split = counts[eval_set.pk]
        rows.append(
            {"set": eval_set, "splits": split, "n": sum(split.values()), "runs": run_counts.get(eval_set.pk, 0)}
        )
    return render_page(request, "evals/sets.html", {"rows": rows})


@require_GET
@viewer_required
def set_detail(request: HttpRequest, set_id: int) -> HttpResponse:
    """A set: per-split counts, the cases browser, its targets/variants (links to the splits view)."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    form = CaseFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    cases = EvalCase.objects.filter(eval_set=eval_set).order_by("position", "case_id")
    if data.get("split"):
        cases = cases.filter(split=data["split"])
    if data.get("q"):
        cases = cases.filter(case_id__icontains=data["q"])
    if data.get("tag"):
        cases = cases.filter(has_tag(data["tag"]))
    page = Paginator(cases, 50).get_page(data.get("page") or 1)
    variants = (
        EvalRun.objects.filter(eval_set=eval_set)
        .values("target_id", "variant")
        .distinct()
        .order_by("target_id", "variant")
    )
    context = {
        "eval_set": eval_set,
        "counts": split_counts(eval_set),
        "form": form,
        "page": page,
        "variants": list(variants),
        "test_runs": test_split_runs(eval_set),
        "recent_runs": EvalRun.objects.filter(eval_set=eval_set).defer("summary").order_by(NEWEST_FIRST, "-pk")[:10],
    }
    return render_page(request, "evals/set_detail.html", context, {"cases": "cases"})


def _split_value(eval_run: EvalRun, split: str) -> float | None:
    """A run's pass rate on one split, from its report (a run on ``all`` covers every split)."""
    group = ((eval_run.summary or {}).get("splits") or {}).get(split)
    if group and group.get("n"):
        return group.get("pass_rate")
    if eval_run.split == split and eval_run.n_done:
        return eval_run.n_passed / eval_run.n_done
    return None


@require_GET
@viewer_required
def set_splits(request: HttpRequest, set_id: int) -> HttpResponse:
    """Train/dev/test side by side across a target/variant's runs, and the train - test gap over time."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    target_id = request.GET.get("target", "")
    variant = request.GET.get("variant", "")
    if "target" not in request.GET:
        # opened bare: on the target/variant of the set's latest finished run, never empty
        latest = (
            EvalRun.objects.filter(eval_set=eval_set, started__isnull=False)
            .exclude(status__in=LIVE_STATUSES)
            .order_by(NEWEST_FIRST, "-pk")
            .values_list("target_id", "variant")
            .first()
        )
        if latest is not None:
            target_id, variant = latest
    runs = list(
        EvalRun.objects.filter(eval_set=eval_set, target_id=target_id, variant=variant, started__isnull=False)
        .exclude(status__in=LIVE_STATUSES)
        .order_by("started")[:500]
    )
    rows, lines = [], {s: Series(s, []) for s in ("train", "dev", "test")}
    gap = Series("train − test", [])
    latest: dict[str, float] = {}
    for eval_run in runs:
        values = {s: _split_value(eval_run, s) for s in ("train", "dev", "test")}
        gap_value = None if values["train"] is None or values["test"] is None else values["train"] - values["test"]
        rows.append({"run": eval_run, **values, "gap": gap_value})
        for split, value in values.items():
            if value is not None:
                lines[split].points.append(
                    Point(eval_run.started, value, f"{split} {value * 100:.1f}% ({eval_run.pk})")
                )
                latest[split] = value
        # The overfit read: the latest known train score minus the latest known test score.
        if "train" in latest and "test" in latest and (values["train"] is not None or values["test"] is not None):
            delta = latest["train"] - latest["test"]
            gap.points.append(Point(eval_run.started, delta, f"gap {points(delta)} points ({eval_run.pk})"))
    test_runs = test_split_runs(eval_set, variant=variant, target_id=target_id)
    context = {
        "eval_set": eval_set,
        "target_id": target_id,
        "variant": variant,
        "rows": rows,
        "split_chart": line_chart([s for s in lines.values() if s.points]),
        "gap_chart": line_chart([gap] if gap.points else [], y_min=None, y_max=None),
        "test_runs": test_runs,
        "lockbox": test_runs > 1,
        "variants": EvalRun.objects.filter(eval_set=eval_set).values("target_id", "variant").distinct(),
    }
    return render_page(request, "evals/splits.html", context)


@require_GET
@viewer_required
def trends(request: HttpRequest) -> HttpResponse:
    """One scorer's mean (or the pass rate) per variant over time, for one set."""
    form = TrendsForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    eval_set = data.get("set")
    if eval_set is None:
        # no set picked: the set of the latest finished run (a chart with lines), else the first
        latest = (
            EvalRun.objects.filter(started__isnull=False)
            .exclude(status__in=LIVE_STATUSES)
            .order_by(NEWEST_FIRST, "-pk")
            .values_list("eval_set_id", flat=True)
            .first()
        )
        eval_set = EvalSet.objects.filter(pk=latest).first() if latest else EvalSet.objects.first()
        if eval_set is not None:  # the picker shows the set the chart is for
            form = TrendsForm({**request.GET.dict(), "set": eval_set.pk})
            form.is_valid()
    scorer = data.get("scorer") or "pass_rate"
    split = data.get("split") or ""
    chart, scorers = None, ["pass_rate"]
    if eval_set is not None:
        runs = EvalRun.objects.filter(eval_set=eval_set, started__isnull=False).exclude(status__in=LIVE_STATUSES)
        if split:
            runs = runs.filter(split=split)
        by_variant: dict[str, Series] = {}
        names: set[str] = set()
        for eval_run in runs.order_by("started")[:2000]:
            metrics = (eval_run.summary or {}).get("metrics") or {}
            names.update(metrics)
            if scorer == "pass_rate":
                value = eval_run.pass_rate
            else:
                value = (metrics.get(scorer) or {}).get("mean")
            if value is None:
                continue
            label = f"{eval_run.target_id}/{eval_run.variant or '-'}"
            series = by_variant.setdefault(label, Series(label, []))
            series.points.append(
                Point(eval_run.started, float(value), f"{label}: {float(value) * 100:.1f}% — run {eval_run.pk}")
            )
        scorers += sorted(names)
        chart = line_chart(list(by_variant.values()))
    context = {"form": form, "eval_set": eval_set, "scorer": scorer, "scorers": scorers, "chart": chart, "split": split}
    return render_page(request, "evals/trends.html", context, {"trend-chart": "chart"})


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
def start_run_check(request: HttpRequest) -> HttpResponse:
    """The start-run form's warning for the picked set and target (htmx, on change)."""
    targets, _ = discovered_targets()
    set_id = request.GET.get("eval_set", "")
    eval_set = EvalSet.objects.filter(pk=int(set_id)).first() if set_id.isdigit() else None
    warning = input_kind_warning(eval_set, targets.get(request.GET.get("target", "")))
    return TemplateResponse(request, "evals/start_run.html#input_kind", {"input_kind_warning": warning})


@require_http_methods(["GET", "POST"])
@member_required
def start_run(request: HttpRequest) -> HttpResponse:
    """Start an eval run: prepare it, enqueue it, and go to its live page."""
    targets, problems = discovered_targets()
    form = StartRunForm(request.POST or None, targets=targets, initial={"split": "dev"})
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
                extra_config={"executor": EXECUTOR},
            )
        except (HeldOutError, UnknownVariantError, ValueError) as exc:
            form.add_error(None, str(exc))
        else:
            enqueue_eval_run(eval_run)
            url = reverse("evals:run", args=[eval_run.id])
            if getattr(request, "htmx", False):
                response = HttpResponse(status=204)
                response["HX-Redirect"] = url
                return response
            return redirect(url)
    variants = {tid: list(spec.variants) for tid, spec in targets.items()}
    picked_set = form["eval_set"].value()
    picked_set = EvalSet.objects.filter(pk=picked_set).first() if str(picked_set or "").isdigit() else None
    warning = input_kind_warning(picked_set, targets.get(str(form["target"].value() or "")))
    context = {
        "form": form,
        "problems": problems,
        "variants": variants,
        "targets": targets,
        "input_kind_warning": warning,
    }
    return render_page(request, "evals/start_run.html", context)
