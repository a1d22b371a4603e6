"""Stored runs as OTLP spans (see :mod:`evalcore.otel.export` for the mapping).

The resource of an exported trace names the target as ``service.name``, so a trace posted back
to Evalsite's own OTLP endpoint lands under the same target.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apps.traces.models import Event, Run
from evalcore.jsonvalue import MISSING
from evalcore.otel import semconv as sc
from evalcore.otel.export import CaseRoot, trace_spans
from evalcore.otel.messages import genai_messages
from evalcore.otel.model import OtelSpan, json_text, otel_span_id, otel_trace_id, to_ns
from evalcore.tracing import TraceEvent

SERVICE_NAMESPACE = "evalsite"


def events_by_run(runs: Iterable[Run]) -> dict[int, list[TraceEvent]]:
    """The events of several runs in one query, by run primary key, each list in ``seq`` order."""
    by_pk = {run.pk: run for run in runs}
    out: dict[int, list[TraceEvent]] = {pk: [] for pk in by_pk}
    rows = Event.objects.filter(run_id__in=list(by_pk)).order_by("run_id", "seq")
    for row in rows.iterator(chunk_size=2000):
        run = by_pk[row.run_id]
        out[row.run_id].append(
            TraceEvent(row.trace_id, run.run_id, row.seq, row.ts.timestamp(), row.type, row.name, row.payload or {})
        )
    return out


def run_resource(run: Run) -> dict[str, Any]:
    """The resource attributes of a run's exported trace."""
    return {sc.SERVICE_NAME: run.target_id or "evalsite", "service.namespace": SERVICE_NAMESPACE}


def run_spans(run: Run, events: list[TraceEvent], *, root: CaseRoot | None = None) -> list[OtelSpan]:
    """A stored run's trace as OTLP spans.

    The case's root span gets ``evalsite.run.id``, ``evalsite.trace.id`` and
    ``evalsite.target.id`` beside whatever ``root`` brings, and the run's final answer as its
    output messages; a run with events but no span gets a root made from the run's times.
    """
    root = root or CaseRoot()
    root.attributes = {
        sc.RUN_ID: run.run_id,
        sc.TRACE_ID: run.trace_id,
        **({sc.TARGET_ID: run.target_id} if run.target_id else {}),
        **root.attributes,
    }
    if root.output is MISSING:
        root.output = run.final_answer
    started = run.started.timestamp()
    root.started_at = started
    root.ended_at = started + (run.elapsed_ms or 0.0) / 1000.0
    root.name = f"evalsite {run.target_id or 'run'}"
    if not isinstance((run.metadata or {}).get("turns"), list):
        return trace_spans(events, trace_id=run.trace_id, resource=run_resource(run), root=root)
    # A conversation case played turn by turn: its trace holds one top-level ``turn`` span per
    # turn. The case gets a span of its own (the root's attributes, scores and answer) and every
    # turn is a child of it, rather than turn 1 standing for the case and the others left as roots.
    spans = trace_spans(events, trace_id=run.trace_id, resource=run_resource(run))
    case = conversation_root(run, spans, root)
    for span in spans:
        if span.parent_span_id is None:
            span.parent_span_id = case.span_id
    return [case, *spans]


def conversation_root(run: Run, spans: list[OtelSpan], root: CaseRoot) -> OtelSpan:
    """The span of a conversation case: ``root``'s name, attributes and events, from the run's
    start to its end (or its last span's), the run's transcript as ``gen_ai.output.messages``."""
    started = root.started_at if root.started_at is not None else run.started.timestamp()
    start_ns = min([to_ns(started), *(s.start_ns for s in spans)])
    end_ns = max([to_ns(root.ended_at if root.ended_at is not None else started), *(s.end_ns for s in spans)])
    attributes = dict(root.attributes)
    if root.output is not MISSING and root.output is not None:
        text = root.output if isinstance(root.output, str) else json_text(root.output)
        attributes[sc.OUTPUT_MESSAGES] = json_text(genai_messages([{"role": "assistant", "content": text}]))
    error = run.error if isinstance(run.error, dict) else None
    return OtelSpan(
        trace_id=otel_trace_id(run.trace_id),
        span_id=otel_span_id(run.trace_id, "evalsite-conversation"),
        parent_span_id=None,
        name=root.name,
        start_ns=start_ns,
        end_ns=max(start_ns, end_ns),
        attributes=attributes,
        events=sorted(root.events, key=lambda e: e.time_ns),
        status="error" if error else "unset",
        status_message=str(error.get("message") or "") if error else "",
        resource=run_resource(run),
    )
