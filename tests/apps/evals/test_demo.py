"""`make demo` twice (issue 11): the second demo reuses the first's runs (no duplicates, no
lockbox warning), and re-importing an example set keeps the cases captured in the portal."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from apps.agents.models import Session
from apps.evals.models import EvalCase
from apps.evals.sets.capture import capture_session_as_case
from apps.evals.sets.cases import import_cases
from evalcore.types import Case
from tests.apps.factories import make_eval_set
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]


def evalsite(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, "-m", "evalsite.cli", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="counts runs in the SQLite file directly")
def test_demo_twice_leaves_the_runs_of_one_demo_and_no_lockbox_warning(tmp_path):
    db = tmp_path / "demo.sqlite3"
    assert evalsite("import", "examples/sets/gsm8k_test.jsonl", db=db).returncode == 0
    first = evalsite("demo", "--only", "GSM8K", db=db)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "lockbox" not in first.stdout + first.stderr  # a demo never opens the held-out test split

    again = evalsite("import", "examples/sets/gsm8k_test.jsonl", db=db)
    assert "0 removed" in again.stdout
    second = evalsite("demo", "--only", "GSM8K", db=db)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("already done") == 2
    assert "lockbox" not in second.stdout + second.stderr and "before this one" not in second.stdout
    with sqlite3.connect(db) as conn:
        runs = conn.execute("select target_id, variant, split, status from evals_evalrun order by variant").fetchall()
    assert runs == [
        ("gsm8k-replay", "175b_verification", "dev", "finished"),
        ("gsm8k-replay", "6b_finetuning", "dev", "finished"),
    ]


@pytest.mark.django_db
def test_reimport_keeps_cases_captured_in_the_portal_unless_asked(member):
    eval_set = make_eval_set("bank", 3)
    file_cases = [Case(id=f"c{i}", input={"question": f"what is {i} + {i}?"}, expected=str(2 * i)) for i in range(3)]
    session = Session.objects.create(user=member, target_id="echo", input_mode="json")
    capture_session_as_case(
        session=session,
        eval_set=eval_set,
        split="dev",
        tags=[],
        case_id="captured",
        input={"question": "q"},
        expected="a",
        user=member,
    )
    summary = import_cases(name="bank", cases=file_cases, content_hash="file")
    assert (summary.removed, summary.kept_captured) == (0, 1)
    kept = EvalCase.objects.get(eval_set=eval_set, case_id="captured")
    assert kept.position == 3  # after the file's cases
    eval_set.refresh_from_db()
    assert eval_set.content_hash != "file"  # the set is the file plus the captured case

    pruned = import_cases(name="bank", cases=file_cases, content_hash="file", prune_captured=True)
    assert (pruned.removed, pruned.kept_captured) == (1, 0)
    assert not EvalCase.objects.filter(case_id="captured").exists()
