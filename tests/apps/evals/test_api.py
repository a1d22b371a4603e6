"""The JSON API: every route for anonymous / outsider / viewer / member, bad ids, wrong methods,
bad input, and what each route answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from apps.core.auth import create_api_token
from apps.evals.models import EvalRun
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db

AGENT_SOURCE = """
import re

from evalcore.discovery import TargetSpec


def _add(question):
    n = int(re.search(r"(\\d+) \\+", question["question"]).group(1))
    return str(2 * n)


def _zero(question):
    return "0"


adder = TargetSpec(id="adder", variants={"right": _add, "zero": _zero}, scorers=["exact_match"])
"""


def write_agents(folder: Path) -> Path:
    """An agents folder with one target ``adder`` (variants ``right`` / ``zero``) for make_eval_set's cases."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.py").write_text(AGENT_SOURCE)
    return folder


@pytest.fixture
def agents_dir(tmp_path, settings):
    settings.EVALSITE_AGENTS_DIR = write_agents(tmp_path / "agents")
    return settings.EVALSITE_AGENTS_DIR


@pytest.fixture
def qa():
    return make_eval_set("qa", 9)


@pytest.fixture
def runs(qa):
    a = make_eval_run(
        qa, [True, True, False, True, "errored", True], variant="v1", case_ids=[f"c{i}" for i in range(6)]
    )
    b = make_eval_run(qa, [True, False, True, True, True, True], variant="v2", case_ids=[f"c{i}" for i in range(6)])
    return a, b


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def body(response) -> dict:
    return json.loads(response.content)


def run_request(qa, **extra) -> dict:
    return {"set_id": qa.pk, "target_id": "adder", "variant": "right", "split": "dev", **extra}


# -- access --------------------------------------------------------------------------------------

READS = [
    "/api/eval/sets",
    "/api/eval/sets/{set}/cases",
    "/api/eval/runs",
    "/api/eval/runs/{a}",
    "/api/eval/compare?a={a}&b={b}",
    "/api/eval/runs/{a}/rules",
    "/api/eval/compare/rules?a={a}&b={b}",
]
WRITES = ["/api/eval/runs", "/api/eval/cases/from-session", "/api/eval/runs/any/cancel"]


def fill(path: str, qa, runs) -> str:
    return path.format(set=qa.pk, a=runs[0].pk, b=runs[1].pk)


@pytest.mark.parametrize("path", READS)
def test_anonymous_reads_get_401_json(path, qa, runs):
    response = Client().get(fill(path, qa, runs))
    assert response.status_code == 401
    assert "log in" in body(response)["message"]
    assert body(response)["field"] is None


@pytest.mark.parametrize("path", WRITES)
def test_anonymous_writes_get_401_not_a_csrf_403(path):
    response = Client(enforce_csrf_checks=True).post(path, {}, content_type="application/json")
    assert response.status_code == 401


@pytest.mark.parametrize("path", READS)
def test_user_without_role_gets_403(path, qa, runs, outsider):
    response = client_for(outsider).get(fill(path, qa, runs))
    assert response.status_code == 403
    assert "viewer" in body(response)["message"]


@pytest.mark.parametrize("path", READS)
def test_viewer_reads(path, qa, runs, viewer):
    assert client_for(viewer).get(fill(path, qa, runs)).status_code == 200


def test_viewer_cannot_start_a_run(qa, viewer, agents_dir):
    response = client_for(viewer).post("/api/eval/runs", run_request(qa), content_type="application/json")
    assert response.status_code == 403
    assert body(response) == {"message": "only members can start runs: user 'viewer' is not a member", "field": None}
    assert not EvalRun.objects.exists()


def test_only_members_cancel_and_only_sharded_runs(qa, runs, viewer, member):
    refused = client_for(viewer).post(f"/api/eval/runs/{runs[0].pk}/cancel", content_type="application/json")
    assert refused.status_code == 403
    assert body(refused)["message"] == "only members can cancel runs: user 'viewer' is not a member"
    unsharded = client_for(member).post(f"/api/eval/runs/{runs[0].pk}/cancel", content_type="application/json")
    assert unsharded.status_code == 409 and "not sharded" in body(unsharded)["message"]
    missing = client_for(member).post("/api/eval/runs/nope/cancel", content_type="application/json")
    assert missing.status_code == 404


def test_viewer_cannot_capture_a_case(qa, viewer):
    payload = {"session_id": 1, "set_id": qa.pk, "split": "train", "input": "q", "expected": "a"}
    response = client_for(viewer).post("/api/eval/cases/from-session", payload, content_type="application/json")
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("delete", "/api/eval/sets"),
        ("post", "/api/eval/sets/{set}/cases"),
        ("put", "/api/eval/runs"),
        ("put", "/api/eval/runs/{a}"),
        ("post", "/api/eval/compare?a={a}&b={b}"),
        ("get", "/api/eval/cases/from-session"),
    ],
)
def test_wrong_method_is_405(method, path, qa, runs, member):
    response = getattr(client_for(member), method)(fill(path, qa, runs))
    assert response.status_code == 405


def test_docs_need_login_and_list_every_route(viewer):
    assert Client().get("/api/docs").status_code == 302
    schema = body(client_for(viewer).get("/api/openapi.json"))
    assert set(schema["paths"]) == {
        "/api/eval/sets",
        "/api/eval/sets/{set_id}/cases",
        "/api/eval/sets/{set_id}/cases/{case_id}/history",
        "/api/eval/cases",
        "/api/eval/cases/{case_pk}",
        "/api/eval/runs",
        "/api/eval/runs/{run_id}",
        "/api/eval/runs/{run_id}/resume",
        "/api/eval/runs/{run_id}/cancel",
        "/api/eval/runs/{run_id}/rules",
        "/api/eval/runs/{run_id}/cases/{case_id}/reviews",
        "/api/eval/runs/{run_id}/reviews/agreement",
        "/api/eval/compare",
        "/api/eval/compare/rules",
        "/api/eval/compare/slices",
        "/api/eval/cases/from-session",
        "/api/status",
        "/api/eval/runs/{run_id}/export",
        "/api/eval/runs/{run_id}/review-queue/export",
        "/api/eval/compare/export",
        "/api/eval/sets/{set_id}/export",
        "/api/eval/sets/{set_id}/review-queue/export",
        # the bake-off (issue 27)
        "/api/eval/compare-many",
        "/api/eval/compare-many/cases",
        "/api/eval/compare-many/export",
        "/api/eval/sets/{set_id}/leaderboard",
        # the judge ledger and flakiness (issue 28)
        "/api/eval/runs/{run_id}/ledger",
        "/api/eval/runs/{run_id}/ledger/summary",
        "/api/eval/sets/{set_id}/flakiness",
        # online scoring (issue 28)
        "/api/online/rules",
        "/api/online/rules/{rule_id}",
        "/api/online/rules/{rule_id}/alerts",
        "/api/online/rules/{rule_id}/backfill",
        "/api/online/rules/{rule_id}/windows",
        "/api/online/alerts/{alert_id}/firings",
        "/api/online/firings",
    }


# -- bad ids and bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/eval/sets/999999/cases", "set_id"),
        ("/api/eval/runs/nope", "run_id"),
        ("/api/eval/compare?a=nope&b={b}", "a"),
        ("/api/eval/compare?a={a}&b=nope", "b"),
    ],
)
def test_unknown_ids_are_404_with_the_field(path, field, qa, runs, viewer):
    response = client_for(viewer).get(fill(path, qa, runs))
    assert response.status_code == 404
    assert body(response)["field"] == field


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/eval/sets/abc/cases", "set_id"),
        ("/api/eval/sets/{set}/cases?split=validation", "split"),
        ("/api/eval/sets/{set}/cases?page=0", "page"),
        ("/api/eval/runs?page_size=100000", "page_size"),
        ("/api/eval/runs?status=done", "status"),
        ("/api/eval/runs/{a}?status=bogus", "status"),
        ("/api/eval/runs/{a}?order=random", "order"),
        ("/api/eval/compare?a={a}", "b"),
        ("/api/eval/compare?a={a}&b={b}&only=everything", "only"),
    ],
)
def test_bad_query_input_is_422_with_the_field(path, field, qa, runs, viewer):
    response = client_for(viewer).get(fill(path, qa, runs))
    assert response.status_code == 422
    assert body(response)["field"] == field
    assert field in body(response)["message"]


@pytest.mark.parametrize(
    ("extra", "status", "field"),
    [
        ({"split": "validation"}, 422, "split"),
        ({"set_id": "x"}, 422, "set_id"),
        ({"target_id": ""}, 422, "target_id"),
        ({"set_id": 999999}, 404, "set_id"),
        ({"target_id": "missing"}, 404, "target_id"),
        ({"variant": "nope"}, 400, "variant"),
        ({"split": "test"}, 400, "allow_test"),
        ({"split": "all"}, 400, "allow_test"),
    ],
)
def test_bad_run_requests_name_the_field(extra, status, field, qa, member, agents_dir):
    response = client_for(member).post("/api/eval/runs", run_request(qa, **extra), content_type="application/json")
    assert response.status_code == status, response.content
    assert body(response)["field"] == field
    assert not EvalRun.objects.exists()


def test_malformed_json_body_is_a_client_error(member):
    response = client_for(member).post("/api/eval/runs", "{not json", content_type="application/json")
    assert 400 <= response.status_code < 500
    assert "message" in body(response)


def test_empty_split_is_refused(member, agents_dir):
    eval_set = make_eval_set("train-only", 3, splits=("train",))
    response = client_for(member).post(
        "/api/eval/runs", run_request(eval_set, split="dev"), content_type="application/json"
    )
    assert response.status_code == 400
    assert body(response)["field"] == "split"


def test_compare_refuses_runs_of_different_sets(runs, viewer):
    other = make_eval_run(make_eval_set("other", 2), [True, False])
    response = client_for(viewer).get(f"/api/eval/compare?a={runs[0].pk}&b={other.pk}")
    assert response.status_code == 400
    assert body(response)["field"] == "b"
    same = client_for(viewer).get(f"/api/eval/compare?a={runs[0].pk}&b={runs[0].pk}")
    assert same.status_code == 400


# -- what the routes answer --------------------------------------------------------------------


def test_sets_have_per_split_counts(qa, viewer):
    make_eval_set("empty", 0)
    sets = {s["name"]: s for s in body(client_for(viewer).get("/api/eval/sets"))["items"]}
    assert sets["qa"]["splits"] == {"train": 3, "dev": 3, "test": 3}
    assert sets["qa"]["n_cases"] == 9
    assert sets["empty"]["splits"] == {"train": 0, "dev": 0, "test": 0}


def test_sets_are_paginated_by_name_and_found_by_name(qa, viewer, django_assert_max_num_queries):
    for name in ("b-set", "a-set", "c-set"):
        make_eval_set(name, 2)
    client = client_for(viewer)
    with django_assert_max_num_queries(6):  # session, user, roles, COUNT, one page with its counts
        first = body(client.get("/api/eval/sets?page_size=2"))
    assert (first["total"], first["pages"], first["page"]) == (4, 2, 1)
    assert [s["name"] for s in first["items"]] == ["a-set", "b-set"] and first["items"][0]["n_cases"] == 2
    second = body(client.get("/api/eval/sets?page=2&page_size=2"))
    assert [(s["name"], s["n_cases"]) for s in second["items"]] == [("c-set", 2), ("qa", 9)]
    assert body(client.get("/api/eval/sets?page=3&page_size=2"))["items"] == []
    (found,) = body(client.get("/api/eval/sets?name=qa"))["items"]
    assert found["id"] == qa.pk and found["splits"] == {"train": 3, "dev": 3, "test": 3}
    assert body(client.get("/api/eval/sets?name=missing"))["total"] == 0
    assert client.get("/api/eval/sets?page_size=501").status_code == 422


def test_cases_filter_by_split_and_tag_and_paginate(qa, viewer):
    client = client_for(viewer)
    page = body(client.get(f"/api/eval/sets/{qa.pk}/cases?split=dev&page_size=2"))
    assert page["total"] == 3 and page["pages"] == 2
    assert [c["case_id"] for c in page["items"]] == ["c1", "c4"]
    assert all(c["split"] == "dev" for c in page["items"])
    page2 = body(client.get(f"/api/eval/sets/{qa.pk}/cases?split=dev&page_size=2&page=2"))
    assert [c["case_id"] for c in page2["items"]] == ["c7"]
    odd = body(client.get(f"/api/eval/sets/{qa.pk}/cases?tag=odd"))
    assert [c["case_id"] for c in odd["items"]] == ["c1", "c3", "c5", "c7"]
    assert odd["items"][0]["input"] == {"question": "what is 1 + 1?"}
    assert odd["items"][0]["expected"] == "2"
    past_end = body(client.get(f"/api/eval/sets/{qa.pk}/cases?page=50"))
    assert past_end["items"] == [] and past_end["total"] == 9


def test_runs_history_filters(qa, runs, viewer):
    client = client_for(viewer)
    everything = body(client.get("/api/eval/runs"))
    assert everything["total"] == 2
    only_v2 = body(client.get("/api/eval/runs?variant=v2"))
    assert [r["id"] for r in only_v2["items"]] == [runs[1].pk]
    assert only_v2["items"][0]["pass_rate"] == pytest.approx(5 / 6)
    assert body(client.get(f"/api/eval/runs?set_id={qa.pk}&target_id=echo&split=all&status=finished"))["total"] == 2
    assert body(client.get("/api/eval/runs?status=running"))["total"] == 0
    assert body(client.get("/api/eval/runs?target_id=other"))["total"] == 0
    paged = body(client.get("/api/eval/runs?page_size=1&page=2"))
    assert len(paged["items"]) == 1 and paged["pages"] == 2


def test_run_detail_pages_filters_and_sorts_results(runs, viewer):
    run_a = runs[0]
    client = client_for(viewer)
    detail = body(client.get(f"/api/eval/runs/{run_a.pk}?page_size=4"))
    assert detail["run"]["n_passed"] == 4 and detail["run"]["n_errored"] == 1
    assert detail["results"]["total"] == 6 and detail["results"]["pages"] == 2
    items = detail["results"]["items"]
    assert [r["case_id"] for r in items] == ["c0", "c1", "c2", "c3"]
    assert items[0]["output"] == "answer c0" and items[0]["scores"][0]["name"] == "exact_match"
    assert detail["last_seq"] == max(r.pk for r in run_a.results.all())
    errored = body(client.get(f"/api/eval/runs/{run_a.pk}?status=errored"))["results"]
    assert [r["case_id"] for r in errored["items"]] == ["c4"]
    assert errored["items"][0]["error"] == {"type": "ValueError", "message": "boom"}
    assert errored["total"] == 1
    failed_first = body(client.get(f"/api/eval/runs/{run_a.pk}?order=score"))["results"]["items"]
    assert failed_first[0]["case_id"] == "c4"  # no score sorts first, then the failure
    assert failed_first[1]["case_id"] == "c2"
    searched = body(client.get(f"/api/eval/runs/{run_a.pk}?search=C3"))["results"]
    assert [r["case_id"] for r in searched["items"]] == ["c3"]


def test_compare_puts_flips_first_with_statistics(runs, viewer):
    a, b = runs
    data = body(client_for(viewer).get(f"/api/eval/compare?a={a.pk}&b={b.pk}&scorers=true"))
    assert data["counts"]["a_only"] == 1  # c1: pass -> fail
    assert data["counts"]["b_only"] == 2  # c2 and c4 (errored): fail -> pass
    assert [(r["case_id"], r["kind"]) for r in data["items"][:3]] == [
        ("c1", "regression"),
        ("c2", "improvement"),
        ("c4", "improvement"),
    ]
    assert 0 <= data["verdict"]["p_value"] <= 1
    # a handful of cases: a null interval, the reason beside it, no verdict
    assert data["pass_rate_interval"] is None and data["pass_rate_interval_reason"].startswith("too few cases (n=")
    assert data["verdict"]["outcome"] == "too_few_cases"
    assert [d["name"] for d in data["scorer_deltas"]] == ["exact_match"]
    regressions = body(client_for(viewer).get(f"/api/eval/compare?a={a.pk}&b={b.pk}&only=regressions"))
    assert [r["case_id"] for r in regressions["items"]] == ["c1"] and regressions["total"] == 1


def test_member_starts_a_run_and_it_is_queued(qa, member, agents_dir):
    from django_tasks_db.models import DBTaskResult

    response = client_for(member).post(
        "/api/eval/runs", run_request(qa, variant="zero"), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    data = body(response)
    eval_run = EvalRun.objects.get(pk=data["id"])
    assert data["status"] == "queued" and data["n_total"] == 3
    assert data["api_url"] == f"/api/eval/runs/{eval_run.pk}"
    assert eval_run.pk in data["url"]
    assert (eval_run.variant, eval_run.split, eval_run.created_by) == ("zero", "dev", member)
    assert eval_run.config["executor"] == "task" and eval_run.config["agents_dir"] == str(agents_dir)
    task = DBTaskResult.objects.get(id=data["task_id"])
    assert task.task_path == "apps.evals.worker.tasks.run_eval_task"
    assert task.args_kwargs["args"] == [eval_run.pk]


def test_test_split_runs_with_explicit_opt_in(qa, member, agents_dir):
    response = client_for(member).post(
        "/api/eval/runs", run_request(qa, split="test", allow_test=True), content_type="application/json"
    )
    assert response.status_code == 201
    assert EvalRun.objects.get().split == "test"


def test_session_posts_need_the_csrf_token(qa, member, agents_dir):
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    refused = client.post("/api/eval/runs", run_request(qa), content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in body(refused)["message"]
    client.get("/api/eval/sets")  # any page sets no cookie by itself: ask Django for one
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    accepted = client.post(
        "/api/eval/runs",
        run_request(qa),
        content_type="application/json",
        headers={"X-CSRFToken": _mask_cipher_secret(secret)},
    )
    assert accepted.status_code == 201, accepted.content


# -- bearer tokens -------------------------------------------------------------------------------


def test_bearer_token_reads_and_starts_runs_without_csrf(qa, member, agents_dir):
    token, raw = create_api_token(user=member, name="ci")
    client = Client(enforce_csrf_checks=True)
    auth = {"Authorization": f"Bearer {raw}"}
    assert client.get("/api/eval/sets", headers=auth).status_code == 200
    started = client.post("/api/eval/runs", run_request(qa), content_type="application/json", headers=auth)
    assert started.status_code == 201, started.content
    assert EvalRun.objects.get().created_by == member
    token.refresh_from_db()
    assert token.last_used is not None


def test_viewer_token_cannot_start_runs(qa, viewer, agents_dir):
    _, raw = create_api_token(user=viewer)
    response = Client().post(
        "/api/eval/runs", run_request(qa), content_type="application/json", headers={"Authorization": f"Bearer {raw}"}
    )
    assert response.status_code == 403


@pytest.mark.parametrize("header", ["Bearer esk_garbage", "Bearer ", "Bearer not-even-ours", "Basic dXNlcjpwYXNz"])
def test_garbage_tokens_are_401(header, member):
    response = Client().get("/api/eval/sets", headers={"Authorization": header})
    assert response.status_code == 401


def test_revoked_and_inactive_tokens_are_401(member):
    token, raw = create_api_token(user=member)
    auth = {"Authorization": f"Bearer {raw}"}
    assert Client().get("/api/eval/sets", headers=auth).status_code == 200
    token.delete()
    assert Client().get("/api/eval/sets", headers=auth).status_code == 401
    _, raw2 = create_api_token(user=member)
    member.is_active = False
    member.save()
    assert Client().get("/api/eval/sets", headers={"Authorization": f"Bearer {raw2}"}).status_code == 401


# -- capture a playground session as a case -----------------------------------------------------


@pytest.fixture
def session(member):
    from apps.agents.models import Message, Session

    chat = Session.objects.create(user=member, target_id="adder", title="chat")
    Message.objects.create(session=chat, role="user", content="what is 2 + 2?")
    Message.objects.create(session=chat, role="assistant", content="4")
    return chat


def capture(user, **payload):
    return client_for(user).post("/api/eval/cases/from-session", payload, content_type="application/json")


def test_member_captures_a_session_with_the_conversation_as_defaults(qa, member, session):
    response = capture(member, session_id=session.pk, set_id=qa.pk, split="dev", tags=["playground"])
    assert response.status_code == 201, response.content
    case = body(response)
    assert case["case_id"] == f"session-{session.pk}"
    assert case["input"] == [{"role": "user", "content": "what is 2 + 2?"}]
    assert case["expected"] == "4"  # the set's cases expect strings: the answer in that shape
    assert (case["split"], case["tags"]) == ("dev", ["playground"])
    assert case["metadata"]["session_id"] == session.pk
    cases = body(client_for(member).get(f"/api/eval/sets/{qa.pk}/cases?tag=playground"))["items"]
    assert [c["case_id"] for c in cases] == [case["case_id"]]


def test_capture_keeps_edited_values(qa, member, session):
    response = capture(member, session_id=session.pk, set_id=qa.pk, case_id="sum-2", input="2+2", expected=None)
    assert response.status_code == 201
    case = body(response)
    assert (case["case_id"], case["input"], case["expected"], case["has_expected"]) == ("sum-2", "2+2", None, False)


@pytest.mark.parametrize(
    ("payload", "status", "field"),
    [
        ({"case_id": "c1"}, 400, "case_id"),
        ({"session_id": 999999}, 404, "session_id"),
        ({"set_id": 999999}, 404, "set_id"),
        ({"split": "holdout"}, 422, "split"),
        ({"tags": "not-a-list"}, 422, "tags"),
        ({"expected": {"answer": "4"}}, 400, "expected"),  # the set's cases expect strings
    ],
)
def test_bad_captures_name_the_field(payload, status, field, qa, member, session):
    response = capture(member, **{"session_id": session.pk, "set_id": qa.pk, **payload})
    assert response.status_code == status, response.content
    assert body(response)["field"] == field
