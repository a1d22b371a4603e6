"""`evalsite export` as a user runs it (the console script, its own database): a run exported,
imported back with `evalsite import`, gives the same cases; errors are usage errors."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from evalcore.loaders import load_cases
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")

AGENT = """
from evalcore.discovery import TargetSpec

def upper(text):
    return text.upper() if isinstance(text, str) else text

shout = TargetSpec(id="shout", target=upper, scorers=["exact_match"])
"""


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    return subprocess.run([str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=180)


def test_a_run_exported_by_the_cli_imports_back_to_the_same_cases(tmp_path):
    db = tmp_path / "cli.sqlite3"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "shout.py").write_text(AGENT)
    rows = [
        {"id": "a", "input": "hi", "expected": "HI", "tags": ["greeting"], "split": "dev", "metadata": {"lang": "en"}},
        {"id": "b", "input": "ça va", "expected": "wrong", "tags": [], "split": "dev", "metadata": {}},
        {"id": "c", "input": {"n": 1}, "expected": None, "split": "train", "metadata": {"scorers_note": "none"}},
        {"id": "d", "input": "no label", "tags": ["open"], "split": "dev"},
    ]
    bank = tmp_path / "qa.jsonl"
    bank.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    ran = run_cli("eval", str(agents), "--set", str(bank), "--split", "all", "--allow-test", "--repeat", "2", db=db)
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    run_id = re.search(r"eval run ([0-9a-f]{16})", ran.stdout).group(1)

    out = tmp_path / "run.jsonl"
    exported = run_cli("export", run_id, "-o", str(out), db=db)
    assert exported.returncode == 0, exported.stderr
    assert f"wrote {out}" in exported.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 8 and {line["evalsite"]["repeat"] for line in lines} == {0, 1}
    by_id = {line["id"]: line["evalsite"] for line in lines if line["evalsite"]["repeat"] == 0}
    assert by_id["a"]["status"] == "passed" and by_id["a"]["output"] == "HI"
    assert by_id["b"]["status"] == "failed" and by_id["b"]["values"] == {"exact_match": False}

    imported = run_cli("import", str(out), "--name", "again", db=db)
    assert imported.returncode == 0, imported.stderr
    assert "4 new" in imported.stdout
    again = tmp_path / "again.jsonl"
    assert run_cli("export", "--set", "again", "-o", str(again), db=db).returncode == 0
    original = tmp_path / "original.jsonl"
    assert run_cli("export", "--set", "qa", "-o", str(original), db=db).returncode == 0
    assert again.read_text() == original.read_text()
    assert [c.id for c in load_cases(again).cases] == ["a", "b", "c", "d"]

    parquet = tmp_path / "run.parquet"  # the format from the suffix; to standard output without -o
    assert run_cli("export", run_id, "-o", str(parquet), db=db).returncode == 0
    assert pq.read_table(parquet).num_rows == 8
    csv_out = run_cli("export", run_id, "--format", "csv", "--compare", run_id, db=db)
    assert csv_out.returncode == 2 and "two different runs" in csv_out.stderr
    queue = run_cli("export", run_id, "--review-queue", "--format", "csv", db=db)
    assert queue.returncode == 0 and queue.stdout.splitlines()[0].startswith("id,input,expected,tags,split,metadata,")

    missing = run_cli("export", "nope", db=db)
    assert missing.returncode == 2 and "no eval run 'nope'" in missing.stderr
    adk = run_cli("export", run_id, "--format", "adk", db=db)
    assert adk.returncode == 2 and "--set" in adk.stderr

    dash = run_cli("export", run_id, "-o", "-", db=db)  # `-o -` is standard output, not a file named "-"
    assert dash.returncode == 0 and len(dash.stdout.splitlines()) == 8, dash.stderr
    assert not (ROOT / "-").exists()

    # a suffix naming no format, or another format than --format, is refused: nothing written
    xlsx = run_cli("export", run_id, "-o", str(tmp_path / "run.xlsx"), db=db)
    assert xlsx.returncode == 2 and "cannot tell the format from '.xlsx'" in xlsx.stderr
    clash = run_cli("export", run_id, "--format", "csv", "-o", str(tmp_path / "x.parquet"), db=db)
    assert clash.returncode == 2 and "names a parquet file but --format is csv" in clash.stderr
    assert not (tmp_path / "run.xlsx").exists() and not (tmp_path / "x.parquet").exists()
    assert out.stat().st_mode & 0o777 == 0o666 & ~current_umask()  # as `>` would create it


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_an_export_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path):
    db = tmp_path / "cli.sqlite3"
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "shout.py").write_text(AGENT)
    bank = tmp_path / "qa.jsonl"
    # random text: every format's output is far bigger than a pipe's buffer (64 KiB), compressed
    # or not, so the export is still writing when the reader goes away (with "x" * 2000 the
    # Parquet file fitted in the buffer and the export could end before the reader closed)
    bank.write_text(
        "".join(
            json.dumps({"id": f"c{i}", "input": secrets.token_hex(1000), "expected": "X"}) + "\n" for i in range(400)
        )
    )
    ran = run_cli("eval", str(agents), "--set", str(bank), "--split", "all", "--allow-test", db=db)
    found = re.search(r"eval run ([0-9a-f]{16})", ran.stdout)
    assert found, ran.stdout + ran.stderr
    run_id = found.group(1)
    env = {**os.environ, **subprocess_db_env(db)}
    for fmt in ("parquet", "jsonl"):
        export = subprocess.Popen(
            [str(EVALSITE), "export", run_id, "--format", fmt],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        export.stdout.read(4)  # the reader takes four bytes and goes away
        export.stdout.close()
        _, err = export.communicate(timeout=180)
        assert export.returncode == 141, (fmt, export.returncode, err.decode())
        assert b"Traceback" not in err and b"BrokenPipe" not in err
