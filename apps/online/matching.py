"""Which traces a rule takes: its filters, its deterministic sample, and a trace's window.

Plain reads of a ``traces.Run`` (and, only when a rule filters on span attributes or tags, of
its span-begin events). No writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from apps.online.models import ScoringRule
from apps.traces.models import Event, Run
from evalcore.tracing import SPAN_BEGIN

TAG_ATTRIBUTES = ("tag.tags", "langfuse.trace.tags", "evalsite.tags")
"""Span attributes read as a trace's tags (a list, or text split on commas): OpenInference's
``tag.tags``, Langfuse's ``langfuse.trace.tags`` and ours."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def sample_point(trace_id: str) -> float:
    """Where a trace falls in 0..1 for sampling: the first 8 bytes of ``sha256(trace id)``.

    The same trace is sampled by every rule with a rate above its point, on every worker and in
    a backfill, so sampling never depends on arrival order or on which process scored it.
    """
    digest = hashlib.sha256(trace_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_sampled(trace_id: str, rate: float) -> bool:
    """Whether a trace is in a rule's sample at ``rate`` (0..1)."""
    return rate >= 1.0 or sample_point(trace_id) < rate


def window_start(moment: datetime, minutes: int) -> datetime:
    """The start of the ``minutes``-long window holding ``moment`` (windows start at the Unix
    epoch, UTC, so every process cuts the same windows)."""
    size = timedelta(minutes=max(1, minutes))
    return _EPOCH + ((moment - _EPOCH) // size) * size


def _tags(value: Any) -> set[str]:
    if isinstance(value, list | tuple):
        return {str(v).strip() for v in value if str(v).strip()}
    if isinstance(value, str):
        return {part.strip() for part in value.split(",") if part.strip()}
    return set()


def span_facts(runs: Iterable[Run]) -> dict[int, tuple[dict[str, Any], set[str]]]:
    """Per run pk: the span attributes of its spans (the first value of each name) and its tags.

    One query over the runs' span-begin events (payloads included): call it only for rules that
    filter on attributes or tags.
    """
    facts: dict[int, tuple[dict[str, Any], set[str]]] = {}
    for run in runs:
        resource = (run.metadata or {}).get("resource")
        facts[run.pk] = (dict(resource) if isinstance(resource, dict) else {}, set())
    events = Event.objects.filter(run_id__in=list(facts), type=SPAN_BEGIN).values_list("run_id", "payload")
    for run_pk, payload in events.iterator(chunk_size=1000):
        attributes, tags = facts[run_pk]
        for key, value in (payload or {}).items():
            attributes.setdefault(key, value)
            if key in TAG_ATTRIBUTES:
                tags |= _tags(value)
    return facts


def needs_span_facts(rule: ScoringRule) -> bool:
    """Whether matching ``rule`` reads the traces' span attributes (attribute or tag filters)."""
    return bool(rule.attributes) or bool(rule.tags)


def matches(rule: ScoringRule, run: Run, facts: tuple[dict[str, Any], set[str]] | None = None) -> bool:
    """Whether ``run`` passes every filter of ``rule`` (an empty filter passes all).

    ``facts`` (from :func:`span_facts`) is needed when the rule filters on attributes or tags.
    """
    metadata = run.metadata or {}
    if rule.service and str(metadata.get("service_name") or run.target_id) != rule.service:
        return False
    if rule.target and run.target_id != rule.target:
        return False
    if rule.model and run.model != rule.model:
        return False
    if needs_span_facts(rule):
        attributes, tags = facts or ({}, set())
        for key, wanted in (rule.attributes or {}).items():
            if key not in attributes or str(attributes[key]) != str(wanted):
                return False
        if not {str(t) for t in rule.tags or []} <= tags:
            return False
    return True
