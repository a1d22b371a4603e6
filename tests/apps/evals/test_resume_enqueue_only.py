"""The portal's and the API's Resume only queue work: the agents folder a CLI run recorded is
never imported by the web server (a web request queues; target code runs in workers).

The recorded folder holds a module that leaves a marker file when imported. Resuming from the
run page and through the API marks the run queued and creates a task, and the marker does not
appear; importing the folder (what the worker does) does create it, so the check is not vacuous.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django_tasks_db.models import DBTaskResult

from apps.agents.registry import load_target
from apps.evals.models import EvalRun, EvalRunStatus
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = """
from pathlib import Path

from evalcore.discovery import target

Path({marker!r}).write_text("imported")


@target(id="noisy", scorers=["exact_match"])
def noisy(question):
    return question
"""


@pytest.fixture
def cli_run(tmp_path):
    """An interrupted run, as a CLI run records it: target ``noisy`` from its own agents folder."""
    folder = tmp_path / "cli-agents"
    folder.mkdir()
    marker = tmp_path / "imported-marker"
    (folder / "noisy_agent.py").write_text(AGENT.format(marker=str(marker)))
    eval_set = make_eval_set("resumable", 4)
    eval_run = make_eval_run(eval_set, [True], status=EvalRunStatus.INTERRUPTED)
    EvalRun.objects.filter(pk=eval_run.pk).update(
        target_id="noisy",
        set_hash=eval_set.content_hash,
        scorer_specs=[{"name": "exact_match", "args": {}}],
        config={"repeat": 1, "agents_dir": str(folder)},
    )
    return EvalRun.objects.get(pk=eval_run.pk), folder, marker


@pytest.mark.parametrize("route", ["page", "api"])
def test_resume_queues_the_run_without_importing_its_agents_folder(cli_run, member, route):
    eval_run, folder, marker = cli_run
    client = Client()
    client.force_login(member)
    if route == "page":
        response = client.post(f"/runs/{eval_run.pk}/resume/")
        assert response.status_code == 302
    else:
        response = client.post(f"/api/eval/runs/{eval_run.pk}/resume", content_type="application/json")
        assert response.status_code == 202, response.content
    eval_run.refresh_from_db()
    assert eval_run.status == "queued" and DBTaskResult.objects.count() == 1
    assert not marker.exists(), "the web request imported the run's agents folder"
    load_target("noisy", str(folder))  # what the worker does with it
    assert marker.exists()


def test_resume_of_a_run_whose_agents_folder_is_gone_is_refused_with_a_message(cli_run, member, tmp_path):
    eval_run, folder, _ = cli_run
    (folder / "noisy_agent.py").unlink()
    folder.rmdir()
    client = Client()
    client.force_login(member)
    response = client.post(f"/api/eval/runs/{eval_run.pk}/resume", content_type="application/json")
    assert response.status_code == 400 and "no longer exists" in response.json()["message"]
    eval_run.refresh_from_db()
    assert eval_run.status == "interrupted"
