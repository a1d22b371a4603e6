"""The online pages and API: who may read and write, bad input named by field, the HTMX
partial, the status page's firings section."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from apps.core.auth import create_api_token
from apps.online.alerting import MAX_DELIVERIES, deliver_pending
from apps.online.models import Alert, AlertFiring, ScoringRule
from apps.online.services import create_rule
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db


def api_caller(client):
    """``call(method, path, user, body=None)``: the API as ``user`` (one token per user of the test)."""
    tokens: dict[int, str] = {}

    def call(method: str, path: str, user, body=None):
        if user.pk not in tokens:
            tokens[user.pk] = create_api_token(user=user, name="t")[1]
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {tokens[user.pk]}"}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return getattr(client, method)(f"/api/online{path}", **kwargs)

    return call


def test_api_rules_alerts_and_windows(client, member, viewer):
    call = api_caller(client)
    made = call("post", "/rules", member, {"name": "r1", "scorers": ["exact_match"], "sample_rate": 0.25})
    assert made.status_code == 201, made.content
    rule_id = made.json()["id"]
    assert made.json()["sample_rate"] == 0.25
    bad = call("post", "/rules", member, {"name": "r2", "scorers": ["no_such_scorer"]})
    assert bad.status_code == 400 and bad.json()["field"] == "scorers" and "no_such_scorer" in bad.json()["message"]
    rate = call("post", "/rules", member, {"name": "r3", "scorers": ["exact_match"], "sample_rate": 2})
    assert rate.status_code == 400 and rate.json()["field"] == "sample_rate"
    twice = call("post", "/rules", member, {"name": "r1", "scorers": ["exact_match"]})
    assert twice.status_code == 400 and twice.json()["field"] == "name"
    assert call("post", "/rules", viewer, {"name": "v", "scorers": ["exact_match"]}).status_code == 403
    assert [r["name"] for r in call("get", "/rules", viewer).json()] == ["r1"]
    assert call("get", "/rules/999", viewer).status_code == 404
    patched = call("patch", f"/rules/{rule_id}", member, {"active": False})
    assert patched.status_code == 200 and patched.json()["active"] is False
    assert call("get", f"/rules/{rule_id}/windows", viewer).json() == []

    alert = {"name": "drop", "score_name": "exact_match", "baseline_start": "2026-12-01T00:00:00Z"}
    half = call("post", f"/rules/{rule_id}/alerts", member, alert)
    assert half.status_code == 400 and half.json()["field"] == "baseline_end"
    alert.pop("baseline_start")
    made_alert = call("post", f"/rules/{rule_id}/alerts", member, {**alert, "webhook_url": "http://x/h"})
    assert made_alert.status_code == 201 and made_alert.json()["min_n"] == 30
    assert call("post", f"/rules/{rule_id}/alerts", member, {**alert, "alpha": 2}).status_code == 422
    assert len(call("get", f"/rules/{rule_id}/alerts", viewer).json()) == 1
    assert call("get", f"/alerts/{made_alert.json()['id']}/firings", viewer).json() == []
    assert call("get", "/firings", viewer).status_code == 200
    backwards = {"start": "2026-12-02T00:00:00Z", "end": "2026-12-01T00:00:00Z"}
    assert call("post", f"/rules/{rule_id}/backfill", member, backwards).json()["field"] == "end"


def test_pages_access_forms_and_partials(client, member, viewer, outsider):
    assert client.get("/online/").status_code == 302  # anonymous: to the login page
    client.force_login(outsider)
    assert client.get("/online/").status_code == 403
    client.force_login(viewer)
    page = client.get("/online/").content.decode()
    assert 'id="rules"' in page and 'id="new-rule"' not in page
    assert client.post("/online/", {"name": "x"}).status_code == 403

    client.force_login(member)
    assert 'id="new-rule"' in client.get("/online/").content.decode()
    refused = client.post(
        "/online/", {"name": "bad", "scorers": "no_such_scorer", "sample_rate": 1, "window_minutes": 60}
    )
    assert refused.status_code == 200 and "no_such_scorer" in refused.content.decode()
    created = client.post(
        "/online/",
        {"name": "shop", "scorers": "exact_match\n", "sample_rate": 0.5, "window_minutes": 30, "tags": "a, b"},
    )
    assert created.status_code == 302
    rule = ScoringRule.objects.get(name="shop")
    assert rule.tags == ["a", "b"] and rule.scorers == ["exact_match"] and rule.owner == member
    detail = client.get(f"/online/rules/{rule.pk}/").content.decode()
    assert 'id="rule-coverage"' in detail and 'id="new-alert"' in detail
    partial = client.get(f"/online/rules/{rule.pk}/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="windows")
    assert "<table" in partial.content.decode() and "<html" not in partial.content.decode()
    assert client.get("/online/rules/999/").status_code == 404
    assert client.post(f"/online/rules/{rule.pk}/").status_code == 405
    added = client.post(f"/online/rules/{rule.pk}/alerts/", {
        "name": "drop", "score_name": "exact_match", "direction": "drop", "min_effect": 0.1, "alpha": 0.01,
        "min_n": 30, "consecutive": 2, "baseline_hours": 24, "payload_format": "json",
    })  # fmt: skip
    assert added.status_code == 302 and Alert.objects.get().consecutive == 2
    client.force_login(viewer)
    assert client.post(f"/online/rules/{rule.pk}/alerts/", {"name": "x"}).status_code == 403


def test_status_page_lists_alert_firings(client, viewer, member):
    rule = create_rule(name="r", scorers=["exact_match"], owner=member)
    alert = Alert.objects.create(rule=rule, name="quality drop", score_name="exact_match")
    now = datetime(2026, 12, 5, 10, tzinfo=UTC)
    evidence = {
        "score_name": "exact_match", "direction": "drop", "baseline_value": 0.9, "recent_value": 0.5,
        "n_baseline": 100, "n_recent": 40, "effect": -0.4, "test": "two_proportion", "p_value": 1e-6,
        "consecutive": 1, "trace_ids": [],
    }  # fmt: skip
    AlertFiring.objects.create(alert=alert, window_start=now, window_end=now, evidence=evidence, delivery="none")
    client.force_login(viewer)
    page = client.get("/status/").content.decode()
    assert 'id="alert-firings"' in page and "quality drop" in page and "two_proportion" in page


def test_admin_authors_rules_with_the_same_checks(client, staff):
    client.force_login(staff)
    assert client.get("/admin/online/scoringrule/").status_code == 200
    assert client.get("/admin/online/scoringrule/add/").status_code == 200
    assert client.get("/admin/online/alertfiring/").status_code == 200
    form = {
        "name": "admin rule", "description": "", "active": "on", "service": "", "target": "", "model": "",
        "attributes": "{}", "tags": "[]", "sample_rate": "1.5", "scorers": '["exact_match"]', "window_minutes": "60",
        "alerts-TOTAL_FORMS": "0", "alerts-INITIAL_FORMS": "0", "alerts-MIN_NUM_FORMS": "0",
        "alerts-MAX_NUM_FORMS": "1000",
    }  # fmt: skip
    refused = client.post("/admin/online/scoringrule/add/", form)
    assert refused.status_code == 200 and "is not a share in 0..1" in refused.content.decode()
    bad_spec = client.post("/admin/online/scoringrule/add/", {**form, "sample_rate": "1", "scorers": '["nope"]'})
    assert "unknown scorer" in bad_spec.content.decode() and not ScoringRule.objects.exists()
    client.post("/admin/online/scoringrule/add/", {**form, "sample_rate": "0.5"})
    assert ScoringRule.objects.get().owner == staff


def test_a_webhook_that_fails_is_tried_again_then_recorded_failed(member, settings):
    settings.EVALSITE_SITE_URL = "https://evals.example.com"
    rule = create_rule(name="r", scorers=["exact_match"], owner=member)
    now = datetime(2026, 12, 5, 10, tzinfo=UTC)
    evidence = {
        "score_name": "exact_match", "direction": "drop", "baseline_value": 0.9, "recent_value": 0.5,
        "n_baseline": 100, "n_recent": 40, "effect": -0.4, "test": "two_proportion", "p_value": 1e-6,
        "consecutive": 1, "trace_ids": [5], "min_effect": 0.1, "alpha": 0.01, "windows": [],
        "recent": {"start": now.isoformat(), "end": now.isoformat()},
        "baseline": {"start": now.isoformat(), "end": now.isoformat()},
    }  # fmt: skip
    with WebhookReceiver(status=500) as down:
        alert = Alert.objects.create(rule=rule, name="a", score_name="exact_match", webhook_url=down.url)
        firing = AlertFiring.objects.create(alert=alert, window_start=now, window_end=now, evidence=evidence)
        assert deliver_pending() == 0
        firing.refresh_from_db()
        assert (firing.delivery, firing.delivery_attempts) == ("pending", 1) and "500" in firing.delivery_error
        for _ in range(MAX_DELIVERIES):
            deliver_pending()
        firing.refresh_from_db()
        assert (firing.delivery, firing.delivery_attempts) == ("failed", MAX_DELIVERIES)
        assert len(down.bodies) == MAX_DELIVERIES
    body = down.bodies[0]
    assert body["links"] == {
        "rule": f"https://evals.example.com/online/rules/{rule.pk}/",
        "traces": ["https://evals.example.com/traces/5/"],
    }


def test_a_window_too_long_for_dates_and_unknown_fields_are_refused_by_name(client, member):
    """A fresh user's rule with ``window_minutes`` 99999999999999 was accepted and then stopped
    the scoring of every rule (an OverflowError cutting windows); ``reference_set`` (the API's
    field is ``reference_set_id``) was silently ignored."""
    call = api_caller(client)
    huge = call(
        "post", "/rules", member, {"name": "huge", "scorers": ["exact_match"], "window_minutes": 99999999999999}
    )
    assert huge.status_code in (400, 422) and "window_minutes" in huge.content.decode()
    typo = call("post", "/rules", member, {"name": "typo", "scorers": ["exact_match"], "reference_set": 9999})
    assert typo.status_code in (400, 422) and "reference_set" in typo.content.decode()
    assert not ScoringRule.objects.filter(name__in=["huge", "typo"]).exists()
    longest = call("post", "/rules", member, {"name": "year", "scorers": ["exact_match"], "window_minutes": 366 * 1440})
    assert longest.status_code == 201, longest.content
    too_long = call("patch", f"/rules/{longest.json()['id']}", member, {"window_minutes": 366 * 1440 + 1})
    assert too_long.status_code in (400, 422) and "window_minutes" in too_long.content.decode()


def test_online_command_refuses_a_watch_that_is_not_a_positive_number_and_says_when_no_rule_exists():
    from io import StringIO

    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="finite number"):
        call_command("online", "--watch", "nan")
    with pytest.raises(CommandError, match="seconds > 0"):
        call_command("online", "--watch", "-5")
    out = StringIO()
    call_command("online", stdout=out)
    assert "no active online scoring rule" in out.getvalue()
