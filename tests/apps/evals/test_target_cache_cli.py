"""``evalsite eval --cache-target`` against a local stand-in OpenAI-compatible endpoint (issue 27):
a second run makes no endpoint call, says how many cases were cached (summary line, ``--json``,
run page), keeps them out of latency figures; a changed variant or module, ``--no-cache`` and an
errored call all reach the endpoint again; ``evalsite cache stats|clear``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.evals.models import CaseCost, EvalResult, EvalRun, EvalSet
from apps.evals.queries.figures import run_distributions
from apps.evals.queries.target_cache import cache_counts
from apps.evals.runs.naming import create_numbered_run
from apps.evals.runs.options import RunOptions, resume_changes
from tests.support.stand_in_llm import StandInLLM

AGENT = textwrap.dedent(
    """
    import os
    from evalcore.discovery import TargetSpec
    from evalcore.runtime.agent import Agent
    from evalcore.runtime.openai_client import OpenAIChatModel

    model = OpenAIChatModel("stand-in-model", base_url=os.environ["STAND_IN_URL"], max_retries=0)
    bot = TargetSpec(
        id="bot",
        variants={"terse": Agent(model, instructions="Be terse."), "chatty": Agent(model, instructions="Chat.")},
        scorers=["exact_match"],
    )
    """
)


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The stand-in's answer: the user's message upper-cased (so exact_match passes)."""
    from tests.support.stand_in_llm import completion_body

    user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    return completion_body(user.upper(), usage=(12, 3))


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Any:
    with StandInLLM(responder=answer) as server:
        monkeypatch.setenv("STAND_IN_URL", server.base_url)
        yield server


@pytest.fixture
def project(tmp_path: Path, settings: Any) -> tuple[Path, Path]:
    settings.DATA_DIR = tmp_path / "data"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "bot.py").write_text(AGENT)
    rows = [
        {"id": f"q{i}", "input": w, "expected": w.upper(), "split": "dev"} for i, w in enumerate(["ab", "cd", "ef"])
    ]
    cases = tmp_path / "qa.jsonl"
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return agents, cases


def evalsite_eval(project: tuple[Path, Path], *args: str) -> EvalRun:
    agents, cases = project
    call_command("eval", str(agents), "--set", str(cases), "--quiet", "--concurrency", "1", *args)
    return EvalRun.objects.order_by("-number", "-started").first()  # type: ignore[return-value]


def chat_calls(llm: StandInLLM) -> int:
    return sum(1 for r in llm.requests if r.path.endswith("/chat/completions"))


@pytest.mark.django_db(transaction=True)
def test_a_second_cached_run_makes_no_endpoint_call(
    llm: StandInLLM, project: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], viewer: User
) -> None:
    llm.error(400, "bad request")  # the first case's first call errs: never cached
    first = evalsite_eval(project, "--variant", "terse", "--cache-target")
    assert chat_calls(llm) == 3
    assert first.n_errored == 1 and first.config["cache_target"] is True
    capsys.readouterr()

    report = tmp_path / "report.json"
    second = evalsite_eval(project, "--variant", "terse", "--cache-target", "--json", str(report))
    assert chat_calls(llm) == 4  # only the errored case was called again
    assert second.n_passed == 3
    out = capsys.readouterr().out
    assert "2 of 3 case(s) answered from the target cache" in out
    data = json.loads(report.read_text())
    assert data["target_cache"] == {"cached": 2, "skipped_conversations": 0, "n": 3}
    cached_rows = [c for c in data["cases"] if "target_cache" in c]
    assert len(cached_rows) == 2 and all(c["target_cache"]["hit"] for c in cached_rows)

    hits = EvalResult.objects.filter(eval_run=second, run__metadata__target_cache__hit=True).select_related("run")
    assert hits.count() == 2
    for result in hits:  # nothing spent, the first call's tokens kept beside
        assert (result.run.tokens_in, result.run.tokens_out) == (0, 0)
        assert result.run.metadata["target_cache"]["tokens_in"] == 12
        assert result.run.events.filter(type="span_begin", name="target_cache hit").exists()
    # the cost rows: a cached case costs nothing and has no wall time (kept out of p50 / p95)
    costs = CaseCost.objects.filter(eval_run=second)
    assert costs.count() == 3 and costs.filter(wall_ms__isnull=True).count() == 2
    latency = run_distributions(second)[1]
    assert latency.title == "latency (ms); 2 cached case(s) left out"

    third = evalsite_eval(project, "--variant", "terse", "--cache-target")
    assert chat_calls(llm) == 4 and cache_counts(third.pk).hits == 3  # every case from the cache now

    page = Client()
    page.force_login(viewer)
    html = page.get(f"/runs/{third.pk}/").content.decode()
    assert "3 of 3 case(s) answered from the target cache" in html
    hit = EvalResult.objects.filter(eval_run=third).first()
    assert hit is not None
    case_page = page.get(f"/runs/{third.pk}/cases/{hit.pk}/").content.decode()
    assert 'id="case-target-cache"' in case_page and "first answered by run" in case_page
    trace = page.get(reverse("traces:detail", args=[hit.run_id]))
    assert trace.status_code == 200 and "target_cache hit" in trace.content.decode()


@pytest.mark.django_db(transaction=True)
def test_what_changes_the_answer_reaches_the_endpoint_again(
    llm: StandInLLM, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    agents, _ = project
    evalsite_eval(project, "--variant", "terse", "--cache-target")
    assert chat_calls(llm) == 3
    evalsite_eval(project, "--variant", "chatty", "--cache-target")  # another variant
    assert chat_calls(llm) == 6
    evalsite_eval(project, "--variant", "terse", "--no-cache")  # no cache read
    assert chat_calls(llm) == 9
    evalsite_eval(project, "--variant", "terse")  # off by default
    assert chat_calls(llm) == 12
    with (agents / "bot.py").open("a") as handle:  # the module's code changed
        handle.write("# a new line\n")
    evalsite_eval(project, "--variant", "terse", "--cache-target")
    assert chat_calls(llm) == 15
    evalsite_eval(project, "--variant", "terse", "--cache-target")
    assert chat_calls(llm) == 15

    capsys.readouterr()
    call_command("cache", "stats")
    out = capsys.readouterr().out
    assert "bot / terse: 6 answer(s)" in out and "bot / chatty: 3 answer(s)" in out
    call_command("cache", "clear", "--target", "bot", "--variant", "chatty")
    assert "3 answer(s) of bot / chatty deleted" in capsys.readouterr().out
    call_command("cache", "clear")
    assert "6 answer(s) deleted" in capsys.readouterr().out
    evalsite_eval(project, "--variant", "terse", "--cache-target")
    assert chat_calls(llm) == 18


@pytest.mark.django_db
def test_a_resume_without_the_cache_still_counts_the_cases_cached_before() -> None:
    eval_set = EvalSet.objects.create(name="qa")
    cached = create_numbered_run(
        eval_set=eval_set, target_id="bot", variant="terse", split="dev", config={"cache_target": True}
    )
    changes = resume_changes(cached, RunOptions(cache_target=False))
    assert changes["cache_target"] is False and changes["cache_target_used"] is True
    assert resume_changes(cached, RunOptions())
    plain = create_numbered_run(eval_set=eval_set, target_id="bot", variant="terse", split="dev")
    EvalRun.objects.filter(pk=plain.pk).update(n_done=5)
    with CaptureQueriesContext(connection) as queries:
        counts = cache_counts(plain.pk)
    assert (counts.hits, counts.n, len(queries)) == (0, 5, 1)  # a run that never used the cache: no scan
    assert "cache_target" not in resume_changes(plain, RunOptions())
