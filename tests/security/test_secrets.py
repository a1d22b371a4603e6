"""Issue 9 §1 / repro rs-06: no credential is ever stored or shown.

A canary key is fed through every path that turns text into stored rows: a target error, a
tool error, a trace payload (tool arguments, final answer), a judge error from an endpoint
that echoes the key back, and a password in ``--judge-base-url``. Then the whole database,
every page and API answer about the run, and the JSON / JUnit report files are searched.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import textwrap

import pytest
from django.core.management import call_command
from django.db import connection

from apps.evals.models import EvalResult, EvalRun
from apps.traces.models import Event
from evalcore.redact import REDACTED, RedactingFilter, configured_secrets, redact, strip_userinfo
from evalcore.runtime.openai_client import OpenAIChatModel
from tests.support.stand_in_llm import StandInLLM

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-canary-0123456789abcdefXYZ"
URL_PASSWORD = "pw-canary-url-98765"

TARGET = """
import os
from evalcore.discovery import TargetSpec
from evalcore.runtime.agent import Agent
from evalcore.runtime.scripted import FunctionModel, last_user_text
from evalcore.runtime.tools import tool

def key():
    return os.environ["CANARY_VAR"]

@tool
def vault(name: str) -> str:
    \"\"\"Look a name up.\"\"\"
    raise PermissionError(f"vault refused the key {key()}")

def reply(messages):
    if messages[-1].get("role") == "tool":
        return "the tool said: " + messages[-1]["content"]
    text = last_user_text(messages)
    if text == "crash":
        raise RuntimeError(f"upstream rejected {key()} at http://bob:{key()}@db.local/x")
    if text == "tool":
        return {"tool_calls": [{"name": "vault", "arguments": {"name": key()}}]}
    return f"the key is {key()}"

spec = TargetSpec(id="leaky", target=Agent(FunctionModel(reply), [vault]), scorers=["exact_match"])
"""


def every_stored_text() -> str:
    """Every row of every table, as one string."""
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            chunks.append(repr(cursor.fetchall()))
    return "\n".join(chunks)


def every_stored_text_but_outputs() -> str:
    """:func:`every_stored_text` without what the targets produced (final answers, the non-error
    part of trace payloads and previews, playground messages): those are kept as produced."""
    kept = {"traces_run": ("final_answer",), "traces_event": ("payload", "preview")}
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            names = [c[0] for c in cursor.description]
            skip = {names.index(n) for n in kept.get(table, ())}
            chunks.extend(repr([v for i, v in enumerate(row) if i not in skip]) for row in cursor.fetchall())
    for event in Event.objects.all():
        chunks.append(json.dumps([v for k, v in event.payload.items() if k == "error" or k.endswith("_error")]))
    return "\n".join(chunks)


def assert_clean(text: str, where: str) -> None:
    basic = base64.b64encode(f"judgeuser:{URL_PASSWORD}".encode()).decode()
    for secret in (KEY, URL_PASSWORD, basic):
        assert secret not in text, f"{secret!r} leaked into {where}"


@pytest.fixture
def canary_run(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALSITE_JUDGE_API_KEY_ENV", "CANARY_VAR")  # a name that does not look secret
    monkeypatch.setenv("CANARY_VAR", KEY)
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "leaky.py").write_text(textwrap.dedent(TARGET))
    cases = [{"id": name, "input": name, "expected": "x", "split": "dev"} for name in ("crash", "tool", "echo")]
    bank = tmp_path / "canary.jsonl"
    bank.write_text("".join(json.dumps(c) + "\n" for c in cases))
    reports = tmp_path / "report.json", tmp_path / "junit.xml"
    with StandInLLM() as llm:
        llm.echo_key = True
        url = llm.base_url.replace("http://", f"http://judgeuser:{URL_PASSWORD}@")
        call_command(
            "eval", str(folder), "--set", str(bank), "--quiet", "--judge", "--judge-model", "stand-in-model",
            "--judge-base-url", url, "--judge-retries", "0", "--no-judge-cache",
            "--json", str(reports[0]), "--junit", str(reports[1]),
        )  # fmt: skip
        assert llm.chat_requests, "the judge was never asked: the judge-error path was not exercised"
    return EvalRun.objects.get(), reports


def test_canary_key_is_nowhere_in_the_database(canary_run):
    eval_run, _ = canary_run
    # every path was exercised (else the test would pass vacuously)
    by_case = {r.case_id: r for r in EvalResult.objects.filter(eval_run=eval_run).select_related("run")}
    assert REDACTED in by_case["crash"].run.error["message"]
    judge = [s for r in by_case.values() for s in r.scores if s["name"] == "rubric_judge"]
    assert judge and all(s["error"] and "Incorrect API key provided" in s["error"] for s in judge)
    # what the target produced is stored as produced (rs3-17: redaction never changes an output)
    assert by_case["echo"].run.final_answer == f"the key is {KEY}"
    tool_events = [e.payload for e in by_case["tool"].run.events.all() if e.payload.get("kind") == "execute_tool"]
    assert any(REDACTED in p.get("tool_error", "") for p in tool_events)
    assert {"name": KEY} in [p.get("arguments") for p in tool_events]  # the call as the model made it
    assert eval_run.config["judge"]["base_url"].startswith("http://127.0.0.1:")
    assert_clean(every_stored_text_but_outputs(), "the database outside target outputs")


def test_canary_key_is_on_no_page_api_answer_or_report(canary_run, client, staff):
    eval_run, (json_report, junit) = canary_run
    document = json.loads(json_report.read_text())
    outputs = {case["case_id"]: case.pop("output") for case in document["cases"]}
    assert outputs["echo"] == f"the key is {KEY}"  # the target's output, as produced
    assert_clean(json.dumps(document), json_report.name)
    assert_clean(junit.read_text(), junit.name)
    client.force_login(staff)
    urls = ["/traces/", "/runs/", f"/admin/evals/evalrun/{eval_run.id}/change/"]  # run-level pages
    # pages of the case whose target errored (what it produced holds no key: only errors do)
    crash = EvalResult.objects.get(eval_run=eval_run, case_id="crash")
    urls += [f"/runs/{eval_run.id}/cases/{crash.pk}/", f"/traces/{crash.run_id}/"]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert_clean(response.content.decode(), url)


def test_redact_removes_url_userinfo_and_configured_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefgh1234")
    monkeypatch.setenv("DATABASE_URL", "postgres://app:db-pass-5678@db.internal/evalsite")
    monkeypatch.setenv("EVALSITE_REDIS_URL", "redis://:redis-pass-4321@cache:6379/0")
    value = {
        "error": "401 for Bearer sk-live-abcdefgh1234",
        "nested": ["postgres://app:db-pass-5678@db.internal/evalsite", ("redis-pass-4321",)],
        "sk-live-abcdefgh1234": 1,
        "n": 3,
    }
    cleaned = json.dumps(redact(value))
    for secret in ("sk-live-abcdefgh1234", "db-pass-5678", "redis-pass-4321", "app:"):
        assert secret not in cleaned
    assert "postgres://db.internal/evalsite" in cleaned and '"n": 3' in cleaned
    assert strip_userinfo("http://u:p@h:1/v1?q=1") == "http://h:1/v1?q=1"
    assert strip_userinfo("http://h/v1") == "http://h/v1"
    assert "short" not in configured_secrets({"X_API_KEY": "short"})


def test_log_records_are_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefgh1234")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("tests.security.redact")
    log.addHandler(handler)
    try:
        try:
            raise ValueError("refused sk-live-abcdefgh1234")
        except ValueError:
            log.exception("call to %s failed", "http://u:sk-live-abcdefgh1234@h/v1")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert "sk-live-abcdefgh1234" not in text and "refused [redacted]" in text and "http://h/v1" in text


def test_model_messages_never_show_url_credentials():
    model = OpenAIChatModel("m", base_url=f"http://judgeuser:{URL_PASSWORD}@127.0.0.1:9/v1")
    assert URL_PASSWORD not in model.endpoint and URL_PASSWORD not in repr(model)


ECHO_TARGET = """
from evalcore.discovery import target

@target(id="echo", scorers=["exact_match"])
def echo(question):
    return question
"""


@pytest.mark.parametrize(
    ("url", "text"),
    [
        ("http://evalsite@127.0.0.1:9/v1", "evalsite rocks; see /srv/evalsite/app"),  # rs3-17, `make cluster`'s user
        ("http://postgres:pw12345678@127.0.0.1:9/v1", "use postgresql 15"),
        ("http://postgres:pw12345678@127.0.0.1:9/v1", "the pass is pw12345678"),  # a target's output, as produced
    ],
)
def test_a_targets_output_is_stored_and_rescored_as_produced(tmp_path, monkeypatch, url, text):
    monkeypatch.setenv("EVALSITE_MODEL_BASE_URL", url)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "echo.py").write_text(textwrap.dedent(ECHO_TARGET))
    bank = tmp_path / "r17.jsonl"
    bank.write_text(json.dumps({"id": "r1", "input": text, "expected": text, "split": "dev"}) + "\n")
    report = tmp_path / "r17.json"
    call_command("eval", str(tmp_path / "agents"), "--set", str(bank), "--quiet", "--json", str(report))
    assert [(c["status"], c["output"]) for c in json.loads(report.read_text())["cases"]] == [("passed", text)]
    source = EvalRun.objects.get()
    assert EvalResult.objects.get(eval_run=source).run.final_answer == text
    call_command("rescore", source.pk, "--scorer", "exact_match")
    rescored = EvalRun.objects.exclude(pk=source.pk).get()
    assert (rescored.n_passed, rescored.n_done) == (1, 1)
