"""The online scoring API, mounted at ``/api/online/``: rules, their windows, alerts, firings.

Viewers read; members create and change rules and alerts and start backfills. Domain errors
(``evalcore.errors.EvalsiteError``) are mapped once in ``evalsite.api``.

No ``from __future__ import annotations``: ninja reads the routes' annotations at import.
"""

from datetime import datetime
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from ninja import Field, Router, Schema
from ninja.responses import Status
from pydantic import ConfigDict

from apps.core import access
from apps.evals.api.common import ERRORS, READ_ERRORS, get_or_404, require, require_view
from apps.evals.models import EvalSet
from apps.online.models import Alert, AlertFiring, Direction, PayloadFormat, ScoringRule
from apps.online.queries import Coverage, recent_firings, rule_windows
from apps.online.services import create_rule, update_rule
from apps.online.tasks import enqueue_backfill
from evalcore.errors import InvalidInputError

router = Router(tags=["online"])


class RuleIn(Schema):
    """A scoring rule. Empty filters match every ingested trace."""

    model_config = ConfigDict(extra="forbid")  # an unknown or misspelt field is named, not ignored

    name: str = Field(min_length=1, max_length=200)
    scorers: list[Any] = Field(description='scorer specs, as offline runs take them, e.g. ["exact_match"]')
    description: str = ""
    active: bool = True
    service: str = ""
    target: str = ""
    model: str = ""
    attributes: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    sample_rate: float = 1.0
    window_minutes: int = 60
    reference_set_id: int | None = None


class RulePatch(Schema):
    """The fields of a rule to change (others stay)."""

    model_config = ConfigDict(extra="forbid")  # an unknown or misspelt field is named, not ignored

    scorers: list[Any] | None = None
    description: str | None = None
    active: bool | None = None
    service: str | None = None
    target: str | None = None
    model: str | None = None
    attributes: dict[str, Any] | None = None
    tags: list[str] | None = None
    sample_rate: float | None = None
    window_minutes: int | None = None


class RuleOut(Schema):
    id: int
    name: str
    description: str
    active: bool
    service: str
    target: str
    model: str
    attributes: dict[str, Any]
    tags: list[str]
    sample_rate: float
    window_minutes: int
    scorers: list[Any]
    reference_set_id: int | None


class WindowOut(Schema):
    """One window's coverage: ``matched = not_sampled + pending + scored + errored``; the pass
    rate's coverage is ``n = judged / sampled``."""

    start: datetime | None
    end: datetime | None
    matched: int
    sampled: int
    not_sampled: int
    pending: int
    scored: int
    errored: int
    pending_reasons: dict[str, int]
    errored_reasons: dict[str, int]
    passed: int
    failed: int
    judged: int
    pass_rate: float | None
    low: float | None
    high: float | None
    interval_reason: str | None


class AlertIn(Schema):
    name: str = Field(min_length=1, max_length=200)
    score_name: str = Field(min_length=1, max_length=200)
    direction: Direction = Direction.DROP
    min_effect: float = Field(0.1, ge=0, le=1)
    alpha: float = Field(0.01, gt=0, lt=1)
    min_n: int = Field(30, ge=1)
    consecutive: int = Field(1, ge=1)
    baseline_hours: int = Field(24, ge=1)
    baseline_start: datetime | None = None
    baseline_end: datetime | None = None
    webhook_url: str = ""
    payload_format: PayloadFormat = PayloadFormat.JSON
    active: bool = True


class AlertOut(Schema):
    id: int
    rule_id: int
    name: str
    score_name: str
    direction: str
    min_effect: float
    alpha: float
    min_n: int
    consecutive: int
    baseline_hours: int
    baseline_start: datetime | None
    baseline_end: datetime | None
    webhook_url: str
    payload_format: str
    active: bool
    state: dict[str, Any]


class FiringOut(Schema):
    id: int
    alert_id: int
    fired_at: datetime
    window_start: datetime
    window_end: datetime
    evidence: dict[str, Any]
    delivery: str
    delivery_error: str
    delivery_attempts: int


class BackfillIn(Schema):
    start: datetime
    end: datetime


class BackfillOut(Schema):
    task_id: str


def _window(cover: Coverage) -> WindowOut:
    interval = cover.interval
    return WindowOut(
        start=cover.start,
        end=cover.end,
        matched=cover.matched,
        sampled=cover.sampled,
        not_sampled=cover.not_sampled,
        pending=cover.pending,
        scored=cover.scored,
        errored=cover.errored,
        pending_reasons=cover.pending_reasons,
        errored_reasons=cover.errored_reasons,
        passed=cover.passed,
        failed=cover.failed,
        judged=cover.judged,
        pass_rate=cover.pass_rate,
        low=interval.low if interval else None,
        high=interval.high if interval else None,
        interval_reason=interval.reason if interval else None,
    )


@router.get("/rules", response={200: list[RuleOut], **READ_ERRORS}, summary="Scoring rules")
def list_rules(request: HttpRequest) -> Any:
    require_view(request)
    return list(ScoringRule.objects.order_by("name"))


@router.post("/rules", response={201: RuleOut, **ERRORS}, summary="Create a scoring rule (members)")
def post_rule(request: HttpRequest, data: RuleIn) -> Any:
    user = require(request, access.can_start_runs, "create scoring rules")
    values = data.dict()
    set_id = values.pop("reference_set_id")
    reference = get_or_404(EvalSet, "reference_set_id", pk=set_id) if set_id is not None else None
    rule = create_rule(owner=user, reference_set=reference, **values)
    return Status(201, rule)


@router.get("/rules/{rule_id}", response={200: RuleOut, **READ_ERRORS}, summary="One scoring rule")
def get_rule(request: HttpRequest, rule_id: int) -> Any:
    require_view(request)
    return get_or_404(ScoringRule, "rule_id", pk=rule_id)


@router.patch("/rules/{rule_id}", response={200: RuleOut, **ERRORS}, summary="Change a scoring rule (members)")
def patch_rule(request: HttpRequest, rule_id: int, data: RulePatch) -> Any:
    require(request, access.can_start_runs, "change scoring rules")
    rule = get_or_404(ScoringRule, "rule_id", pk=rule_id)
    return update_rule(rule, **data.dict(exclude_none=True))


@router.get(
    "/rules/{rule_id}/windows",
    response={200: list[WindowOut], **READ_ERRORS},
    summary="A rule's coverage and pass rate per window, oldest first",
)
def list_windows(request: HttpRequest, rule_id: int, since: datetime | None = None) -> Any:
    require_view(request)
    rule = get_or_404(ScoringRule, "rule_id", pk=rule_id)
    return [_window(c) for c in rule_windows(rule, since=since)]


@router.post(
    "/rules/{rule_id}/backfill",
    response={202: BackfillOut, **ERRORS},
    summary="Apply a rule to the traces of a past time range (members)",
)
def post_backfill(request: HttpRequest, rule_id: int, data: BackfillIn) -> Any:
    require(request, access.can_start_runs, "backfill scoring rules")
    rule = get_or_404(ScoringRule, "rule_id", pk=rule_id)
    if data.end <= data.start:
        raise InvalidInputError("end: give a time after start", field="end")
    return Status(202, BackfillOut(task_id=enqueue_backfill(rule, start=data.start, end=data.end)))


@router.get("/rules/{rule_id}/alerts", response={200: list[AlertOut], **READ_ERRORS}, summary="A rule's alerts")
def list_alerts(request: HttpRequest, rule_id: int) -> Any:
    require_view(request)
    rule = get_or_404(ScoringRule, "rule_id", pk=rule_id)
    return list(rule.alerts.order_by("name"))


@router.post("/rules/{rule_id}/alerts", response={201: AlertOut, **ERRORS}, summary="Add an alert to a rule (members)")
def post_alert(request: HttpRequest, rule_id: int, data: AlertIn) -> Any:
    require(request, access.can_start_runs, "create alerts")
    rule = get_or_404(ScoringRule, "rule_id", pk=rule_id)
    if (data.baseline_start is None) != (data.baseline_end is None):
        raise InvalidInputError("baseline_end: a pinned baseline needs both start and end", field="baseline_end")
    if data.baseline_start is not None and data.baseline_end is not None and data.baseline_end <= data.baseline_start:
        raise InvalidInputError("baseline_end: give a time after baseline_start", field="baseline_end")
    if data.webhook_url and not data.webhook_url.startswith(("http://", "https://")):
        raise InvalidInputError("webhook_url: give an http(s) URL", field="webhook_url")
    if rule.alerts.filter(name=data.name).exists():
        raise InvalidInputError(f"name: the rule has an alert named {data.name!r}", field="name")
    with transaction.atomic():
        alert = Alert.objects.create(rule=rule, **data.dict())
    return Status(201, alert)


@router.get("/alerts/{alert_id}/firings", response={200: list[FiringOut], **READ_ERRORS}, summary="An alert's firings")
def list_alert_firings(request: HttpRequest, alert_id: int) -> Any:
    require_view(request)
    alert = get_or_404(Alert, "alert_id", pk=alert_id)
    return list(AlertFiring.objects.filter(alert=alert).order_by("-fired_at", "-pk")[:200])


@router.get("/firings", response={200: list[FiringOut], **READ_ERRORS}, summary="The latest alert firings")
def list_firings(request: HttpRequest) -> Any:
    require_view(request)
    return recent_firings(limit=100)
