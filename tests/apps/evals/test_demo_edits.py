"""`make demo` after people used the portal (issue 23): a case captured from the playground or
edited in the admin never makes the demo run the set again (over `all`: the held-out test split,
a lockbox warning), and the demo's refresh of the example sets never overwrites an edited case;
it says what it left, in one line."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from apps.evals.models import EvalCase
from apps.evals.sets.cases import edited_since_import, import_cases, refresh_set_hashes
from evalcore.types import Case
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
GSM8K = "examples/sets/gsm8k_test.jsonl"

# What the portal does, in the demo's database: a playground capture, then an admin edit of an
# example case (apps.evals.admin.sets's save_model: the row saved, then the set's hash and version).
PEOPLE_USED_THE_PORTAL = """
from apps.evals.models import EvalCase, EvalSet
from apps.evals.sets.cases import refresh_set_hashes
s = EvalSet.objects.get(name="gsm8k_test")
EvalCase.objects.create(eval_set=s, case_id="captured-1", input="What is 2 + 2?", expected="4", split="dev",
                        metadata={"source": "playground"}, position=10_000)
refresh_set_hashes([s.pk], source="captured from the playground")
EvalCase.objects.filter(eval_set=s, case_id="gsm8k-test-0001").update(expected="eighteen")
refresh_set_hashes([s.pk], source="admin: case gsm8k-test-0001 edited")
"""


def evalsite(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "evalsite.cli", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="reads the SQLite file directly")
def test_make_demo_after_a_capture_and_an_admin_edit_reruns_nothing_and_keeps_the_edit(tmp_path):
    db = tmp_path / "demo.sqlite3"
    assert evalsite("import", "--keep-edited", GSM8K, db=db).returncode == 0
    first = evalsite("demo", "--only", "GSM8K", db=db)
    assert first.returncode == 0, first.stdout + first.stderr
    used = evalsite("shell", "--no-imports", "-c", PEOPLE_USED_THE_PORTAL, db=db)
    assert used.returncode == 0, used.stdout + used.stderr

    # make demo's steps again: the refresh of the example set, then the evals
    refresh = evalsite("import", "--keep-edited", GSM8K, db=db)
    assert refresh.returncode == 0, refresh.stdout + refresh.stderr
    kept = [line for line in refresh.stdout.splitlines() if "edited since the last import" in line]
    assert len(kept) == 1 and "kept 1 case(s)" in kept[0] and "gsm8k-test-0001" in kept[0], refresh.stdout
    second = evalsite("demo", "--only", "GSM8K", db=db)
    assert second.returncode == 0, second.stdout + second.stderr
    out = second.stdout + second.stderr
    assert second.stdout.count("the set changed since") == 2, second.stdout
    assert "lockbox" not in out and "first run" not in out and "before this one" not in out

    with sqlite3.connect(db) as conn:
        runs = conn.execute("select variant, split from evals_evalrun order by variant").fetchall()
        expected = conn.execute(
            "select c.expected from evals_evalcase c join evals_evalset s on s.id = c.eval_set_id "
            "where s.name = 'gsm8k_test' and c.case_id in ('gsm8k-test-0001', 'captured-1') order by c.case_id"
        ).fetchall()
    assert runs == [("175b_verification", "dev"), ("6b_finetuning", "dev")]  # no run added
    assert [row[0] for row in expected] == ['"4"', '"eighteen"']  # the capture and the edit both stand


FILE = [Case(id=f"c{i}", input={"question": f"what is {i} + {i}?"}, expected=str(2 * i)) for i in range(4)]


@pytest.mark.django_db
def test_keep_edited_leaves_edited_cases_and_refreshes_the_others():
    import_cases(name="bank", cases=FILE, content_hash="v1", source_path="bank.jsonl")
    EvalCase.objects.filter(case_id="c1").update(expected="two")
    EvalCase.objects.filter(case_id="c3").update(tags=["checked"])
    eval_set = EvalCase.objects.get(case_id="c1").eval_set
    refresh_set_hashes([eval_set.pk], source="admin: case c1 edited")
    assert edited_since_import(eval_set) == {"c1", "c3"}

    # the file changed c2 and dropped c3 since
    newer = [*FILE[:2], Case(id="c2", input=FILE[2].input, expected="five"), Case(id="c4", input="x", expected="y")]
    summary = import_cases(name="bank", cases=newer, content_hash="v2", source_path="bank.jsonl", keep_edited=True)
    assert summary.kept_edited == ["c1", "c3"] and summary.removed == 0 and summary.created == 1
    stored = {c.case_id: c for c in EvalCase.objects.filter(eval_set=eval_set)}
    assert stored["c1"].expected == "two" and stored["c3"].tags == ["checked"]  # the edits stand
    assert stored["c2"].expected == "five" and "c4" in stored  # the file's own changes arrive
    eval_set.refresh_from_db()
    assert eval_set.content_hash != "v2"  # the set is the file plus the kept edits

    # without keep_edited the file wins, as `evalsite import` always did
    again = import_cases(name="bank", cases=newer, content_hash="v2", source_path="bank.jsonl")
    assert again.kept_edited == [] and again.removed == 1
    assert EvalCase.objects.get(eval_set=eval_set, case_id="c1").expected == "2"


@pytest.mark.django_db
def test_a_set_never_imported_has_no_edits_to_keep():
    from tests.apps.factories import make_eval_set

    assert edited_since_import(make_eval_set("authored", 3)) == set()
