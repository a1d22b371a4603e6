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
from evalcore.otel.model import OtelSpan
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
    return trace_spans(events, trace_id=run.trace_id, resource=run_resource(run), root=root)
