"""Trace pages: recent runs (payloads deferred) and one run's span tree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Paginator
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from apps.core.access import can_capture, viewer_required
from apps.core.pages import render_page
from apps.traces.access import readable_runs
from apps.traces.models import Run, RunStatus
from apps.traces.otel_ingest import SOURCE
from apps.traces.queries import VIEWER_MAX_EVENTS, SpanTree, span_tree
from apps.traces.signals import trace_page_sections
from apps.traces.span_detail import span_detail
from apps.traces.tree_rows import tree_rows


@require_GET
@viewer_required
def trace_list(request: HttpRequest) -> HttpResponse:
    """Recent runs, optionally of one target; large JSON columns are not read."""
    runs = readable_runs(request.user).defer("final_answer", "metadata", "step_metrics").order_by("-started")
    target = request.GET.get("target", "")
    if target:
        runs = runs.filter(target_id=target)
    page = Paginator(runs, 50).get_page(request.GET.get("page") or 1)
    return render_page(request, "traces/list.html", {"page": page, "target": target}, {"traces-table": "table"})


@dataclass(frozen=True, slots=True)
class TraceStatus:
    """The status a trace page shows at its top: the case's verdict when the run belongs to an eval
    result (a run that finished ``ok`` but whose answer failed is *failed*), else the run's own.

    Attributes:
        label: ``passed`` / ``failed`` / ``errored`` / ``unscored`` / ``ok`` / ``error`` /
            ``timeout`` / ``running``.
        icon: A text symbol saying the same as the colour (never colour alone).
        source: What it comes from (``case verdict of eval run 7`` / ``run status``).
        failed_spans: Spans (and error events) inside the trace that failed.
    """

    label: str
    icon: str
    source: str
    failed_spans: int


_ICONS = {"passed": "✓", "ok": "✓", "failed": "✗", "errored": "⚠", "error": "⚠", "timeout": "⚠", "running": "…"}


def trace_status(run: Run, results: list[Any], tree: SpanTree) -> TraceStatus:
    """The honest status of ``run``: its newest eval result's case status when it has one, else
    the run's status; ``ok`` only when the run ended ok. Failed spans are counted beside it."""
    failed = sum(1 for node in tree.nodes if node.state == "error")
    if results:
        newest = max(results, key=lambda r: r.pk)
        label = str(newest.status)
        source = f"case verdict in eval run {newest.eval_run_id}"
    else:
        label = str(run.status) if run.status != RunStatus.OK or not run.error else str(RunStatus.ERROR)
        source = "run status (not scored by an eval run)"
    return TraceStatus(label, _ICONS.get(label, "?"), source, failed)


def _case_input(results: list[Any]) -> tuple[bool, Any]:
    """``(found, input)`` of the eval case the newest result scored, in one query through the
    result's relations (``apps.traces`` sits below ``apps.evals`` and imports nothing of it)."""
    if not results:
        return False, None
    newest = max(results, key=lambda r: r.pk)
    found = list(
        type(newest)
        .objects.filter(pk=newest.pk, eval_run__eval_set__cases__case_id=F("case_id"))
        .values_list("eval_run__eval_set__cases__input", flat=True)[:1]
    )
    return (True, found[0]) if found else (False, None)


def _trace_input(tree: SpanTree) -> Any:
    """What the trace says its input was when no eval case does: the first user message, else the
    root span's input preview (OTLP-ingested and playground traces)."""
    for node in tree.nodes:
        messages = node.attributes.get("input_messages")
        if isinstance(messages, list):
            for message in messages:
                if isinstance(message, dict) and message.get("role") == "user":
                    return message.get("content")
        if node.kind == "message" and node.attributes.get("role") == "user":
            return node.attributes.get("content")
    if tree.nodes and "input_preview" in tree.nodes[0].attributes:
        return tree.nodes[0].attributes["input_preview"]
    return None


@require_GET
@viewer_required
def trace_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One run as a trace viewer: the case's input and honest status on top, the span tree (an ARIA
    treegrid with duration bars) on the left, the selected span's detail on the right.

    ``?span=<id>`` selects a span server-side (the viewer works without JS); the static
    ``trace-viewer.js`` selects client-side and asks for the ``span-detail`` partial alone.
    Two queries for the tree whatever its size (the run, its events), one for eval results and one
    for the case's input.
    """
    # another member's playground conversation is a 404, as on the playground itself
    run = get_object_or_404(readable_runs(request.user), pk=pk)
    tree = span_tree(run, limit=VIEWER_MAX_EVENTS)
    wanted = request.GET.get("span", "")
    selected = tree.by_id.get(wanted) if wanted else None
    if selected is None and tree.nodes:
        selected = tree.nodes[0]
    context: dict[str, Any] = {
        "run": run,
        "tree": tree,
        "selected": selected,
        "detail": span_detail(tree, selected) if selected is not None else None,
        "missing_span": wanted if wanted and wanted not in tree.by_id else "",
    }
    htmx = getattr(request, "htmx", None)
    if htmx and htmx.target == "span-detail":
        return render_page(request, "traces/detail.html", context, {"span-detail": "detail"})
    results = list(
        run.eval_results.select_related("eval_run").only(
            "id", "case_id", "status", "eval_run__id", "eval_run__variant"
        )[:20]
    )
    has_case, case_input = _case_input(results)
    ingested = (run.metadata or {}).get("source") == SOURCE
    context.update(
        {
            "rows": tree_rows(tree, selected.span_id if selected is not None else None),
            "results": results,
            "status": trace_status(run, results, tree),
            "has_case_input": has_case,
            "case_input": case_input if has_case else _trace_input(tree),
            "ingested": ingested,
            # an ingested (OTLP) trace is real traffic: it can become an eval case, as a playground chat can
            "can_add_case": ingested and can_capture(request.user),
            # what the floors above add (online scores): HTML from apps.traces.signals receivers
            "sections": [html for _, html in trace_page_sections.send(sender=Run, run=run, request=request) if html],
        }
    )
    return render_page(request, "traces/detail.html", context)
