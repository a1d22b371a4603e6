"""A run of a split without cases is refused in one place (``prepare.ensure_split_has_cases``),
before any ``EvalRun`` row is written, from every entry point: the CLI, the API, the start-run form."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from apps.evals.models import EvalRun
from apps.evals.runs.prepare import EmptySplitError, ensure_split_has_cases
from tests.apps.evals.test_api import write_agents
from tests.apps.factories import make_eval_set

MESSAGE = "eval set 'train-only' has no cases in split 'dev'"


@pytest.fixture
def agents_dir(tmp_path, settings):
    settings.EVALSITE_AGENTS_DIR = write_agents(tmp_path / "agents")
    return settings.EVALSITE_AGENTS_DIR


@pytest.mark.django_db
def test_the_check_counts_the_split_and_names_set_and_split():
    eval_set = make_eval_set("train-only", 3, splits=("train",))
    assert ensure_split_has_cases(eval_set, "train") == 3
    assert ensure_split_has_cases(eval_set, "all") == 3
    with pytest.raises(EmptySplitError) as err:
        ensure_split_has_cases(eval_set, "dev")
    assert str(err.value) == MESSAGE
    assert err.value.field == "split"


@pytest.mark.django_db(transaction=True)
def test_cli_refuses_before_creating_a_run(agents_dir):
    make_eval_set("train-only", 3, splits=("train",))
    with pytest.raises(CommandError) as err:
        call_command("eval", str(agents_dir), "--set", "train-only", "--target", "adder", "--quiet")
    assert MESSAGE in str(err.value)
    assert not EvalRun.objects.exists()


@pytest.mark.django_db
def test_api_refuses_before_creating_a_run(member, agents_dir):
    eval_set = make_eval_set("train-only", 3, splits=("train",))
    client = Client()
    client.force_login(member)
    request = {"set_id": eval_set.pk, "target_id": "adder", "variant": "right", "split": "dev"}
    response = client.post("/api/eval/runs", request, content_type="application/json")
    assert response.status_code == 400
    body = json.loads(response.content)
    assert body["message"] == MESSAGE and body["field"] == "split"
    assert not EvalRun.objects.exists()


@pytest.mark.django_db
def test_start_run_form_refuses_before_creating_a_run(client, member, agents_dir):
    from django_tasks_db.models import DBTaskResult

    eval_set = make_eval_set("train-only", 3, splits=("train",))
    client.force_login(member)
    response = client.post(
        reverse("evals:start_eval_run"),
        {"eval_set": eval_set.pk, "target": "adder", "variant": "right", "split": "dev"},
    )
    assert response.status_code == 200
    assert MESSAGE.replace("'", "&#x27;") in response.content.decode()
    assert not EvalRun.objects.exists()
    assert not DBTaskResult.objects.exists()
