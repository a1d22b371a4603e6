"""Repros ho-11 (auto ids follow the input), ho-06 (rescore rebuilds an agents-folder predicate)
and ho-07 (``evalsite targets`` lists function scorers), with their data in tests/fixtures/repros."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalCase
from apps.evals.sets.cases import import_cases
from evalcore.loaders import auto_case_id, load_cases
from evalcore.loaders._records import legacy_auto_case_id
from evalcore.types import Case
from tests.support.databases import subprocess_db_env

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"
EVALSITE = Path(sys.executable).with_name("evalsite")
HO11 = REPROS / "ho-11-auto-id-split-move"


def splits() -> dict[str, str]:
    return dict(EvalCase.objects.values_list("case_id", "split"))


# --- ho-11 ------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_ho11_a_corrected_label_updates_the_case_and_keeps_its_split(capsys):
    args = ["--name", "quiz", "--map", "expected=target", "--auto-id"]
    call_command("import", str(HO11 / "v1.jsonl"), *args)
    before = splits()
    capsys.readouterr()
    call_command("import", str(HO11 / "v2.jsonl"), *args)
    out = capsys.readouterr().out
    assert "set 'quiz': 0 new, 1 updated, 3 unchanged, 0 removed" in out
    assert splits() == before  # same ids, same splits
    question = [{"role": "user", "content": "Which metal is liquid at room temperature?"}]
    corrected = EvalCase.objects.get(case_id=auto_case_id(question))
    assert corrected.expected == "Mercury (Hg)" and corrected.split == before[corrected.case_id]


@pytest.mark.django_db(transaction=True)
def test_ho11_a_set_imported_with_the_first_auto_id_scheme_keeps_its_ids():
    """Ids over input + expected (the first scheme) stay: a re-import of the same file changes
    nothing, and a corrected label updates the stored case in place (same id, split, results)."""
    v1 = load_cases(HO11 / "v1.jsonl", mapping={"expected": "target"}, auto_id=True, set_name="quiz")
    legacy = [Case(legacy_auto_case_id(c.input, c.expected), c.input, c.expected, split=c.split) for c in v1.cases]
    import_cases(name="quiz", cases=legacy)
    EvalCase.objects.filter(case_id=legacy[0].id).update(split="test")  # curated in the admin
    before = splits()
    assert set(before) == {c.id for c in legacy}

    same = import_cases(
        name="quiz",
        cases=v1.cases,
        content_hash=v1.content_hash,
        hashed_splits=v1.hashed_splits,
        legacy_auto_ids=v1.legacy_auto_ids,
    )
    assert (same.created, same.updated, same.removed, same.unchanged) == (0, 0, 0, 4)
    assert splits() == before

    v2 = load_cases(HO11 / "v2.jsonl", mapping={"expected": "target"}, auto_id=True, set_name="quiz")
    edited = import_cases(
        name="quiz", cases=v2.cases, hashed_splits=v2.hashed_splits, legacy_auto_ids=v2.legacy_auto_ids
    )
    assert (edited.created, edited.updated, edited.removed, edited.unchanged) == (0, 1, 0, 3)
    assert splits() == before
    assert EvalCase.objects.get(case_id=legacy[3].id).expected == "Mercury (Hg)"


# --- ho-06 / ho-07 ----------------------------------------------------------------------------


def run_cli(*args: str, db: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    return subprocess.run([str(EVALSITE), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def runs(db: Path, cwd: Path) -> list[tuple[str, dict[str, list[tuple[str, object, object]]]]]:
    """Every eval run in the subprocesses' database, oldest first: ``(id, {case id: scores})``."""
    code = (
        "import json; from apps.evals.models import EvalRun; "
        "print('runs', json.dumps([(r.id, {x.case_id: [(s['name'], s['value'], s.get('passed')) for s in x.scores] "
        "for x in r.results.all()}) for r in EvalRun.objects.order_by('started')]))"
    )
    out = run_cli("shell", "-c", code, db=db, cwd=cwd).stdout
    return [
        (i, {k: [tuple(s) for s in v] for k, v in scores.items()}) for i, scores in json.loads(out.split("runs", 1)[1])
    ]


def test_ho06_rescore_rebuilds_an_agents_folder_predicate_in_a_new_process(tmp_path):
    agents = tmp_path / "ho-06"
    shutil.copytree(REPROS / "ho-06-rescore-agents-predicate", agents)
    # one case the predicate fails, so the scores say something
    cases = agents / "cases.jsonl"
    cases.write_text(
        cases.read_text() + json.dumps({"id": "lib-002", "input": "odd one", "expected": 42, "split": "dev"}) + "\n"
    )
    db = tmp_path / "r.sqlite3"
    first = run_cli("eval", str(agents), "--set", str(cases), db=db, cwd=tmp_path)
    ((source, original),) = runs(db, tmp_path)
    assert original["lib-000"][0][0] == "same_rows" and original["lib-000"][0][2] is True, first.stdout
    assert len(original) == 3 and original["lib-002"] != original["lib-000"]

    again = run_cli("rescore", source, db=db, cwd=tmp_path)
    assert again.returncode in (0, 1), again.stdout + again.stderr  # never 2: the scorer is rebuilt

    # the folder moved: the recorded one is gone, --agents-dir names the new place
    moved = tmp_path / "moved"
    agents.rename(moved)
    gone = run_cli("rescore", source, db=db, cwd=tmp_path)
    assert gone.returncode == 2
    assert f"agents folder {agents}, which is not there any more; pass --agents-dir" in gone.stderr
    elsewhere = run_cli("rescore", source, "--agents-dir", str(moved), db=db, cwd=tmp_path)
    assert elsewhere.returncode in (0, 1), elsewhere.stdout + elsewhere.stderr
    _, (_, rescored), (_, moved_rescored) = runs(db, tmp_path)
    assert rescored == original and moved_rescored == original  # the same scores as the original run

    # the function was removed from the module: a usage error naming it, no traceback
    (moved / "targets.py").write_text((moved / "targets.py").read_text().replace("def same_rows", "def renamed"))
    removed = run_cli("rescore", source, "--agents-dir", str(moved), db=db, cwd=tmp_path)
    assert removed.returncode == 2 and "same_rows" in removed.stderr and "Traceback" not in removed.stderr


@pytest.mark.django_db(transaction=True)
def test_ho07_targets_lists_a_target_whose_scorers_include_a_function(tmp_path, capsys):
    folder = tmp_path / "agents"
    shutil.copytree(REPROS / "ho-07-targets-fn-scorer-crash", folder)
    (folder / "more.py").write_text(
        "from evalcore.discovery import TargetSpec\n"
        "from evalcore.scorers.builtin import ExactMatch\n"
        "async def judged(output, expected):\n    return True\n"
        "mixed = TargetSpec(id='mixed', target=lambda x: x, scorers=['exact_match', "
        "{'name': 'contains', 'args': {'substring': 'x'}}, ExactMatch(), judged])\n"
    )
    call_command("targets", str(folder))
    out = capsys.readouterr().out
    assert "sql-oracle" in out and "same_rows (function)" in out
    assert "exact_match, contains, exact_match, judged (function)" in out


@pytest.mark.django_db(transaction=True)
def test_targets_on_a_missing_folder_is_a_usage_error(tmp_path):
    with pytest.raises(CommandError, match="agents folder not found"):
        call_command("targets", str(tmp_path / "nope"))
