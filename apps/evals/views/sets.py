"""Pages of eval sets: the list, one set (cases browser), its splits over time, trends."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from apps.core.access import viewer_required
from apps.core.forms import ascii_int
from apps.core.pages import render_page
from apps.evals.charts.lines import line_chart
from apps.evals.models import EvalRun, EvalSet, SetVersion
from apps.evals.queries.case_history import case_history, case_in_set
from apps.evals.queries.conversations import mark_conversations
from apps.evals.queries.figures import latest_finished_set, latest_target_variant, splits_figures, trend_series
from apps.evals.queries.latest import latest_by_variant
from apps.evals.queries.leaderboard import leaderboard
from apps.evals.queries.runs import NEWEST_FIRST, eval_run_counts_by_set, test_split_runs
from apps.evals.queries.sets import set_cases, split_counts, split_counts_by_set
from apps.evals.sets.versions import diff_versions
from apps.evals.views import HtmxHttpRequest
from apps.evals.views.forms import CaseFilterForm, TrendsForm
from evalcore.types import SPLITS


@require_GET
@viewer_required
def set_list(request: HtmxHttpRequest) -> HttpResponse:
    """Every set with its description, per-split case counts, how many eval runs it has and the
    latest pass rate of each target/variant (with its interval and coverage)."""
    counts = split_counts_by_set()
    run_counts = eval_run_counts_by_set()
    sets = list(EvalSet.objects.all())
    latest = latest_by_variant([s.pk for s in sets])
    rows = []
    for eval_set in sets:
        splits = counts.get(eval_set.pk) or dict.fromkeys(SPLITS, 0)
        rows.append(
            {
                "set": eval_set,
                "splits": splits,
                "n": sum(splits.values()),
                "runs": run_counts.get(eval_set.pk, 0),
                "latest": latest.get(eval_set.pk, []),
            }
        )
    return render_page(request, "evals/sets.html", {"rows": rows})


@require_GET
@viewer_required
def set_detail(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """A set: per-split counts, the cases browser, its targets/variants (links to the splits view)."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    form = CaseFilterForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    cases = set_cases(
        eval_set, split=data.get("split") or None, tag=data.get("tag") or None, search=data.get("q") or None
    )
    page = Paginator(cases, 50).get_page(data.get("page") or 1)
    mark_conversations(page.object_list)  # which cases are conversations (case.n_turns)
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
        "versions": list(
            SetVersion.objects.filter(eval_set=eval_set)
            .select_related("created_by")
            .order_by("-number")[:VERSIONS_SHOWN]
        ),
    }
    return render_page(request, "evals/set_detail.html", context, {"cases": "cases"})


@require_GET
@viewer_required
def set_leaderboard(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """The set's leaderboard on one split (``?split=``, default dev): the latest finished run per
    target / variant, pass rate and main scores with intervals and coverage, cost and latency per
    case, model and set version; runs on an older set version listed apart
    (:func:`apps.evals.queries.leaderboard.leaderboard`). Loaded into the set page; also a page."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    split = request.GET.get("split") or "dev"
    if split not in (*SPLITS, "all"):
        split = "dev"
    board = leaderboard(eval_set, split)
    return render_page(request, "evals/leaderboard.html", {"eval_set": eval_set, "board": board}, {"board": "board"})


@require_GET
@viewer_required
def case_history_view(request: HtmxHttpRequest, set_id: int, case_id: str) -> HttpResponse:
    """One case across runs: every run that scored it (name, verdict, scores, variant, set
    version, date), newest first, 50 a page. 404 for a case id the set never had and no run
    scored; a case removed from the set keeps its history (and says it was removed)."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    case = case_in_set(eval_set, case_id)
    results = case_history(eval_set, case_id, request.user)
    if case is None and not results.exists():
        raise Http404(f"set {eval_set.name} has no case {case_id!r} and no run scored one")
    page = Paginator(results, 50).get_page(ascii_int(request.GET.get("page", "")) or 1)
    context = {"eval_set": eval_set, "case_id": case_id, "case": case, "page": page}
    return render_page(request, "evals/case_history.html", context, {"history": "history"})


VERSIONS_SHOWN = 20
"""Versions listed on a set's page, newest first."""


@require_GET
@viewer_required
def set_version_diff(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """The cases added, removed and changed between two versions of a set (``?a=N&b=M``)."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    numbers = [ascii_int(request.GET.get(k, "")) for k in ("a", "b")]
    if None in numbers:
        raise Http404("give two version numbers: ?a=1&b=2")
    a, b = (get_object_or_404(SetVersion, eval_set=eval_set, number=n) for n in numbers)
    change = diff_versions(a, b)
    context = {"eval_set": eval_set, "a": a, "b": b, "diff": change, "shown": DIFF_IDS_SHOWN}
    return render_page(request, "evals/set_versions.html", context)


DIFF_IDS_SHOWN = 200
"""Case ids listed per kind of change on the version diff page."""


@require_GET
@viewer_required
def set_splits(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    """Train/dev/test side by side across a target/variant's runs, and the train - test gap over time."""
    eval_set = get_object_or_404(EvalSet, pk=set_id)
    target_id = request.GET.get("target", "")
    variant = request.GET.get("variant", "")
    if "target" not in request.GET:
        # opened bare: on the target/variant of the set's latest finished run, never empty
        target_id, variant = latest_target_variant(eval_set) or (target_id, variant)
    figures = splits_figures(eval_set, target_id, variant)
    test_runs = test_split_runs(eval_set, variant=variant, target_id=target_id)
    context = {
        "eval_set": eval_set,
        "target_id": target_id,
        "variant": variant,
        "rows": figures.rows,
        "split_chart": line_chart(figures.lines),
        "gap_chart": line_chart([figures.gap] if figures.gap.points else [], y_min=None, y_max=None),
        "test_runs": test_runs,
        "lockbox": test_runs > 1,
        # ordered by the two fields only: the model's default ordering would make distinct() keep
        # one row per run
        "variants": EvalRun.objects.filter(eval_set=eval_set)
        .order_by("target_id", "variant")
        .values("target_id", "variant")
        .distinct(),
    }
    return render_page(request, "evals/splits.html", context)


TRENDS_WIDTH, TRENDS_HEIGHT = 1200, 340
"""viewBox of the trends chart: drawn at the page width (``width="100%"``, at most 1500 px in
``site.css``) and scaled uniformly, so its 11 px labels show at 11-14 px on 1280-1920 px screens."""


@require_GET
@viewer_required
def trends(request: HtmxHttpRequest) -> HttpResponse:
    """One scorer's mean (or the pass rate) per variant over time, for one set."""
    form = TrendsForm(request.GET or None)
    data = form.cleaned_data if form.is_valid() else {}
    eval_set = data.get("set")
    if eval_set is None:
        # no set picked: the set of the latest finished run (a chart with lines), else the first
        eval_set = latest_finished_set()
        if eval_set is not None:  # the picker shows the set the chart is for
            form = TrendsForm({**request.GET.dict(), "set": eval_set.pk})
            form.is_valid()
    scorer = data.get("scorer") or "pass_rate"
    split = data.get("split") or ""
    chart, scorers = None, ["pass_rate"]
    if eval_set is not None:
        series, scorers = trend_series(eval_set, scorer, split)
        chart = line_chart(series, width=TRENDS_WIDTH, height=TRENDS_HEIGHT)
    context = {"form": form, "eval_set": eval_set, "scorer": scorer, "scorers": scorers, "chart": chart, "split": split}
    return render_page(request, "evals/trends.html", context, {"trend-chart": "chart"})
