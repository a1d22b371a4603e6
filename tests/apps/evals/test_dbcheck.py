"""rs3-16: a damaged SQLite file is refused at start in one line, and a full disk mid-run is one
line, exit 3, the run left resumable.

Real files and real processes: the ``evalsite`` CLI and ``serve`` on a database whose pages were
overwritten; a run on a small tmpfs that fills (root only: ``mount``), resumed after the mount
grows.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from apps.evals.cli.dbcheck import damage

EVALSITE = Path(sys.executable).with_name("evalsite")
ROOT = Path(__file__).resolve().parents[3]
AGENTS = """
from evalcore.discovery import target

@target(id="echo", scorers=["exact_match"])
def echo(question):
    return question
"""


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVALSITE_") and k != "DATABASE_URL"}
    return subprocess.run(
        [str(EVALSITE), *args],
        cwd=tmp_path,
        env={**base, "EVALSITE_DATA_DIR": str(tmp_path / "data"), "EVALSITE_ENV_FILE": "", **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def write_cases(path: Path, n: int, size: int = 20) -> Path:
    rows = [{"id": f"c{i:05d}", "input": "q" * size + str(i), "expected": "x", "split": "dev"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir(exist_ok=True)
    (folder / "echo_agent.py").write_text(AGENTS)
    return folder


def damaged_database(tmp_path: Path) -> Path:
    """A real Evalsite database (an imported set) with three of its pages overwritten."""
    db = tmp_path / "damaged.sqlite3"
    assert cli(tmp_path, "import", str(write_cases(tmp_path / "cases.jsonl", 2000)), "--db", str(db)).returncode == 0
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size, pages = (
            conn.execute("PRAGMA page_size").fetchone()[0],
            conn.execute("PRAGMA page_count").fetchone()[0],
        )
    with db.open("r+b") as f:
        for page in (pages // 4, pages // 2, 3 * pages // 4):
            f.seek(page * page_size)
            f.write(bytes(range(256)) * (page_size // 256))
    return db


def test_a_damaged_database_is_refused_by_the_cli_and_serve_in_one_line(tmp_path):
    db = damaged_database(tmp_path)
    run = cli(tmp_path, "eval", str(agents(tmp_path)), "--set", "cases", "--target", "echo", "--quiet", "--db", str(db))
    assert run.returncode == 2, run.stdout + run.stderr
    [line] = run.stderr.strip().splitlines()
    assert str(db) in line and "the database file is damaged" in line and ".recover" in line
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = cli(tmp_path, "serve", "--port", str(port), "--db", str(db))
    assert serve.returncode != 0
    [line] = serve.stderr.strip().splitlines()
    assert str(db) in line and "the database file is damaged" in line


def test_a_sound_database_passes_and_the_check_is_bounded(tmp_path):
    db = tmp_path / "sound.sqlite3"
    assert cli(tmp_path, "import", str(write_cases(tmp_path / "cases.jsonl", 200)), "--db", str(db)).returncode == 0
    assert damage(db) is None
    assert damage(tmp_path / "missing.sqlite3") is None
    (tmp_path / "d").mkdir()
    bad = damaged_database(tmp_path / "d")
    # 0: no check; over its budget the check stops and the file is used (a huge database costs
    # at most the budget at start)
    problem = damage(bad)
    assert problem is not None and ("malformed" in problem or "Page" in problem)
    assert damage(bad, budget_s=0) is None
    assert damage(bad, budget_s=1e-9) is None


def mount_tmpfs(folder: Path, size: str) -> None:
    """Mount a tmpfs of ``size`` on ``folder`` (root: CI and ``make test`` run as root)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    assert done.returncode == 0, f"root could not mount a tmpfs: {done.stderr.decode(errors='replace')}"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (root only)")
def test_a_full_disk_mid_run_is_one_line_exit_3_and_the_run_resumes(tmp_path):
    mount = tmp_path / "small"
    mount_tmpfs(mount, "14m")
    try:
        env = {"EVALSITE_DATA_DIR": str(mount), "EVALSITE_DB": str(mount / "full.sqlite3")}
        cases = write_cases(tmp_path / "full.jsonl", 5000, size=200)
        assert cli(tmp_path, "import", str(cases), "--name", "full", **env).returncode == 0
        run = cli(tmp_path, "eval", str(agents(tmp_path)), "--set", "full", "--target", "echo", "--quiet", **env)
        assert run.returncode == 3, run.stdout + run.stderr
        lines = run.stderr.strip().splitlines()  # was ~190 lines of chained tracebacks
        assert len(lines) == 1 and "disk is full" in lines[0], run.stderr
        with closing(sqlite3.connect(mount / "full.sqlite3")) as conn:
            [(run_id, status, done)] = conn.execute("SELECT id, status, n_done FROM evals_evalrun").fetchall()
        # "running" when the full disk had no room for the status either (seen under load): its
        # process is gone, so every reader and --resume take it as interrupted (mark_stale_runs)
        assert status in ("failed", "interrupted", "running") and done < 5000
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
        resumed = cli(tmp_path, "eval", str(agents(tmp_path)), "--resume", run_id, "--quiet", **env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        with closing(sqlite3.connect(mount / "full.sqlite3")) as conn:
            assert conn.execute("SELECT status, n_done FROM evals_evalrun").fetchall() == [("finished", 5000)]
            assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT case_id) FROM evals_evalresult").fetchone() == (
                5000,
                5000,
            )
            assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        if subprocess.run(["umount", str(mount)]).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)])  # detach it whatever still holds it
