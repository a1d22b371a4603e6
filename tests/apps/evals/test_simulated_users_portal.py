"""Simulated users started from the portal (issue 25 follow-up): the API and the start-run form
take an optional user simulator, stored in the run's config without credentials, and the task
worker plays the run's scenario cases with it, its API key read from the worker's environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from apps.agents.registry import load_target
from apps.evals.models import EvalResult, EvalRun, EvalSet
from apps.evals.runs.config import RunConfig
from apps.evals.runs.execution import execute_eval_run
from apps.evals.runs.plan import load_run_target
from apps.evals.runs.prepare import prepare_eval_run
from apps.evals.worker.shard_run import run_shard
from apps.evals.worker.shards import plan_shards
from evalcore.simulator import STOP_SIGNAL
from tests.support.stand_in_llm import StandInLLM, completion_body

pytestmark = pytest.mark.django_db

AGENTS = """
from evalcore.discovery import target


@target(id="desk", scorers=["exact_match"])
def desk(message, session):
    return f"answer {session.turn + 1}"
"""


def user_model(body: dict[str, Any]) -> dict[str, Any]:
    answers = [m["content"] for m in body["messages"] if m["role"] == "user"]
    if len(answers) >= 3:
        return completion_body(STOP_SIGNAL, usage=(20, 2))
    return completion_body(f"and then? (after {answers[-1]})", usage=(20, 5))


@pytest.fixture
def bookings(tmp_path: Path, settings: Any) -> EvalSet:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "desk.py").write_text(AGENTS)
    settings.EVALSITE_AGENTS_DIR = folder
    settings.DATA_DIR = tmp_path / "data"
    bank = tmp_path / "bookings.jsonl"
    case = {"id": "b0", "split": "dev", "scenario": {"opening": "Book me a table", "goal": "two at 8pm"}}
    bank.write_text(json.dumps(case) + "\n")
    call_command("import", str(bank))
    return EvalSet.objects.get(name="bookings")


def start(member: Any, bookings: EvalSet, **extra: Any) -> Any:
    client = Client()
    client.force_login(member)
    request = {"set_id": bookings.pk, "target_id": "desk", "split": "dev", **extra}
    return client.post("/api/eval/runs", request, content_type="application/json")


@pytest.mark.django_db(transaction=True)
def test_the_api_stores_the_simulator_and_the_task_worker_plays_with_it(
    member: Any, bookings: EvalSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_KEY", "sk-worker-key")
    monkeypatch.setenv("EVALSITE_MODEL_API_KEY_ENV", "STAND_IN_KEY")
    with StandInLLM(responder=user_model) as llm:
        with_password = llm.base_url.replace("http://", "http://me:hunter2@")
        response = start(member, bookings, simulator={"model": "user-model", "base_url": with_password, "seed": 5})
        assert response.status_code == 201, response.content
        eval_run = EvalRun.objects.get()
        assert eval_run.config["simulator"] == {
            "model": "user-model",
            "base_url": llm.base_url,
            "seed": 5,
            "cache": True,
        }
        assert "hunter2" not in json.dumps(eval_run.config)
        # what the task worker does with the queued run (apps.evals.worker.tasks)
        execute_eval_run(eval_run, load_run_target(eval_run))
        assert [r.body["seed"] for r in llm.chat_requests] == [5, 5, 5]
        assert all(r.headers["authorization"] == "Bearer sk-worker-key" for r in llm.chat_requests)
    result = EvalResult.objects.select_related("run").get(eval_run=eval_run)
    assert result.run.error is None  # the conversation played whole (no expected answer: not scored here)
    assert [t["user_from"] for t in result.run.metadata["turns"][1:]] == ["llm", "llm"]
    assert result.run.metadata["simulator"]["seed"] == 5


@pytest.mark.parametrize(
    ("simulator", "field"),
    [({"model": "m", "seed": -1}, "seed"), ({"model": ""}, "model"), ({"seed": 3}, "model")],
)
def test_a_bad_simulator_request_is_a_400_naming_the_field(
    member: Any, bookings: EvalSet, simulator: dict[str, Any], field: str
) -> None:
    response = start(member, bookings, simulator=simulator)
    assert response.status_code in (400, 422), response.content
    assert field in response.content.decode()
    assert not EvalRun.objects.exists()


def test_the_start_run_form_takes_an_optional_simulator(member: Any, bookings: EvalSet) -> None:
    client = Client()
    client.force_login(member)
    assert "simulated users (optional)" in client.get(reverse("evals:start_eval_run")).content.decode()
    refused = client.post(
        reverse("evals:start_eval_run"),
        {"eval_set": bookings.pk, "target": "desk", "split": "dev", "simulator_seed": 2},
    )
    assert refused.status_code == 200 and "needs a simulator model" in refused.content.decode()
    assert not EvalRun.objects.exists()
    form = {"eval_set": bookings.pk, "target": "desk", "split": "dev", "simulator_model": "user-model"}
    response = client.post(reverse("evals:start_eval_run"), {**form, "simulator_seed": 9})
    assert response.status_code == 302
    assert EvalRun.objects.get().config["simulator"] == {
        "model": "user-model",
        "base_url": "",
        "seed": 9,
        "cache": True,
    }


@pytest.mark.django_db(transaction=True)
def test_the_queues_shards_play_a_simulated_case_with_the_runs_own_simulator(
    bookings: EvalSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_KEY", "sk-worker-key")
    monkeypatch.setenv("EVALSITE_MODEL_API_KEY_ENV", "STAND_IN_KEY")
    with StandInLLM(responder=user_model) as llm:
        eval_run = prepare_eval_run(
            eval_set=bookings,
            spec=load_target("desk"),
            variant=None,
            split="dev",
            allow_test=False,
            config=RunConfig.parse(
                {"executor": "queue", "simulator": {"model": "user-model", "base_url": llm.base_url}}
            ),
        )
        for shard_id, token in plan_shards(eval_run, size=1):
            assert run_shard(shard_id, token)["status"] == "done"
        assert len(llm.chat_requests) == 3
    result = EvalResult.objects.select_related("run").get(eval_run=eval_run)
    assert result.run.error is None
    assert [t["user_from"] for t in result.run.metadata["turns"][1:]] == ["llm", "llm"]
