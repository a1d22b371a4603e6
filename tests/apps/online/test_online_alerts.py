"""Done-when of issue 28 part 1, at test scale: OTLP traces over six past hourly windows, a
rubric-judge rule against a stand-in judge that fails 10% of its calls, a quality drop in the
second half of one service fires exactly one alert at a local webhook (with its evidence), and
the noise-only service fires none; coverage adds up to the traces sent at every step."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from apps.core.auth import create_api_token
from apps.evals.models import ScorerInvocation
from apps.online.alerting import SETTLE_S, deliver_pending, evaluate_alerts, slack_body
from apps.online.models import Alert, AlertFiring, Delivery, OnlineScore, ScoreState
from apps.online.queries import rule_totals, rule_windows
from apps.online.services import backfill, create_rule, score_pending
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.scorers.base import ScorerServices
from tests.support.flaky_judge import FlakyJudge
from tests.support.otlp_producer import FakeTrace, batches
from tests.support.webhook_receiver import WebhookReceiver

PER_WINDOW = 20
WINDOWS = 6
JUDGE = {"name": "rubric_judge", "args": {"retries": 0, "use_cache": False}}


def traces(start: datetime) -> list[FakeTrace]:
    noise = random.Random(11)
    out = []
    for w in range(WINDOWS):
        for i in range(PER_WINDOW):
            at = start + timedelta(hours=w, seconds=100 * i)
            # drop-bot: 1 in 10 wrong, then half wrong from the fifth window; steady-bot: 20% at random
            wrong = i % 2 == 0 if w >= WINDOWS // 2 else i % 10 == 0
            out.append(FakeTrace(f"d{w}-{i}", "drop-bot", f"q{i}", "WRONG" if wrong else "fine", at))
            wrong = noise.random() < 0.2
            out.append(FakeTrace(f"s{w}-{i}", "steady-bot", f"q{i}", "WRONG" if wrong else "fine", at))
    return out


@pytest.mark.django_db(transaction=True)
def test_a_quality_drop_fires_one_alert_and_noise_fires_none(client, member):
    token = create_api_token(user=member, name="producer")[1]
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=WINDOWS + 1)
    sent = traces(start)
    for body in batches(sent, size=120):
        answer = client.post(
            "/api/otlp/v1/traces", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        assert answer.status_code == 200
    rules = {
        service: create_rule(name=service, scorers=[JUDGE], service=service, owner=member)
        for service in ("drop-bot", "steady-bot")
    }
    with WebhookReceiver() as hook, FlakyJudge(fail_share=0.1) as judge:
        for service, rule in rules.items():
            # drop-bot's baseline is pinned to the first half; steady-bot's is the previous 3 hours
            pinned = {"baseline_start": start, "baseline_end": start + timedelta(hours=WINDOWS // 2)}
            Alert.objects.create(
                rule=rule,
                name="quality drop",
                score_name="rubric_judge",
                min_effect=0.15,
                alpha=0.01,
                min_n=15,
                consecutive=2,
                baseline_hours=3,
                webhook_url=hook.url,
                **(pinned if service == "drop-bot" else {}),
            )
            backfill(rule, start=start, end=start + timedelta(hours=WINDOWS))
        services = ScorerServices(judge=OpenAIChatModel("judge", base_url=judge.base_url, max_retries=0))
        first = score_pending(services=services)
        # the judge failed some calls: those traces wait, with the reason, and the counts add up
        assert first.pending > 0 and judge.failures > 0
        totals = rule_totals(rules["drop-bot"])
        assert set(totals.pending_reasons) <= {"judge unreachable", "rate-limited"}
        assert totals.not_sampled + totals.pending + totals.scored + totals.errored == totals.matched
        assert evaluate_alerts() == 0  # a window with pending traces is not tested yet
        for _ in range(3):  # later passes ask again (errored after MAX_ATTEMPTS)
            score_pending(services=services)
        # the last window is tested once its traces stop arriving (SETTLE_S after the last one)
        assert evaluate_alerts() == 1
        assert Alert.objects.get(rule=rules["steady-bot"]).state["last_window"] < datetime.now(UTC).isoformat()
        assert evaluate_alerts(now=datetime.now(UTC) + timedelta(seconds=SETTLE_S + 1)) == 0
        assert deliver_pending() == 1

    sent_per_service = PER_WINDOW * WINDOWS
    for rule in rules.values():
        totals = rule_totals(rule)
        assert totals.matched == sent_per_service == totals.sampled
        assert totals.pending == 0 and totals.scored + totals.errored == sent_per_service
        assert totals.scored >= 0.95 * sent_per_service
        windows = rule_windows(rule)
        assert len(windows) == WINDOWS and sum(w.matched for w in windows) == sent_per_service

    firing = AlertFiring.objects.get()
    assert firing.alert.rule == rules["drop-bot"]
    assert firing.delivery == Delivery.DELIVERED
    assert not AlertFiring.objects.filter(alert__rule=rules["steady-bot"]).exists()
    # the noise-only service was tested (not just too small): its windows had p-values, none fired
    steady = Alert.objects.get(rule=rules["steady-bot"]).state["history"]
    assert len(steady) == WINDOWS and sum(h["p_value"] is not None for h in steady) == WINDOWS - 1
    assert not any(h["fires"] for h in steady)
    evidence = firing.evidence
    assert evidence["test"] == "two_proportion" and evidence["p_value"] < 0.01
    assert evidence["effect"] <= -0.15 and evidence["n_recent"] >= 15 and len(evidence["windows"]) == 2
    assert evidence["baseline"] == {"start": start.isoformat(), "end": (start + timedelta(hours=3)).isoformat()}
    assert firing.window_start == start + timedelta(hours=WINDOWS // 2 + 1)  # the second dropped window
    linked = OnlineScore.objects.filter(rule=rules["drop-bot"], run_id__in=evidence["trace_ids"])
    assert linked.count() == len(evidence["trace_ids"]) == evidence["n_recent"]
    # the failing traces of the window come first
    first = OnlineScore.objects.get(rule=rules["drop-bot"], run_id=evidence["trace_ids"][0])
    assert first.passed is False and first.window_start == firing.window_start

    # the webhook got the documented body once
    assert len(hook.bodies) == 1
    body = hook.bodies[0]
    assert body["event"] == "evalsite.alert.fired" and body["rule"]["name"] == "drop-bot"
    assert body["recent"]["n"] == evidence["n_recent"] and body["p_value"] == evidence["p_value"]
    assert body["links"]["traces"] and body["links"]["traces"][0].startswith("/traces/")
    assert slack_body(firing)["text"].startswith(":rotating_light: *quality drop*")

    # every judge invocation is in the ledger, failures with their reason
    ledger = ScorerInvocation.objects.filter(scorer="rubric_judge")
    assert ledger.count() == judge.calls
    assert ledger.filter(status="errored").count() == judge.failures
    assert ledger.filter(status="errored", reason__startswith="rate-limited").exists()
    assert ledger.filter(status="errored", reason__startswith="judge unreachable").exists()

    # a second evaluation finds nothing new: no second firing, no second delivery
    assert evaluate_alerts() == 0 and deliver_pending() == 0
    assert OnlineScore.objects.filter(state=ScoreState.PENDING).count() == 0
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    assert AlertFiring.objects.count() == 1
