"""Online scoring end to end: OTLP traces arrive, the worker matches them to rules, samples them
by trace id, scores them with offline scorer specs (expected values from a reference set), and
the coverage of every window adds up; the trace page shows the scores."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from rq import SimpleWorker
from rq.serializers import JSONSerializer

from apps.core.auth import create_api_token
from apps.evals.management.commands.queue_worker import _worker_class
from apps.evals.models import EvalCase, EvalSet, ScorerInvocation
from apps.evals.worker.queue import ONLINE_JOB, job_refusal, rq_queue
from apps.online.matching import is_sampled
from apps.online.models import OnlineScore, Reason, ScoreState
from apps.online.queries import rule_totals, rule_windows
from apps.online.services import create_rule
from apps.traces.models import Run
from tests.apps.evals.test_live_redis import redis_url  # noqa: F401 - a throwaway redis-server
from tests.support.otlp_producer import FakeTrace, export_body

URL = "/api/otlp/v1/traces"


@pytest.fixture
def token(member) -> str:
    return create_api_token(user=member, name="prod agent")[1]


def send(client, token: str, traces: list[FakeTrace]) -> None:
    response = client.post(
        URL, data=export_body(traces), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 200, response.content


def hours_ago(n: float) -> datetime:
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return now - timedelta(hours=n)


def shop_traces(n: int, *, service: str = "shop-bot", start: datetime, wrong_every: int = 4) -> list[FakeTrace]:
    return [
        FakeTrace(
            key=f"{service}-{i}",
            service=service,
            question=f"price of item {i % 10}?",
            answer="WRONG" if i % wrong_every == 0 else f"{i % 10} EUR",
            started=start + timedelta(seconds=30 * i),
            tags=("checkout",) if i % 2 else (),
        )
        for i in range(n)
    ]


@pytest.fixture
def reference_set(transactional_db) -> EvalSet:
    eval_set = EvalSet.objects.create(name="prices")
    EvalCase.objects.bulk_create(
        EvalCase(eval_set=eval_set, case_id=f"p{i}", input=f"price of item {i}?", expected=f"{i} EUR", split="dev")
        for i in range(10)
    )
    return eval_set


@pytest.mark.django_db(transaction=True)
def test_traces_sent_over_otlp_are_sampled_scored_and_their_counts_add_up(client, token, reference_set, member):
    rule = create_rule(
        name="shop exact",
        scorers=["exact_match"],
        service="shop-bot",
        sample_rate=0.5,
        reference_set=reference_set,
        owner=member,
    )
    sent = shop_traces(60, start=hours_ago(3))
    other = shop_traces(5, service="other-bot", start=hours_ago(3))
    send(client, token, sent[:30] + other)
    send(client, token, sent[30:])
    send(client, token, sent[:10])  # the same spans again: stored once, matched once
    # the endpoint enqueued the traces; the task worker matches and scores them
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)

    totals = rule_totals(rule)
    expected_sample = sum(is_sampled(t.trace_id, 0.5) for t in sent)
    assert 15 < expected_sample < 45
    assert totals.matched == 60  # the other service's traces are not matched
    assert totals.sampled == expected_sample and totals.not_sampled == 60 - expected_sample
    assert totals.scored == expected_sample and totals.pending == totals.errored == 0
    # every fourth answer is wrong: the verdicts are the reference set's, matched by input
    wrong = sum(1 for i, t in enumerate(sent) if i % 4 == 0 and is_sampled(t.trace_id, 0.5))
    assert (totals.passed, totals.failed) == (expected_sample - wrong, wrong)
    assert totals.interval is not None and totals.interval.low is not None
    assert totals.interval.low < totals.pass_rate < totals.interval.high

    windows = rule_windows(rule)
    assert len(windows) == 1 + (sent[-1].started.hour != sent[0].started.hour)
    for field in ("matched", "not_sampled", "pending", "scored", "errored"):
        assert sum(getattr(w, field) for w in windows) == getattr(totals, field)

    # each scoring is a row of the judge ledger, by trace
    assert ScorerInvocation.objects.filter(scorer="exact_match", status="done").count() == expected_sample
    sampled_trace = next(t for t in sent if is_sampled(t.trace_id, 0.5))
    assert ScorerInvocation.objects.filter(trace_id=sampled_trace.trace_id).count() == 1

    # the trace page shows the scores; a trace no rule took shows no section
    run = Run.objects.get(trace_id=sampled_trace.trace_id)
    client.force_login(member)
    page = client.get(f"/traces/{run.pk}/").content.decode()
    assert 'id="online-scores"' in page and "shop exact" in page and "exact_match" in page
    unmatched = Run.objects.get(trace_id=other[0].trace_id)
    assert 'id="online-scores"' not in client.get(f"/traces/{unmatched.pk}/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_filters_on_tags_attributes_and_model(client, token, member):
    tagged = create_rule(name="checkout", scorers=["exact_match"], tags=["checkout"], owner=member)
    by_model = create_rule(name="other model", scorers=["exact_match"], model="no-such-model", owner=member)
    send(client, token, shop_traces(10, start=hours_ago(2)))
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    assert rule_totals(tagged).matched == 5
    assert rule_totals(by_model).matched == 0


@pytest.mark.django_db(transaction=True)
def test_a_judge_rule_without_a_judge_stays_pending_with_the_reason(client, token, member, monkeypatch):
    for name in ("EVALSITE_JUDGE_MODEL", "EVALSITE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    rule = create_rule(name="judged", scorers=["rubric_judge"], owner=member)
    send(client, token, shop_traces(6, start=hours_ago(2)))
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    totals = rule_totals(rule)
    assert totals.matched == totals.pending == 6
    assert totals.pending_reasons == {"no judge configured": 6}
    rows = OnlineScore.objects.filter(rule=rule)
    assert {(r.state, r.reason) for r in rows} == {(ScoreState.PENDING, Reason.NO_JUDGE)}
    assert "EVALSITE_JUDGE_MODEL" in rows[0].detail
    # said once in the ledger, as skipped; a second pass asks nothing and adds no row
    assert ScorerInvocation.objects.filter(status="skipped", reason="no judge configured").count() == 6
    out = io.StringIO()
    call_command("online", stdout=out)  # the clocked pass (evalsite online --watch S)
    assert "scored 0, errored 0, left pending 6" in out.getvalue()
    assert ScorerInvocation.objects.count() == 6


@pytest.mark.django_db(transaction=True)
def test_backfill_applies_a_new_rule_to_past_traces(client, token, member):
    send(client, token, shop_traces(12, start=hours_ago(5)))
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)  # no rule yet
    rule = create_rule(name="late", scorers=[{"name": "regex", "args": {"pattern": "EUR"}}], owner=member)
    assert rule_totals(rule).matched == 0
    client.force_login(member)
    start, end = hours_ago(6), hours_ago(0)
    response = client.post(f"/online/rules/{rule.pk}/backfill/", {"start": start.isoformat(), "end": end.isoformat()})
    assert response.status_code == 302
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    totals = rule_totals(rule)
    assert totals.matched == totals.scored == 12
    assert (totals.passed, totals.failed) == (9, 3)  # every fourth answer is "WRONG"


@pytest.mark.django_db(transaction=True)
def test_a_scorer_that_cannot_score_errors_with_the_reason_never_a_pass(client, token, member):
    # no reference set: exact_match has no expected value to compare with
    rule = create_rule(name="no reference", scorers=["exact_match"], owner=member)
    send(client, token, shop_traces(4, start=hours_ago(2)))
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    totals = rule_totals(rule)
    assert totals.matched == totals.errored == 4 and totals.errored_reasons == {"scorer error": 4}
    assert totals.passed == 0 and totals.pass_rate is None
    assert ScorerInvocation.objects.filter(status="errored", reason__startswith="scorer error").count() == 4


@pytest.mark.django_db(transaction=True)
def test_on_rq_the_traces_go_to_the_queue_workers(client, token, member, settings, redis_url, monkeypatch):  # noqa: F811
    settings.EVALSITE_QUEUE = "rq"
    monkeypatch.setenv("EVALSITE_REDIS_URL", redis_url)
    rule = create_rule(name="on rq", scorers=[{"name": "regex", "args": {"pattern": "EUR"}}], owner=member)
    send(client, token, shop_traces(8, start=hours_ago(2)))
    queue = rq_queue()
    assert len(queue.job_ids) == 1 and rule_totals(rule).matched == 0
    job = queue.jobs[0]
    assert job.func_name == ONLINE_JOB and job_refusal(job) is None
    # the queue worker's own class (it refuses any job but ours), run in process
    worker = _worker_class(SimpleWorker)([queue], connection=queue.connection, serializer=JSONSerializer)
    worker.subscribe = lambda: None
    worker.work(burst=True, logging_level="WARNING")
    totals = rule_totals(rule)
    assert totals.matched == totals.scored == 8 and (totals.passed, totals.failed) == (6, 2)


@pytest.mark.django_db(transaction=True)
def test_a_trace_is_matched_when_its_root_span_arrives(client, token, member):
    rule = create_rule(name="rooted", scorers=[{"name": "regex", "args": {"pattern": "EUR"}}], owner=member)
    trace = shop_traces(2, start=hours_ago(2))[1]  # a right answer
    body = json.loads(export_body([trace]))
    root = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    child = {**root, "spanId": "c" * 16, "parentSpanId": root["spanId"], "name": "execute_tool lookup"}
    child["attributes"] = [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}]
    body["resourceSpans"][0]["scopeSpans"][0]["spans"] = [child]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert client.post(URL, data=json.dumps(body), content_type="application/json", **auth).status_code == 200
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    assert rule_totals(rule).matched == 0  # the child alone: not yet
    send(client, token, [trace])  # the root, with the answer
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    totals = rule_totals(rule)
    assert totals.matched == totals.scored == totals.passed == 1
