"""Reads of online scoring: a rule's coverage per window, its score over time, a trace's scores.

Coverage counts come from one grouped query over the rule's rows, so they always add up:
``matched = not_sampled + pending + scored + errored`` and ``sampled = matched - not_sampled``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet

from apps.online.models import Alert, AlertFiring, OnlineScore, Reason, ScoreState, ScoringRule
from apps.traces.models import Run
from evalcore.stats import FigureInterval, proportion_interval

_REASONS = dict(Reason.choices)


@dataclass(slots=True)
class Coverage:
    """One window's (or a whole rule's) coverage and pass rate.

    Attributes:
        start, end: The window (``None`` for a rule's totals).
        matched: Traces the rule's filters took.
        not_sampled, pending, scored, errored: Where each matched trace stands (they add up to
            ``matched``).
        pending_reasons, errored_reasons: ``{reason label: count}`` (never a silent pending).
        passed, failed: Scored traces whose verdict passed / failed (the rest of ``scored`` had
            no verdict: unscored, never a pass).
        interval: Wilson 95% interval of ``passed / (passed + failed)``.
    """

    start: datetime | None = None
    end: datetime | None = None
    matched: int = 0
    not_sampled: int = 0
    pending: int = 0
    scored: int = 0
    errored: int = 0
    passed: int = 0
    failed: int = 0
    pending_reasons: dict[str, int] = field(default_factory=dict)
    errored_reasons: dict[str, int] = field(default_factory=dict)
    interval: FigureInterval | None = None

    @property
    def sampled(self) -> int:
        return self.matched - self.not_sampled

    @property
    def judged(self) -> int:
        """Traces with a pass/fail verdict: the ``k`` of the pass rate's coverage ``n = k/N``."""
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    def add(self, state: str, reason: str, n: int, passed: int, failed: int) -> None:
        self.matched += n
        label = _REASONS.get(reason, reason)
        if state == ScoreState.NOT_SAMPLED:
            self.not_sampled += n
        elif state == ScoreState.PENDING:
            self.pending += n
            self.pending_reasons[label] = self.pending_reasons.get(label, 0) + n
        elif state == ScoreState.ERRORED:
            self.errored += n
            self.errored_reasons[label] = self.errored_reasons.get(label, 0) + n
        else:
            self.scored += n
            self.passed += passed
            self.failed += failed

    def finish(self) -> Coverage:
        self.interval = proportion_interval(self.passed, self.judged)
        return self


def _grouped(rows: QuerySet[OnlineScore], *keys: str) -> Any:
    return rows.values(*keys, "state", "reason").annotate(
        n=Count("pk"), n_passed=Count("pk", filter=Q(passed=True)), n_failed=Count("pk", filter=Q(passed=False))
    )


def rule_windows(rule: ScoringRule, *, since: datetime | None = None, limit: int = 500) -> list[Coverage]:
    """The rule's windows with traces, oldest first (the last ``limit`` of them)."""
    rows = OnlineScore.objects.filter(rule=rule)
    if since is not None:
        rows = rows.filter(window_start__gte=since)
    size = timedelta(minutes=rule.window_minutes)
    windows: dict[datetime, Coverage] = {}
    for row in _grouped(rows, "window_start").order_by():
        start = row["window_start"]
        assert isinstance(start, datetime)
        cover = windows.setdefault(start, Coverage(start=start, end=start + size))
        cover.add(str(row["state"]), str(row["reason"]), int(row["n"]), int(row["n_passed"]), int(row["n_failed"]))
    return [windows[k].finish() for k in sorted(windows)[-limit:]]


def rule_totals(rule: ScoringRule) -> Coverage:
    """The rule's coverage over all its windows."""
    total = Coverage()
    for row in _grouped(OnlineScore.objects.filter(rule=rule)).order_by():
        total.add(str(row["state"]), str(row["reason"]), int(row["n"]), int(row["n_passed"]), int(row["n_failed"]))
    return total.finish()


def trace_scores(run: Run) -> list[OnlineScore]:
    """The online scores of one trace, one per rule that matched it."""
    return list(OnlineScore.objects.filter(run=run).select_related("rule").order_by("rule__name"))


def recent_firings(*, limit: int = 20, rule: ScoringRule | None = None) -> list[AlertFiring]:
    """The latest alert firings (of ``rule``, or of every rule), newest first."""
    firings = AlertFiring.objects.select_related("alert__rule")
    if rule is not None:
        firings = firings.filter(alert__rule=rule)
    return list(firings.order_by("-fired_at", "-pk")[:limit])


def rule_alerts(rule: ScoringRule) -> list[Alert]:
    """The rule's alerts."""
    return list(rule.alerts.order_by("name"))
