"""Error mapping of the API: domain errors (``evalcore.errors``) answer 400/404/409 once, from
``evalsite.api``; any other exception is a bug and answers 500 in JSON, without a traceback."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from apps.evals.api import runs as evals_api
from apps.evals.runs.liveness import RunBusy
from apps.evals.runs.resume import ResumeRefused
from evalcore.discovery import UnknownVariantError
from evalcore.errors import ConflictError, EvalsiteError, InvalidInputError, NotFoundError
from evalcore.scorers.base import ScorerSpecError
from evalcore.splits import HeldOutError
from evalsite.api import status_of
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    # the test client re-raises view exceptions by default; a browser gets the 500 answer
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.parametrize("bug", [KeyError("eval_set_id"), ValueError("bad literal"), LookupError("x")])
def test_a_bug_in_a_route_is_a_500_in_json_without_traceback(viewer, monkeypatch, bug):
    def broken(**filters):
        raise bug

    monkeypatch.setattr(evals_api, "eval_run_history", broken)
    response = _client(viewer).get("/api/eval/runs")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    payload = json.loads(response.content)
    assert payload == {"message": "server error (logged)", "field": None}
    text = response.content.decode()
    assert "Traceback" not in text and type(bug).__name__ not in text and str(bug.args[0]) not in text


@pytest.mark.parametrize(
    ("error", "status", "field"),
    [
        (NotFoundError("no target 'x'", field="target_id"), 404, "target_id"),
        (ConflictError("run busy"), 409, None),
        (InvalidInputError("bad", field="split"), 400, "split"),
        (HeldOutError("the test split needs allow_test"), 400, "allow_test"),
        (UnknownVariantError("no variant 'q'"), 400, "variant"),
        (ScorerSpecError("no scorer 'q'"), 400, "scorers"),
        (RunBusy("PID 1 on h"), 409, None),
        (ResumeRefused("the set changed"), 400, None),
    ],
)
def test_domain_errors_map_to_their_status_and_field(viewer, monkeypatch, error, status, field):
    def refusing(**filters):
        raise error

    monkeypatch.setattr(evals_api, "eval_run_history", refusing)
    response = _client(viewer).get("/api/eval/runs")
    assert response.status_code == status
    assert json.loads(response.content) == {"message": str(error), "field": field}


def test_every_domain_error_derives_from_the_one_base():
    for kind in (HeldOutError, UnknownVariantError, ScorerSpecError, RunBusy, ResumeRefused):
        assert issubclass(kind, EvalsiteError)
    assert status_of(NotFoundError("x")) == 404 and status_of(ConflictError("x")) == 409
    assert status_of(InvalidInputError("x")) == 400 and status_of(EvalsiteError("x")) == 400


def test_resume_of_a_run_held_by_a_live_process_is_a_conflict(member, monkeypatch):
    eval_set = make_eval_set("busy", 3)
    eval_run = make_eval_run(eval_set, [True], status="interrupted")

    def busy(run):
        raise RunBusy(f"run {run.pk} is being executed by PID 7 on elsewhere")

    monkeypatch.setattr(evals_api, "resume_in_worker", busy)
    response = _client(member).post(f"/api/eval/runs/{eval_run.pk}/resume")
    assert response.status_code == 409
    assert "PID 7 on elsewhere" in json.loads(response.content)["message"]


def test_unknown_target_is_a_404_naming_the_field(member, tmp_path, settings):
    settings.EVALSITE_AGENTS_DIR = tmp_path
    eval_set = make_eval_set("t", 3)
    response = _client(member).post(
        "/api/eval/runs",
        {"set_id": eval_set.pk, "target_id": "nope", "split": "dev"},
        content_type="application/json",
    )
    assert response.status_code == 404
    payload = json.loads(response.content)
    assert payload["field"] == "target_id" and "no target 'nope'" in payload["message"]
