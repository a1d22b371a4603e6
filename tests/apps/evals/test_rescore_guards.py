"""Re-score guards found by a fresh user: a run scored by a scorer class an agents module
registers re-scores in a new process; a run still going is not re-scored into a "finished"
partial copy; ``--judge-label reviews`` without ``--judge`` is an error, not ignored."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")

AGENTS = textwrap.dedent(
    """
    from dataclasses import dataclass
    from typing import ClassVar

    from evalcore.discovery import TargetSpec
    from evalcore.scorers.base import ScoreContext, Scorer, register
    from evalcore.types import Score


    @register
    @dataclass
    class Shouted(Scorer):
        name: ClassVar[str] = "shouted"
        version: ClassVar[str] = "1"

        async def score(self, ctx: ScoreContext) -> Score:
            ok = str(ctx.output).isupper()
            return Score(self.name, ok, passed=ok)


    def shout(q):
        return q.upper()


    spec = TargetSpec(id="shout", target=shout, scorers=["shouted"])
    """
)


def cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    from tests.support.databases import subprocess_db_env

    env = {**os.environ, **subprocess_db_env(db)}
    return subprocess.run([str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=180)


def test_rescore_guards(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "shouting.py").write_text(AGENTS)
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"id": f"c{i}", "input": f"q{i}", "split": "dev"}) + "\n" for i in range(3)))
    db = tmp_path / "db.sqlite3"
    done = cli("eval", str(agents), "--set", str(bank), "--quiet", db=db)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("SELECT id FROM evals_evalrun").fetchone()

    # a new process knows the class once the run's agents folder is imported
    rescored = cli("rescore", run_id, db=db)
    assert rescored.returncode == 0, rescored.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM evals_evalrun WHERE source_eval_run_id = ?", [run_id]).fetchone() == (
            1,
        )

    label = cli("rescore", run_id, "--judge-label", "reviews", db=db)
    assert label.returncode == 2 and "add --judge" in label.stderr

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE evals_evalrun SET status = 'running', n_done = 1 WHERE id = ?", [run_id])
    running = cli("rescore", run_id, db=db)
    assert running.returncode == 2 and "re-score it once it has ended" in running.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM evals_evalrun").fetchone() == (2,)  # nothing new
