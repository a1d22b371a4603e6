"""OTLP spans from a team's own agent stored as traces (the endpoint: :mod:`apps.traces.otel_views`).

One OpenTelemetry trace is one Evalsite run (``traces.Run``, run id ``otlp:<trace id>``), as
a Langfuse trace is: its target is the sender's ``service.name``, so the traces page lists a
service's traffic under ``?target=<service.name>``. Spans of a trace that arrive in several
requests (a batch processor sends children before their parent) join the same run; the run's
events are put back in order and its summary (input, answer, model, tokens, tool calls, status)
read again from all of them. A span already stored (same trace id and span id) is skipped, so
posting the same spans again changes nothing.

Ingested runs are team data like eval runs (any viewer reads them), owned by the token's user.

A span that maps to nothing Evalsite knows (no GenAI, OpenInference or Evalsite attributes, see
:func:`evalcore.otel.ingest.unmapped_reason`) is still stored, as a plain step; the run's
``metadata["unmapped_spans"]`` counts and names such spans (the trace page shows it) and the
endpoint names them in its answer, so an opaque trace never looks like a mapped one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from apps.traces.models import Event, Run
from apps.traces.services import RunAggregate, event_row, run_fields
from apps.traces.signals import traces_ingested
from evalcore.jsonvalue import finite_or_text
from evalcore.otel import semconv as sc
from evalcore.otel.ingest import Pending, order_events, span_events, trace_summary, unmapped_reason
from evalcore.otel.model import OtelSpan
from evalcore.otel.otlp import fill_missing_times
from evalcore.tracing import SPAN_BEGIN, SPAN_END, TraceEvent
from evalcore.types import ErrorInfo, RunRecord

RUN_PREFIX = "otlp:"
SOURCE = "otlp"
"""``Run.metadata["source"]`` of an ingested run (the trace page offers "add as eval case")."""
_RESOURCE_KEYS = 30
_UNMAPPED_NAMES = 20
"""How many unmapped span names a run keeps (the count is exact)."""
_EVALSITE_CASE = ("evalsite.eval_run.", "evalsite.eval_set.", "evalsite.case.", "evalsite.score.", "evalsite.variant")


@dataclass(slots=True)
class IngestOutcome:
    """What one export request stored.

    Attributes:
        traces: Traces that got new spans.
        spans: Spans stored.
        duplicates: Spans already stored (skipped).
        run_ids: The run ids of the traces touched, in request order.
        unmapped: ``(span name, why)`` of each stored span that mapped to no model call, tool
            call, agent or step (kept as a plain node).
    """

    traces: int = 0
    spans: int = 0
    duplicates: int = 0
    run_ids: list[str] = field(default_factory=list)
    unmapped: list[tuple[str, str]] = field(default_factory=list)

    def unmapped_message(self, shown: int = 5) -> str:
        """One sentence counting and naming the unmapped spans (``""``: none)."""
        if not self.unmapped:
            return ""
        names = ", ".join(repr(name) for name, _ in self.unmapped[:shown])
        more = f" and {len(self.unmapped) - shown} more" if len(self.unmapped) > shown else ""
        reasons = "; ".join(dict.fromkeys(why for _, why in self.unmapped))
        n = len(self.unmapped)
        return f"{n} span{'s' if n != 1 else ''} stored unmapped (as plain steps: {reasons}): {names}{more}"


def ingested_run_id(trace_id: str) -> str:
    """The run id of the ingested trace ``trace_id`` (32 hex digits)."""
    return RUN_PREFIX + trace_id


def ingest_spans(spans: Sequence[OtelSpan], *, user: Any) -> IngestOutcome:
    """Store spans, one run per trace id, each trace in its own transaction.

    Raises:
        django.db.DatabaseError: The database refused a write (the endpoint answers 503, so the
            sender retries).
    """
    by_trace: dict[str, list[OtelSpan]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    outcome = IngestOutcome()
    grown: list[str] = []
    for trace_id, group in by_trace.items():
        for attempt in range(2):
            try:
                with transaction.atomic():
                    stored, duplicates, unmapped = _ingest_trace(trace_id, group, user=user)
                break
            except IntegrityError:
                # two requests created the same trace's run at once: the second merges into it
                if attempt:
                    raise
        outcome.spans += stored
        outcome.duplicates += duplicates
        outcome.unmapped.extend(unmapped)
        if stored:
            outcome.traces += 1
        outcome.run_ids.append(ingested_run_id(trace_id))
        if stored:
            grown.append(ingested_run_id(trace_id))
    if grown:  # the floors above (online scoring rules) learn of the traces once they are committed
        transaction.on_commit(lambda: traces_ingested.send(sender=Run, run_ids=grown))
    return outcome


def _ingest_trace(trace_id: str, spans: list[OtelSpan], *, user: Any) -> tuple[int, int, list[tuple[str, str]]]:
    """Store one trace's new spans; returns (spans stored, spans skipped as already stored,
    ``(name, why)`` of the new spans stored unmapped)."""
    run_id = ingested_run_id(trace_id)
    run = Run.objects.select_for_update().filter(run_id=run_id).first()
    existing = list(Event.objects.filter(run=run).order_by("seq")) if run is not None else []
    known = {str(e.payload.get("span_id")) for e in existing if e.type in (SPAN_BEGIN, SPAN_END)}
    fresh: dict[str, OtelSpan] = {}
    for span in spans:
        if span.span_id not in known:
            fresh.setdefault(span.span_id, span)
    duplicates = len(spans) - len(fresh)
    if not fresh:
        return 0, duplicates, []
    pending = [
        Pending(TraceEvent(e.trace_id, run_id, e.seq, e.ts.timestamp(), e.type, e.name, e.payload or {}))
        for e in existing
    ]
    known_ns = min((round(p.event.ts * 1e9) for p in pending if p.event.ts > 0), default=None)
    fill_missing_times(list(fresh.values()), known_ns=known_ns)
    for span in fresh.values():
        pending.extend(span_events(span, run_id=run_id))
    events = [  # no NaN / infinity reaches a JSON column (stored as "NaN" / "Infinity": docs/otel.md)
        TraceEvent(e.trace_id, e.run_id, e.seq, e.ts, e.type, e.name, finite_or_text(e.payload))
        for e in order_events(pending, run_id=run_id)
    ]
    summary = trace_summary(events)
    root = _root_span(list(fresh.values()))
    target = (run.target_id if run is not None and run.target_id else "") or str(
        root.resource.get(sc.SERVICE_NAME) or "unknown_service"
    )
    metadata = dict(run.metadata or {}) if run is not None else {}
    metadata.update(
        {
            "source": SOURCE,
            "service_name": target,
            "root_span": summary.root_name,
            "input_messages": finite_or_text(summary.input_messages),
            "tool_calls": finite_or_text(summary.tool_calls),
            "n_spans": len(known) + len(fresh),
        }
    )
    metadata.setdefault("resource", finite_or_text(dict(list(root.resource.items())[:_RESOURCE_KEYS])))
    exported = {k: v for k, v in root.attributes.items() if k.startswith(_EVALSITE_CASE)}
    if exported:  # a case Evalsite exported: its eval run, case and scores
        metadata["evalsite"] = finite_or_text(exported)
    metadata.setdefault("ingested_by", getattr(user, "username", ""))
    if summary.conversation_id:
        metadata["conversation_id"] = summary.conversation_id
    # no model call said why it stopped: say so, rather than the "stop" a run of ours would get
    metadata["finish_reason"] = summary.finish_reason or ("error" if summary.error else "unknown")
    unmapped = [(span.name, why) for span in fresh.values() if (why := unmapped_reason(span)) is not None]
    if unmapped:
        found = metadata.get("unmapped_spans")
        before: dict[str, Any] = found if isinstance(found, dict) else {}
        names = [*(before.get("names") or []), *dict.fromkeys(name for name, _ in unmapped)]
        metadata["unmapped_spans"] = {
            "count": int(before.get("count") or 0) + len(unmapped),
            "names": list(dict.fromkeys(names))[:_UNMAPPED_NAMES],
            "why": sorted({*(before.get("why") or []), *(why for _, why in unmapped)}),
        }
    record = RunRecord(
        case_id="",
        run_id=run_id,
        trace_id=trace_id,
        output=summary.output,
        error=ErrorInfo(*summary.error) if summary.error else None,
        started_at=summary.started_at,
        elapsed_ms=summary.elapsed_ms,
        model=summary.model,
        tokens_in=summary.tokens_in,
        tokens_out=summary.tokens_out,
        metadata=metadata,
    )
    aggregate = RunAggregate()
    for event in events:
        aggregate.add(event)
    fields = run_fields(record, aggregate, target_id=target[:200])
    if run is None:
        run = Run.objects.create(run_id=run_id, owner=user, **fields)
    else:
        Run.objects.filter(pk=run.pk).update(**fields)
        Event.objects.filter(run=run).delete()
    Event.objects.bulk_create([event_row(run.pk, e) for e in events], batch_size=500)
    return len(fresh), duplicates, unmapped


def _root_span(spans: list[OtelSpan]) -> OtelSpan:
    """The span whose resource names the trace's service: a root among ``spans``, else the first."""
    ids = {s.span_id for s in spans}
    return next((s for s in spans if s.parent_span_id is None or s.parent_span_id not in ids), spans[0])
