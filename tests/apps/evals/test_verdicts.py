"""A verdict is never invented, end to end: the CLI's table, warnings and gates, what the store
keeps (status, reason, the expected value scored against), the API and the run and case pages.
Repros ho-01, bh-23 and bh-30 with their data in tests/fixtures/repros."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.urls import reverse

from apps.evals.models import EvalResult, EvalRun
from tests.apps.factories import make_eval_run, make_eval_set
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
REPROS = ROOT / "tests" / "fixtures" / "repros"
HO01 = REPROS / "ho-01-no-verdict-counts-as-pass"
EVALSITE = Path(sys.executable).with_name("evalsite")


def client_for_api(user):
    from django.test import Client

    api = Client()
    api.force_login(user)
    return api


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    return subprocess.run([str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("target_id", ["float-predicate", "no-scorer"])
def test_ho01_cli_shows_unscored_warns_and_the_pass_rate_gate_fails(tmp_path, target_id):
    out = run_cli(
        "eval",
        str(HO01),
        "--set",
        str(HO01 / "cases.jsonl"),
        "--target",
        target_id,
        "--gate",
        "pass_rate>=0.5",
        db=tmp_path / "ho01.sqlite3",
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "unscored" in out.stdout
    assert "warning: 2 of 2 case(s) unscored" in out.stdout
    assert "gate pass_rate>=0.5: FAIL (actual 0)" in out.stdout


@pytest.mark.django_db(transaction=True)
def test_ho01_store_api_and_pages_show_unscored(client, viewer, capsys):
    call_command("eval", str(HO01), "--set", str(HO01 / "cases.jsonl"), "--target", "float-predicate", "--quiet")
    eval_run = EvalRun.objects.get()
    assert (eval_run.n_done, eval_run.n_passed, eval_run.n_unscored) == (2, 0, 2)
    assert eval_run.pass_rate == 0.0
    assert eval_run.summary["unscored"] == 2 and eval_run.summary["passed"] == 0
    rows = list(EvalResult.objects.filter(eval_run=eval_run))
    assert {(r.status, r.reason, r.passed) for r in rows} == {("unscored", "no_verdict", False)}

    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[eval_run.pk])).content.decode()
    assert '<option value="unscored">unscored</option>' in page
    assert "2 cases unscored" in page
    assert 'class="pill pill-grey">unscored</span>' in page
    only = client.get(reverse("evals:eval_run", args=[eval_run.pk]), {"status": "unscored"}).content.decode()
    assert "code/clamp" in only and "code/double" in only
    case_page = client.get(reverse("evals:result", args=[eval_run.pk, rows[0].pk])).content.decode()
    assert 'data-reason="no_verdict"' in case_page and "a 0..1 score needs a threshold" in case_page

    api = client.get(f"/api/eval/runs/{eval_run.pk}", {"status": "unscored"}).json()
    assert api["run"]["n_unscored"] == 2
    assert {(r["status"], r["reason"]) for r in api["results"]["items"]} == {("unscored", "no_verdict")}


@pytest.mark.django_db(transaction=True)
def test_bh23_plain_function_score_error_and_gate_go_by_its_name(tmp_path, capsys):
    report = tmp_path / "bh23.json"
    call_command(
        "eval",
        str(REPROS / "agents"),
        "--set",
        str(REPROS / "bh-23-predicate-errors.jsonl"),
        "--target",
        "claims",
        "--gate",
        "score:claims_ratio>=0.5",
        "--json",
        str(report),
        "--quiet",
    )
    out = capsys.readouterr().out
    assert "claims_ratio" in out and "0.500 (too few cases) (n=1/2)" in out
    assert "┃ predicate" not in out  # the error is counted against claims_ratio, not a second metric
    assert "gate score:claims_ratio>=0.5: PASS (actual 0.5, on n=1/2 cases: 1 not covered)" in out
    data = json.loads(report.read_text())
    metric = data["report"]["metrics"]["claims_ratio"]
    assert list(data["report"]["metrics"]) == ["claims_ratio"]
    assert (metric["mean"], metric["n"], metric["cases"], metric["errors"]) == (0.5, 1, 2, 1)
    assert {c["case_id"]: c["status"] for c in data["cases"]} == {"n1": "errored", "n2": "unscored"}
    assert {c["case_id"]: c["expected"] for c in data["cases"]} == {"n1": "x", "n2": "A"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("gate", "name"), [("coverage:claim_ratio>=1", "claim_ratio"), ("score:predicate>=0.5", "predicate")]
)
def test_a_gate_on_a_score_nobody_sees_is_refused_before_running(gate, name):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=f"no scorer of this run emits '{name}' \\(scores: claims_ratio\\)"):
        call_command(
            "eval",
            str(REPROS / "agents"),
            "--set",
            str(REPROS / "bh-23-predicate-errors.jsonl"),
            "--target",
            "claims",
            "--gate",
            gate,
            "--quiet",
        )
    assert not EvalRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_run_page_shows_coverage_including_target_errors(client, viewer):
    eval_set = make_eval_set("cov", 0)
    summary = {
        "n": 3,
        "metrics": {"exact_match": {"n": 2, "total": 2, "errors": 0, "cases": 3, "mean": 0.5, "labels": {}}},
    }
    eval_run = make_eval_run(eval_set, ["passed", "failed", "errored"], summary=summary)
    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[eval_run.pk])).content.decode()
    assert "n=2/3</span>" in page  # the errored target's case counts in N


@pytest.mark.django_db(transaction=True)
def test_bh30_case_page_shows_the_expected_value_the_run_was_scored_against(client, viewer, capsys):
    agents = str(REPROS / "agents")
    call_command("eval", agents, "--set", str(REPROS / "bh-30-capitals.jsonl"), "--target", "echo", "--quiet")
    call_command("import", str(REPROS / "bh-30-capitals-edited.jsonl"), "--name", "bh-30-capitals")
    eval_run = EvalRun.objects.get()
    result = EvalResult.objects.get(eval_run=eval_run)
    assert (result.status, result.expected) == ("passed", "Paris")
    assert eval_run.eval_set.cases.get().expected == "Lyon"
    (item,) = client_for_api(viewer).get(f"/api/eval/runs/{eval_run.pk}").json()["results"]["items"]
    assert item["expected"] == "Paris" and len(item["expected_hash"]) == 64

    client.force_login(viewer)
    page = client.get(reverse("evals:result", args=[eval_run.pk, result.pk])).content.decode()
    diff = page[page.index("<h2>Expected vs actual</h2>") : page.index("<h2>Scores</h2>")]
    assert 'id="expected-changed"' in diff
    assert "today the case expects <code>Lyon</code>" in diff
    assert '<p class="pill pill-green">identical</p>' in diff  # scored against Paris, answered Paris
    expected_column = diff[diff.index("<h3>expected</h3>") : diff.index("<h3>actual</h3>")]
    assert "Paris" in expected_column and "Lyon" not in expected_column

    # a rescore records what it scored against too (today's set)
    call_command("rescore", eval_run.pk)
    rescored = EvalResult.objects.exclude(eval_run=eval_run).get()
    assert (rescored.expected, rescored.status) == ("Lyon", "failed")
    page = client.get(reverse("evals:result", args=[rescored.eval_run_id, rescored.pk])).content.decode()
    assert 'id="expected-changed"' not in page


@pytest.mark.django_db(transaction=True)
def test_migration_restates_results_stored_under_the_old_rule():
    """Results stored as passed though nothing judged them become unscored; counters follow."""
    from importlib import import_module

    restate = import_module("apps.evals.migrations.0004_evalresult_unscored").restate_results
    eval_set = make_eval_set("old", 0)
    summary = {"n": 2, "passed": 2, "unscored": 0, "pass_rate": 1.0, "splits": {}}
    eval_run = make_eval_run(eval_set, ["passed", "passed"], scores=[0.5, None], summary=summary)
    # as the old rule stored it: a measurement-only case counted as passed
    EvalResult.objects.filter(eval_run=eval_run, case_id="c0").update(scores=[{"name": "sim", "value": 0.5}])
    restate(django_apps, None)
    eval_run.refresh_from_db()
    assert (eval_run.n_passed, eval_run.n_unscored) == (1, 1)
    assert (eval_run.summary["passed"], eval_run.summary["unscored"], eval_run.summary["pass_rate"]) == (1, 1, 0.5)
    row = EvalResult.objects.get(eval_run=eval_run, case_id="c0")
    assert (row.status, row.passed, row.reason) == ("unscored", False, "no_verdict")


@pytest.mark.django_db(transaction=True)
def test_case_page_says_whether_a_scorer_error_left_the_outcome_open(client, viewer):
    """Results stored without a reason get it derived from their scores and the run's error."""
    eval_set = make_eval_set("judged", 0)
    eval_run = make_eval_run(eval_set, ["failed", "passed"])
    judge_error = {"name": "rubric_judge", "value": None, "passed": None, "error": "JudgeError: prose", "metadata": {}}
    for row in EvalResult.objects.filter(eval_run=eval_run):
        row.scores = [*row.scores, judge_error]
        row.status = "failed" if row.case_id == "c0" else "errored"
        row.save()
    client.force_login(viewer)
    pages = {
        row.case_id: client.get(reverse("evals:result", args=[eval_run.pk, row.pk])).content.decode()
        for row in EvalResult.objects.filter(eval_run=eval_run)
    }
    assert "failed (another scorer errored, outcome already known)" in pages["c0"]
    assert "errored: a scorer failed and its missing verdict could change the outcome" in pages["c1"]
