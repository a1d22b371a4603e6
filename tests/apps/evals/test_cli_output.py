"""`evalsite eval` output to a file (not a terminal), as `make demo > log` shows it: no line per
progress refresh, and no duplicate split row for a run on one split (tester report, defect 5)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")

AGENT = """
from evalcore.discovery import TargetSpec

def upper(text):
    return text.upper()

shout = TargetSpec(id="shout", target=upper, scorers=["exact_match"])
"""


def _eval(tmp_path: Path, rows: list[dict], *args: str) -> str:
    (tmp_path / "agents").mkdir(exist_ok=True)
    (tmp_path / "agents" / "shout.py").write_text(AGENT)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = tmp_path / "out.log"
    env = {**os.environ, **subprocess_db_env(tmp_path / "db.sqlite3"), "COLUMNS": "200"}
    with log.open("w") as out:  # a file: not a tty
        code = subprocess.call(
            [str(EVALSITE), "eval", str(tmp_path / "agents"), "--set", str(cases), "--target", "shout", *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=180,
        )
    text = log.read_text()
    assert code == 0, text
    return text


def _table_rows(text: str) -> list[str]:
    """The first cell of each row of the aggregate table (rich's box drawing)."""
    return [m.group(1) for m in re.finditer(r"^[│┃|]\s*(\w+)\s*[│┃|]\s*\d+", text, re.MULTILINE)]


def test_progress_to_a_file_is_a_start_line_and_the_final_count(tmp_path):
    rows = [{"id": f"c{i}", "input": f"w{i}", "expected": f"W{i}", "split": "dev"} for i in range(60)]
    text = _eval(tmp_path, rows)
    counts = re.findall(r"^\s+\d+/60 cases$", text, re.MULTILINE)
    starts = re.findall(r"^\s+running 60 case", text, re.MULTILINE)
    assert len(counts) == 1 and len(starts) <= 1, text
    assert "60/60 cases" in text


def test_a_run_on_one_split_has_no_duplicate_split_row(tmp_path):
    rows = [{"id": f"c{i}", "input": f"w{i}", "expected": f"W{i}", "split": "dev"} for i in range(4)]
    assert _table_rows(_eval(tmp_path, rows)) == ["all"]


def test_a_run_on_several_splits_shows_a_row_per_split(tmp_path):
    rows = [{"id": f"c{i}", "input": f"w{i}", "expected": f"W{i}", "split": s} for i, s in enumerate(["dev", "test"])]
    assert _table_rows(_eval(tmp_path, rows, "--split", "all", "--allow-test")) == ["all", "dev", "test"]


def test_the_progress_tally_names_errored_and_unscored_only_once_they_occur() -> None:
    from apps.evals.management.commands.eval import progress_tally

    quiet = progress_tally({"passed": 14, "failed": 10, "errored": 0, "unscored": 0})
    assert quiet == "[green]14 passed[/] [red]10 failed[/]"
    loud = progress_tally({"passed": 0, "failed": 0, "errored": 2, "unscored": 1})
    assert loud == "[green]0 passed[/] [red]0 failed[/] [yellow]2 errored[/] [magenta]1 unscored[/]"
