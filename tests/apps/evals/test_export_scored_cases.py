"""A run's export carries the cases as that run was scored against them (its set version), not
the set as it is today; re-importing the export recreates exactly those cases (issue 23, bh-45)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.evals.exports.downloads import compare_download, queue_download, run_download
from apps.evals.models import CaseSnapshot, EvalResult, EvalRun, EvalSet
from apps.evals.sets.versions import current_version
from evalcore.jsonvalue import MISSING
from evalcore.types import expected_hash
from tests.apps.evals.test_export_cli import run_cli
from tests.apps.factories import make_eval_run

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"

ECHO = """
from evalcore.discovery import TargetSpec

def echo(text):
    return text

echo_target = TargetSpec(id="echo", target=echo, scorers=["exact_match"])
"""


def test_an_old_runs_export_keeps_the_cases_it_was_scored_against_and_reimports_them(tmp_path):
    """bh-45 as a user runs it: run A, then c2 removed from the set, then A exported and imported."""
    db = tmp_path / "t45.sqlite3"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "echo.py").write_text(ECHO)
    for name in ("bh-45-cases-v1.jsonl", "bh-45-cases-v2.jsonl"):
        shutil.copy(REPROS / name, tmp_path / name)
    assert run_cli("import", str(tmp_path / "bh-45-cases-v1.jsonl"), "--name", "bh-45", db=db).returncode == 0
    ran = run_cli("eval", str(agents), "--set", "bh-45", "--target", "echo", "--quiet", db=db)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_a = re.search(r"eval run ([0-9a-f]{16})", ran.stdout).group(1)
    moved = run_cli("import", str(tmp_path / "bh-45-cases-v2.jsonl"), "--name", "bh-45", db=db)
    assert "1 removed" in moved.stdout, moved.stdout + moved.stderr

    exported = tmp_path / "a.jsonl"
    assert run_cli("export", run_a, "-o", str(exported), db=db).returncode == 0
    rows = {row["id"]: row for row in map(json.loads, exported.read_text().splitlines())}
    assert (rows["c2"]["input"], rows["c2"]["expected"], rows["c2"]["split"]) == ("two", "two", "dev")
    assert rows["c2"]["evalsite"]["expected"] == "two" and rows["c2"]["evalsite"]["status"] == "passed"

    again = run_cli("import", str(exported), "--name", "bh-45-reimport", db=db)
    assert again.returncode == 0 and "3 new" in again.stdout, again.stdout + again.stderr
    back = tmp_path / "back.jsonl"
    assert run_cli("export", "--set", "bh-45-reimport", "-o", str(back), db=db).returncode == 0
    assert [json.loads(line) for line in back.read_text().splitlines()] == [
        {"id": c, "input": c_in, "expected": c_in, "tags": [], "split": "dev", "metadata": {}}
        for c, c_in in (("c1", "one"), ("c2", "two"), ("c3", "three"))
    ]
    csv_path = tmp_path / "a.csv"  # CSV: the same cases, and the scored-against expected in its column
    assert run_cli("export", run_a, "-o", str(csv_path), db=db).returncode == 0
    lines = csv_path.read_text().splitlines()
    header = lines[0].split(",")
    c2 = next(line.split(",") for line in lines[1:] if line.startswith("c2,"))
    assert (c2[header.index("input")], c2[header.index("evalsite.expected")]) == ("two", "two")


def _scored_run(eval_set: EvalSet, case_ids: list[str], outcomes: list[bool]) -> EvalRun:
    """A run of the set's current version whose results record the expected values they were scored against."""
    run = make_eval_run(eval_set, outcomes, case_ids=case_ids)
    EvalRun.objects.filter(pk=run.pk).update(set_version=current_version(eval_set))
    for result in EvalResult.objects.filter(eval_run=run):
        case = eval_set.cases.get(case_id=result.case_id)
        expected = case.expected if case.has_expected else MISSING
        result.expected = None if expected is MISSING else expected
        result.expected_hash = expected_hash(expected)
        result.save(update_fields=["expected", "expected_hash"])
    return EvalRun.objects.get(pk=run.pk)


def _jsonl(download) -> list[dict]:
    return [json.loads(line) for line in b"".join(download.chunks).decode().splitlines()]


@pytest.mark.django_db
def test_every_export_of_results_writes_each_case_as_its_run_saw_it(tmp_path):
    """bh-30's edited expected value: run A scored against Paris, run B against Lyon; the run, the
    comparison and the review queue exports each write the case as the row's run saw it."""
    call_command("import", str(REPROS / "bh-30-capitals.jsonl"), "--name", "capitals")
    eval_set = EvalSet.objects.get(name="capitals")
    run_a = _scored_run(eval_set, ["v1"], [True])
    call_command("import", str(REPROS / "bh-30-capitals-edited.jsonl"), "--name", "capitals")
    run_b = _scored_run(eval_set, ["v1"], [False])
    assert CaseSnapshot.objects.filter(eval_set=eval_set).count() == 2  # one per content, kept once

    (row,) = _jsonl(run_download(run_a, "jsonl"))
    assert (row["expected"], row["evalsite"]["expected"]) == ("Paris", "Paris")
    (row,) = _jsonl(run_download(run_b, "jsonl"))
    assert (row["expected"], row["evalsite"]["expected"]) == ("Lyon", "Lyon")
    (row,) = _jsonl(compare_download(run_a, run_b, "jsonl"))
    assert row["expected"] == "Paris"  # as A (the baseline) saw it; each side says what it was scored against
    assert (row["evalsite"]["a"]["expected"], row["evalsite"]["b"]["expected"]) == ("Paris", "Lyon")
    assert row["evalsite"]["kind"] == "regression"
    (row,) = _jsonl(queue_download(run_a, "jsonl"))
    assert row["expected"] == "Paris"


@pytest.mark.django_db
def test_a_result_stored_before_expected_values_were_recorded_has_no_scored_expected():
    """Older rows: no ``evalsite.expected`` (rather than today's value dressed up as the scored one)."""
    call_command("import", str(REPROS / "bh-30-capitals.jsonl"), "--name", "old")
    eval_set = EvalSet.objects.get(name="old")
    run = make_eval_run(eval_set, [True], case_ids=["v1"])  # no set version, no recorded expected
    (row,) = _jsonl(run_download(run, "jsonl"))
    assert row["expected"] == "Paris" and "expected" not in row["evalsite"]


@pytest.mark.django_db
def test_a_run_of_a_version_without_snapshots_writes_what_its_results_recorded():
    """A version recorded before snapshots were kept: today's case, but with the expected value the
    result was scored against, and a case gone since keeps the result's split."""
    call_command("import", str(REPROS / "bh-30-capitals.jsonl"), "--name", "legacy")
    eval_set = EvalSet.objects.get(name="legacy")
    run = _scored_run(eval_set, ["v1"], [True])
    EvalResult.objects.filter(eval_run=run).update(split="dev")
    gone = make_eval_run(eval_set, [True], case_ids=["removed"])
    EvalResult.objects.filter(eval_run=gone).update(split="dev", expected="x", expected_hash=expected_hash("x"))
    CaseSnapshot.objects.filter(eval_set=eval_set).delete()
    call_command("import", str(REPROS / "bh-30-capitals-edited.jsonl"), "--name", "legacy")
    CaseSnapshot.objects.filter(eval_set=eval_set).delete()
    (row,) = _jsonl(run_download(run, "jsonl"))
    assert (row["input"], row["expected"], row["evalsite"]["expected"]) == ("Paris", "Paris", "Paris")
    (row,) = _jsonl(run_download(gone, "jsonl"))
    assert (row["id"], row["input"], row["expected"], row["split"]) == ("removed", None, "x", "dev")
