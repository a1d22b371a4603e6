"""Reads never write (issue 24 §3): every GET route of the portal and every GET operation of the
API answers without one database write or one Redis command, with a dead running run, a shard
whose lease lapsed, a queued shard whose RQ job is lost and a run not in the search index
present (the three sweeps a GET used to do: ``mark_stale_runs``, ``reap``, ``ensure_indexed``).
The sweeper (``apps.evals.worker.sweeper``) does those writes, on a clock, off the request path;
the last test shows that it does, so the objects here really are ones a sweep changes.

Sessions: portal pages are read logged in through Django's database session backend (the login
is written before the routes are read); a session is saved only when it changes, so a GET with
no message to show and no login writes nothing (a page that consumed a message would write it).
The API is read with a bearer token (no cookie, no session). Its ``last_used`` hint is written
at most once a minute per token (``apps.core.auth``): the token here was used a moment before,
as any client's is after its first call, so that once-a-minute write is not what is tested.

Redis is a real throwaway ``redis-server`` with ``EVALSITE_QUEUE=rq``; every command the test
process sends is seen (``redis.Redis.execute_command`` and pipelines' ``execute`` wrapped).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from apps.agents.models import Session
from apps.core.auth import create_api_token
from apps.core.models import ApiToken
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, SearchIndexState
from apps.evals.models.shards import EvalShard, ShardStatus
from apps.evals.runs.reviews import save_review
from apps.evals.sets.trace_capture import SOURCE as TRACE_SOURCE
from apps.evals.sets.versions import record_set_version
from apps.evals.worker.sweeper import sweep
from apps.online.models import Alert, ScoringRule
from apps.traces.models import Run
from evalsite.api import api
from tests.apps.evals.test_live_redis import redis_url  # noqa: F401 - the throwaway redis-server fixture
from tests.apps.factories import add_trace, make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|TRUNCATE)\b", re.IGNORECASE)
"""A statement that writes. Savepoints (``SAVEPOINT``, ``RELEASE``, ``ROLLBACK TO``) are not
writes: an atomic block that writes nothing leaves nothing behind."""

STATUS_REDIS_READS = {
    "LLEN",
    "LRANGE",
    "LINDEX",
    "ZCARD",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZCOUNT",
    "SMEMBERS",
    "SCARD",
    "HGET",
    "HGETALL",
    "HMGET",
    "EXISTS",
    "GET",
    "MGET",
    "TYPE",
    "TTL",
}
"""ALLOW-LIST, kept explicit: the status page and ``/api/status`` show the RQ queue's depth and
its workers, which only Redis holds, so those two read them (these read-only commands, nothing
else). No other route may send Redis any command."""

STATUS_PATHS = ("/status/", "/api/status")


@dataclass
class Seen:
    """What the test process sent the database and Redis while one request was answered."""

    writes: list[str] = field(default_factory=list)
    redis: list[str] = field(default_factory=list)


@pytest.fixture
def seen(monkeypatch, redis_url, settings) -> Iterator[Seen]:  # noqa: F811 - the fixture imported above
    """Records every write statement and every Redis command of the test process (the calls go
    through: the test reports every offender, not only the first)."""
    settings.EVALSITE_QUEUE = "rq"
    settings.EVALSITE_RQ_QUEUE = "evalsite-reads"
    monkeypatch.setenv("EVALSITE_REDIS_URL", redis_url)
    record = Seen()
    command = redis.Redis.execute_command
    pipeline = redis.client.Pipeline.execute

    def execute_command(self: Any, *args: Any, **options: Any) -> Any:
        record.redis.append(" ".join(str(a) for a in args[:2]))
        return command(self, *args, **options)

    def execute_pipeline(self: Any, *args: Any, **options: Any) -> Any:
        record.redis.extend(" ".join(str(a) for a in c[0][:2]) for c in self.command_stack)
        return pipeline(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", execute_command)
    monkeypatch.setattr(redis.client.Pipeline, "execute", execute_pipeline)

    def catch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if WRITE.match(sql):
            record.writes.append(sql[:160])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(catch):
        yield record


@dataclass
class World:
    """The objects every route needs, and the ones a sweep would change."""

    finished: EvalRun
    other: EvalRun
    dead: EvalRun
    sharded: EvalRun
    lapsed: EvalShard
    lost: EvalShard
    result: EvalResult
    trace: Run
    ingested: Run
    session: Session
    token: str
    rule: ScoringRule
    alert: Alert


@pytest.fixture
def world(staff, member) -> World:
    eval_set = make_eval_set("reads", 6, splits=("dev",))
    finished = make_eval_run(eval_set, [True, False, "errored", True, False, True], outputs=["Paris"] * 6)
    other = make_eval_run(eval_set, [True, True, False, True, False, False], variant="v2")
    result = EvalResult.objects.filter(eval_run=finished, case_id="c0").select_related("run").get()
    add_trace(result.run)
    save_review(result, member, verdict="pass", comment="fine")
    old = timezone.now() - timedelta(minutes=10)
    # running, its executor silent for ten minutes: the sweep marks it interrupted
    dead = EvalRun.objects.create(
        eval_set=eval_set,
        target_id="echo",
        split="dev",
        status=EvalRunStatus.RUNNING,
        started=old,
        executor_host="elsewhere",
        executor_pid=4242,
        heartbeat_at=old,
        n_total=6,
        in_flight=["x:c1"],
    )
    # a sharded run: one shard whose worker stopped renewing its lease, one queued shard whose
    # RQ job is gone (never enqueued): the sweep delivers both again
    sharded = EvalRun.objects.create(
        eval_set=eval_set,
        target_id="echo",
        split="dev",
        status=EvalRunStatus.RUNNING,
        started=old,
        n_total=6,
        n_shards=2,
    )
    lapsed = EvalShard.objects.create(
        eval_run=sharded,
        index=0,
        case_ids=["c0", "c1", "c2"],
        status=ShardStatus.RUNNING,
        token="t-lapsed",
        worker="gone-worker",
        lease_until=old,
        enqueued_at=old,
        started=old,
    )
    lost = EvalShard.objects.create(
        eval_run=sharded,
        index=1,
        case_ids=["c3", "c4", "c5"],
        status=ShardStatus.QUEUED,
        token="t-lost",
        enqueued_at=old,
    )
    session = Session.objects.create(target_id="echo", user=staff)
    record_set_version(eval_set, source="test")  # version 1: the version diff page has one to show
    ingested = Run.objects.create(  # a trace sent over OTLP: the one kind the capture page offers
        run_id="otlp-1", trace_id="otlp-1", target_id="svc", started=old, metadata={"source": TRACE_SOURCE}
    )
    api_token, raw = create_api_token(user=staff, name="reads", scope="admin")
    ApiToken.objects.filter(pk=api_token.pk).update(last_used=timezone.now())  # see the module's note
    assert not SearchIndexState.objects.exists()  # no run is indexed: a text search would index
    # an online scoring rule with an alert: its pages and API read, never score or fire
    rule = ScoringRule.objects.create(name="reads-rule", scorers=["exact_match"])
    alert = Alert.objects.create(rule=rule, name="reads-alert", score_name="exact_match")
    return World(finished, other, dead, sharded, lapsed, lost, result, result.run, ingested, session, raw, rule, alert)


def _walk(patterns: list[Any], prefix: str = "", namespace: str = "") -> Iterator[tuple[str, str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), ns)
        else:
            yield prefix + str(entry.pattern), f"{namespace}{entry.name}" if entry.name else "", entry


def portal_urls(w: World) -> list[str]:
    """One or more URLs per URL pattern outside the API and the admin (both walked on their own),
    every parameter filled with a real object; a run's routes for each kind of run."""
    runs = [w.finished.pk, w.dead.pk, w.sharded.pk]
    values: dict[str, list[str]] = {
        "run_id": runs,
        "result_id": [str(w.result.pk)],
        "set_id": [str(w.finished.eval_set_id)],
        "case_id": ["c0"],
        "pk": [str(w.trace.pk), str(w.ingested.pk), str(w.rule.pk)],  # traces; the online rule
        "session_id": [str(w.session.pk)],
    }
    queries = {
        "evals:eval_run": ["", "?text=paris&status=passed", "?q=c&order=-score&page=2"],
        "evals:eval_runs": ["", "?status=running", "?sort=-tokens"],
        "evals:result": ["", "?status=passed"],
        "evals:compare": [f"?a={w.finished.pk}&b={w.other.pk}"],
        "evals:compare_scorers": [f"?a={w.finished.pk}&b={w.other.pk}"],
        "evals:compare_slices": [f"?a={w.finished.pk}&b={w.other.pk}"],
        "evals:compare_case": [f"?a={w.finished.pk}&b={w.other.pk}&case=c0"],
        "evals:compare_rules": [f"?a={w.finished.pk}&b={w.other.pk}"],
        "evals:set_versions": ["", "?a=1&b=1"],
        "evals:trends": ["", f"?set={w.finished.eval_set_id}"],
        "traces:list": ["", "?q=c0"],
    }
    urls = []
    for route, name, _pattern in _walk(get_resolver().url_patterns):
        if route.startswith(("admin/", "api/", "^api/")):
            continue
        names = re.findall(r"<(?:\w+:)?(\w+)>", route)
        fills: list[dict[str, str]] = [{}]
        for param in names:
            # a result belongs to the finished run: its routes take that run only
            choices = [w.finished.pk] if param == "run_id" and "result_id" in names else values[param]
            fills = [{**f, param: v} for f in fills for v in choices]
        for fill in fills:
            path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m, fill=fill: fill[m.group(1)], route)
            urls += [path + q for q in queries.get(name, [""])]
    return urls


def admin_urls(w: World) -> list[str]:
    """The admin's index, each app's list, and each registered model's list, add form, and (for
    models with a row) change form, history and delete confirmation (a GET shows it only)."""
    urls = [reverse("admin:index")]
    for model, _model_admin in admin.site._registry.items():
        meta = model._meta
        prefix = f"admin:{meta.app_label}_{meta.model_name}"
        urls += [reverse("admin:app_list", args=[meta.app_label]), reverse(f"{prefix}_changelist")]
        urls.append(reverse(f"{prefix}_add"))
        row = model._default_manager.order_by("pk").first()
        if row is not None:
            for view in ("change", "history", "delete"):
                urls.append(reverse(f"{prefix}_{view}", args=[row.pk]))
    return sorted(set(urls))


def api_urls(w: World) -> list[str]:
    """Every GET operation of the ninja OpenAPI schema, path parameters filled, required query
    parameters given; the run detail also with a text search."""
    values = {
        "run_id": w.finished.pk,
        "set_id": str(w.finished.eval_set_id),
        "case_id": "c0",
        "a": w.finished.pk,
        "b": w.other.pk,
        "runs": f"{w.finished.pk},{w.other.pk}",  # the N-way comparison's runs
        "rule_id": w.rule.pk,
        "alert_id": w.alert.pk,
    }
    urls = []
    for path, operations in api.get_openapi_schema()["paths"].items():
        get = operations.get("get")
        if get is None:
            continue
        params = get.get("parameters", [])
        url = re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), path)
        required = [p["name"] for p in params if p["in"] == "query" and p.get("required")]
        query = "&".join(f"{name}={values[name]}" for name in required)
        urls.append(url + (f"?{query}" if query else ""))
        if "{run_id}" in path:  # the other runs too: a dead one and a sharded one
            for run in (w.dead, w.sharded):
                urls.append(re.sub(r"\{run_id\}", run.pk, url.split("?")[0]) + (f"?{query}" if query else ""))
    urls += [f"/api/eval/runs/{w.finished.pk}?text=paris", "/api/eval/runs?status=running"]
    # the API's routes outside its operations: docs, schema, OTLP ingest (POST only), unknown paths
    urls += ["/api/docs", "/api/openapi.json", "/api/otlp/v1/traces", "/api/otlp/v1/traces/", "/api/no-such-route"]
    return urls


def _offences(seen: Seen, url: str) -> list[str]:
    out = [f"{url}: database write {sql}" for sql in seen.writes]
    for command in seen.redis:
        allowed = url.split("?")[0] in STATUS_PATHS and command.split()[0].upper() in STATUS_REDIS_READS
        if not allowed:
            out.append(f"{url}: Redis command {command}")
    return out


def test_no_get_route_of_the_portal_writes(client, staff, world, seen):
    client.force_login(staff)  # a database session, written here, before any route is read
    urls = portal_urls(world) + admin_urls(world)
    assert len(urls) > 60
    offences, broken = [], []
    for url in urls:
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):  # the page, and its HTMX partial
            seen.writes.clear()
            seen.redis.clear()
            response = client.get(url, **headers)
            if response.status_code >= 500:
                broken.append(f"{url}: {response.status_code}")
            offences += _offences(seen, url)
    assert not broken
    assert not offences, "\n".join(offences)
    _nothing_swept(world)


def test_no_get_operation_of_the_api_writes(world, seen):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {world.token}")  # no cookie: no session at all
    urls = api_urls(world)
    offences, answered = [], []
    for url in urls:
        seen.writes.clear()
        seen.redis.clear()
        response = client.get(url)
        answered.append((url, response.status_code))
        offences += _offences(seen, url)
    assert all(code < 500 for _, code in answered), answered
    assert sum(code == 200 for _, code in answered) >= 15, answered
    assert not offences, "\n".join(offences)
    assert ("/api/status", 200) in answered
    _nothing_swept(world)


def _nothing_swept(w: World) -> None:
    assert EvalRun.objects.get(pk=w.dead.pk).status == EvalRunStatus.RUNNING
    assert EvalShard.objects.get(pk=w.lapsed.pk).token == "t-lapsed"
    assert EvalShard.objects.get(pk=w.lost.pk).token == "t-lost"
    assert not SearchIndexState.objects.exists()


def test_the_sweeper_does_what_reads_no_longer_do(world, seen, redis_url):  # noqa: F811 - the fixture
    """The same objects, one sweep: the dead run becomes resumable, both shards are delivered
    again through Redis, a finished run is indexed; the recorders see it all (so they would have
    seen it on a GET)."""
    report = sweep()
    assert report.interrupted == 1 and report.redelivered == 2
    assert report.indexed in (world.finished.pk, world.other.pk)
    dead = EvalRun.objects.get(pk=world.dead.pk)
    assert dead.status == EvalRunStatus.INTERRUPTED and "no heartbeat from PID 4242 on elsewhere" in dead.error
    assert EvalShard.objects.get(pk=world.lapsed.pk).token != "t-lapsed"
    assert EvalShard.objects.get(pk=world.lost.pk).token != "t-lost"
    assert any(sql.startswith("UPDATE") for sql in seen.writes)
    assert any(command.startswith(("EVALSHA", "EVAL", "HSET", "RPUSH", "LPUSH")) for command in seen.redis), seen.redis
    assert redis.Redis.from_url(redis_url).llen("rq:queue:evalsite-reads") == 2  # both waiting in RQ
    assert sweep().indexed in (world.finished.pk, world.other.pk)  # the other run, next sweep
    assert sweep().indexed is None


def test_a_dead_run_reads_interrupted_before_any_sweep_and_resumes_from_its_page(client, member, world, seen):
    """As healthchecks computes a check's status from its last ping: the page and the API show
    the dead run interrupted, with the reason, and offer the resume (nothing written, no sweep
    yet); the resume, a POST, marks it and queues it."""
    client.force_login(member)
    seen.writes.clear()  # the login's session rows
    page = client.get(reverse("evals:eval_run", args=[world.dead.pk])).content.decode()
    listing = client.get(reverse("evals:eval_runs")).content.decode()
    api_client = Client(HTTP_AUTHORIZATION=f"Bearer {world.token}")
    body = api_client.get(f"/api/eval/runs/{world.dead.pk}").json()
    assert not seen.writes
    assert reverse("evals:resume_eval_run", args=[world.dead.pk]) in page
    assert "no heartbeat from PID 4242 on elsewhere" in page
    assert (body["run"]["status"], "no heartbeat from PID 4242" in body["run"]["error"]) == ("interrupted", True)
    assert world.dead.pk in listing
    assert EvalRun.objects.get(pk=world.dead.pk).status == EvalRunStatus.RUNNING  # only shown
    response = client.post(reverse("evals:resume_eval_run", args=[world.dead.pk]))
    assert response.status_code == 302
    assert EvalRun.objects.get(pk=world.dead.pk).status == EvalRunStatus.QUEUED
