"""Testing alerts window by window, and delivering their firings by webhook.

:func:`evaluate_alerts` walks each active alert's closed windows in order (a window is closed
when its end has passed, none of its sampled traces is still pending and its traces have stopped
arriving: :data:`SETTLE_S`), tests each against
its baseline with :func:`evalcore.alerts.compare_windows`, keeps a streak of windows that fire,
and records one :class:`~apps.online.models.AlertFiring` when the streak reaches the alert's
``consecutive`` count. It fires once per episode: a window that does not fire ends the episode.
A window whose traces arrive after it was tested is not tested again.

:func:`deliver_pending` POSTs each undelivered firing to its webhook (the JSON body in
docs/online.md, or a Slack-compatible ``{"text": ...}``), tried again on later passes up to
:data:`MAX_DELIVERIES` times; the firing keeps the outcome.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q
from django.urls import reverse
from django.utils import timezone

from apps.online.models import Alert, AlertFiring, Delivery, OnlineScore, PayloadFormat, ScoreState
from evalcore.alerts import WindowComparison, compare_windows

log = logging.getLogger(__name__)

MAX_DELIVERIES = 5
"""Attempts to deliver one firing before it stays ``failed``."""
WEBHOOK_TIMEOUT_S = 10.0
SETTLE_S = 60.0
"""A window is tested once its traces have stopped arriving: a later window has traces, or none
of its traces was matched in the last ``SETTLE_S`` seconds (a backfill or a burst of late OTLP
exports fills a past window over several worker passes)."""
HISTORY = 200
"""Tested windows kept in an alert's state (the rule page shows them)."""
EVIDENCE_TRACES = 20
"""Traces of the recent window linked from a firing (failing ones first)."""


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _baseline_range(alert: Alert, start: datetime) -> tuple[datetime, datetime]:
    if alert.baseline_start is not None and alert.baseline_end is not None:
        return alert.baseline_start, alert.baseline_end
    return start - timedelta(hours=alert.baseline_hours), start


def _values(alert: Alert, since: datetime, until: datetime) -> dict[datetime, list[bool | float]]:
    """The alert's score values of scored rows, per window start, for windows in ``[since, until)``."""
    by_window: dict[datetime, list[bool | float]] = defaultdict(list)
    rows = OnlineScore.objects.filter(
        rule_id=alert.rule_id, state=ScoreState.SCORED, window_start__gte=since, window_start__lt=until
    ).values_list("window_start", "values")
    for start, values in rows.iterator(chunk_size=2000):
        value = (values or {}).get(alert.score_name)
        if isinstance(value, bool | int | float):
            by_window[start].append(value)
    return by_window


def _in_range(by_window: dict[datetime, list[bool | float]], start: datetime, end: datetime) -> list[bool | float]:
    return [v for w, values in by_window.items() if start <= w < end for v in values]


def _record(comparison: WindowComparison) -> dict[str, Any]:
    return {
        "test": comparison.test,
        "n_baseline": comparison.n_baseline,
        "n_recent": comparison.n_recent,
        "baseline_value": comparison.baseline_value,
        "recent_value": comparison.recent_value,
        "effect": comparison.effect,
        "p_value": comparison.p_value,
        "fires": comparison.fires,
        "reason": comparison.reason,
    }


def evaluate_alert(alert: Alert, *, now: datetime | None = None) -> int:
    """Test ``alert`` on its closed windows not tested yet; returns the firings recorded (0 or 1
    per episode)."""
    now = now or timezone.now()
    size = timedelta(minutes=alert.rule.window_minutes)
    state = dict(alert.state or {})
    last = datetime.fromisoformat(state["last_window"]) if state.get("last_window") else None
    windows = OnlineScore.objects.filter(rule_id=alert.rule_id, sampled=True)
    if last is not None:
        windows = windows.filter(window_start__gt=last)
    counts = list(
        windows.values("window_start")
        .annotate(pending=Count("pk", filter=Q(state=ScoreState.PENDING)), last_matched=Max("matched_at"))
        .order_by("window_start")
    )
    closed = []
    for index, window in enumerate(counts):  # in order: a window not closed stops the walk
        later = index + 1 < len(counts)
        settled = later or window["last_matched"] <= now - timedelta(seconds=SETTLE_S)
        if window["window_start"] + size > now or window["pending"] or not settled:
            break
        closed.append(window["window_start"])
    if not closed:
        return 0
    ranges = [_baseline_range(alert, w) for w in closed]
    since = min(min(b for b, _ in ranges), closed[0])
    by_window = _values(alert, since, closed[-1] + size)
    history: list[dict[str, Any]] = list(state.get("history") or [])
    streak, firing, fired = int(state.get("streak") or 0), bool(state.get("firing")), 0
    firings = []
    for start, (base_start, base_end) in zip(closed, ranges, strict=True):
        comparison = compare_windows(
            _in_range(by_window, base_start, base_end),
            by_window.get(start, []),
            alpha=alert.alpha,
            min_effect=alert.min_effect,
            min_n=alert.min_n,
            direction=alert.direction,  # type: ignore[arg-type]
        )
        entry = {"window_start": _iso(start), "baseline": [_iso(base_start), _iso(base_end)], **_record(comparison)}
        history.append(entry)
        streak = streak + 1 if comparison.fires else 0
        if not comparison.fires:
            firing = False
        elif streak >= alert.consecutive and not firing:
            firing = True
            fired += 1
            evidence = {
                "score_name": alert.score_name,
                "direction": alert.direction,
                "alpha": alert.alpha,
                "min_effect": alert.min_effect,
                "min_n": alert.min_n,
                "consecutive": alert.consecutive,
                "window_minutes": alert.rule.window_minutes,
                "recent": {"start": _iso(start), "end": _iso(start + size)},
                "baseline": {"start": _iso(base_start), "end": _iso(base_end)},
                **_record(comparison),
                "windows": history[-alert.consecutive :],
                "trace_ids": _evidence_traces(alert, start, start + size),
            }
            firings.append(
                AlertFiring(
                    alert=alert,
                    window_start=start,
                    window_end=start + size,
                    evidence=evidence,
                    delivery=Delivery.PENDING if alert.webhook_url else Delivery.NONE,
                )
            )
    state.update({"last_window": _iso(closed[-1]), "streak": streak, "firing": firing, "history": history[-HISTORY:]})
    with transaction.atomic():
        AlertFiring.objects.bulk_create(firings)
        Alert.objects.filter(pk=alert.pk).update(state=state)
    alert.state = state
    return fired


def _evidence_traces(alert: Alert, start: datetime, end: datetime) -> list[int]:
    """Trace (run) pks of the window, the alert's failing or lowest scores first."""
    rows = OnlineScore.objects.filter(
        rule_id=alert.rule_id, state=ScoreState.SCORED, window_start__gte=start, window_start__lt=end
    ).values_list("run_id", "values")
    ranked = sorted(
        ((float((v or {}).get(alert.score_name, 1.0)), pk) for pk, v in rows if alert.score_name in (v or {})),
        reverse=alert.direction == "rise",
    )
    return [pk for _, pk in ranked[:EVIDENCE_TRACES]]


def evaluate_alerts(*, now: datetime | None = None) -> int:
    """Test every active alert (:func:`evaluate_alert`); returns the firings recorded."""
    return sum(evaluate_alert(a, now=now) for a in Alert.objects.filter(active=True).select_related("rule"))


def site_url(path: str) -> str:
    """``path`` under ``EVALSITE_SITE_URL`` (the portal's public address; a bare path when unset)."""
    return str(getattr(settings, "EVALSITE_SITE_URL", "") or "").rstrip("/") + path


def webhook_body(firing: AlertFiring) -> dict[str, Any]:
    """The JSON body POSTed for a firing (documented in docs/online.md, "Webhook body")."""
    alert = firing.alert
    evidence = firing.evidence
    return {
        "event": "evalsite.alert.fired",
        "firing_id": firing.pk,
        "fired_at": _iso(firing.fired_at),
        "alert": {"id": alert.pk, "name": alert.name, "score_name": alert.score_name, "direction": alert.direction},
        "rule": {"id": alert.rule_id, "name": alert.rule.name},
        "recent": evidence["recent"] | {"n": evidence["n_recent"], "value": evidence["recent_value"]},
        "baseline": evidence["baseline"] | {"n": evidence["n_baseline"], "value": evidence["baseline_value"]},
        "test": evidence["test"],
        "p_value": evidence["p_value"],
        "effect": evidence["effect"],
        "min_effect": evidence["min_effect"],
        "alpha": evidence["alpha"],
        "consecutive": evidence["consecutive"],
        "windows": evidence["windows"],
        "links": {
            "rule": site_url(reverse("online:rule", args=[alert.rule_id])),
            "traces": [site_url(reverse("traces:detail", args=[pk])) for pk in evidence["trace_ids"]],
        },
    }


def slack_body(firing: AlertFiring) -> dict[str, Any]:
    """A Slack-compatible body (incoming webhooks take ``{"text": ...}``, mrkdwn links)."""
    body = webhook_body(firing)
    recent, base = body["recent"], body["baseline"]
    text = (
        f":rotating_light: *{body['alert']['name']}* on rule *{body['rule']['name']}*: "
        f"{body['alert']['score_name']} {recent['value']:.3f} (n={recent['n']}) vs baseline "
        f"{base['value']:.3f} (n={base['n']}), effect {body['effect']:+.3f}, "
        f"{body['test']} p={body['p_value']:.2g} over {body['consecutive']} window(s). "
        f"<{body['links']['rule']}|rule page>"
    )
    return {"text": text}


def deliver(firing: AlertFiring) -> bool:
    """POST one firing to its alert's webhook and record the outcome; returns whether delivered."""
    alert = firing.alert
    body = slack_body(firing) if alert.payload_format == PayloadFormat.SLACK else webhook_body(firing)
    request = urllib.request.Request(
        alert.webhook_url,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "User-Agent": "evalsite-alerts"},
        method="POST",
    )
    firing.delivery_attempts += 1
    try:
        with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as answer:
            answer.read()
        firing.delivery, firing.delivery_error, firing.delivered_at = Delivery.DELIVERED, "", timezone.now()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        firing.delivery_error = f"{type(exc).__name__}: {exc}"[:2000]
        firing.delivery = Delivery.FAILED if firing.delivery_attempts >= MAX_DELIVERIES else Delivery.PENDING
        log.warning("alert %s: webhook delivery failed (%s)", alert.pk, firing.delivery_error)
    firing.save(update_fields=["delivery", "delivery_error", "delivery_attempts", "delivered_at"])
    return firing.delivery == Delivery.DELIVERED


def deliver_pending() -> int:
    """Deliver every firing still waiting for its webhook; returns how many got through."""
    waiting = AlertFiring.objects.filter(delivery=Delivery.PENDING).select_related("alert__rule").order_by("pk")
    return sum(deliver(f) for f in waiting)
