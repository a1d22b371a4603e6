"""Durability under kill -9 (issue 8, section 2). Run: ``.venv/bin/python bench/bench_kill9.py``.

A 2,000-case ``evalsite eval`` (an async target sleeping 10 ms, concurrency 4) runs in a
subprocess that prints each case the moment it is handed to the store (``case repeat
monotonic-time``). The harness kills it with SIGKILL at a random point, counts the cases the
process reported finished more than 250 ms before the kill that are not in the database (the
documented durability delay: must be 0), then ``--resume``s the run and kills it again, 20 times,
and finally lets a ``--resume`` finish. It then checks: every case stored exactly once
(duplicates = 0; the table also has a unique constraint on (eval run, case, repeat)), no case
errored by the resumes, the run ``finished`` with its counters equal to the stored rows.

Options: ``--kills N`` (20), ``--cases N`` (2000), ``--seed N``, ``--delay-ms`` (250).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

AGENT = """
import asyncio
from evalcore.discovery import target


@target(id="slow", scorers=["exact_match"])
async def slow(question):
    await asyncio.sleep(0.01)
    return question
"""


def child(argv: list[str]) -> None:
    """The eval process: reports each case as soon as the store has it, then runs the command."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from apps.evals.results.writer import DjangoEvalStore

    original = DjangoEvalStore.on_result
    out = sys.stdout

    def reporting(self, result):  # type: ignore[no-untyped-def]
        original(self, result)
        out.write(f"{result.case.id} {result.run.repeat_index} {time.monotonic():.6f}\n")
        out.flush()

    DjangoEvalStore.on_result = reporting  # type: ignore[method-assign]
    call_command("eval", *argv)


class Segment:
    """One child process and the cases it reported finished (with their monotonic times)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.reported: list[tuple[str, int, float]] = []
        self.first = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=ROOT,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 3:
                try:
                    self.reported.append((parts[0], int(parts[1]), float(parts[2])))
                except ValueError:
                    continue
                self.first.set()


def stored(db: Path, eval_run_id: str) -> set[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT case_id, repeat_index FROM evals_evalresult WHERE eval_run_id = ?", [eval_run_id]
        ).fetchall()
    return {(c, r) for c, r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--delay-ms", type=float, default=250.0, help="documented durability delay")
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    bound = opts.delay_ms / 1000.0

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        agents = tmp_path / "agents"
        agents.mkdir()
        (agents / "slow.py").write_text(AGENT)
        cases = tmp_path / "k9.jsonl"
        rows = ({"id": f"c{i:05d}", "input": f"q{i}", "expected": f"q{i}"} for i in range(opts.cases))
        cases.write_text("".join(json.dumps(row) + "\n" for row in rows))
        db = tmp_path / "k9.sqlite3"
        env = {**os.environ, "EVALSITE_DB": str(db), "PYTHONPATH": str(ROOT)}
        common = ["--split", "all", "--quiet", "--concurrency", "4"]

        eval_run_id = ""
        lost_total = 0
        late_unstored = 0
        oldest_unstored_ms = 0.0
        kills = 0
        completed_early = False
        print(f"{'kill':>4} {'reported':>9} {'stored':>7} {'lost >250ms':>12} {'unstored <=250ms':>17}")
        for k in range(opts.kills):
            args = (
                [str(agents), "--set", str(cases), "--allow-test", *common]
                if not eval_run_id
                else [str(agents), "--resume", eval_run_id, *common]
            )
            seg = Segment(args, env)
            if not seg.first.wait(timeout=120):
                seg.proc.kill()
                raise SystemExit(f"segment {k}: no case reported within 120 s")
            if not eval_run_id:
                with sqlite3.connect(db) as conn:
                    eval_run_id = conn.execute("SELECT id FROM evals_evalrun").fetchone()[0]
            time.sleep(rng.uniform(0.02, 0.6))
            if seg.proc.poll() is not None:
                completed_early = True
                seg.reader.join()
                break
            killed_at = time.monotonic()
            seg.proc.kill()
            seg.proc.wait()
            seg.reader.join()
            kills += 1
            have = stored(db, eval_run_id)
            old = {(c, r) for c, r, t in seg.reported if t < killed_at - bound}
            recent = {(c, r) for c, r, t in seg.reported if t >= killed_at - bound}
            lost = old - have
            lost_total += len(lost)
            ages = [killed_at - t for c, r, t in seg.reported if (c, r) not in have]
            oldest_unstored_ms = max([oldest_unstored_ms, *(a * 1000 for a in ages)])
            late_unstored += len(recent - have)
            print(f"{k + 1:>4} {len(seg.reported):>9} {len(have):>7} {len(lost):>12} {len(recent - have):>17}")

        before_final = len(stored(db, eval_run_id))
        final = subprocess.run(
            [sys.executable, __file__, "--child", str(agents), "--resume", eval_run_id, *common],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        with sqlite3.connect(db) as conn:
            total, distinct = conn.execute(
                "SELECT count(*), count(DISTINCT case_id || '#' || repeat_index) FROM evals_evalresult "
                "WHERE eval_run_id = ?",
                [eval_run_id],
            ).fetchone()
            errored = conn.execute(
                "SELECT count(*) FROM evals_evalresult WHERE eval_run_id = ? AND status = 'errored'", [eval_run_id]
            ).fetchone()[0]
            status, n_done = conn.execute(
                "SELECT status, n_done FROM evals_evalrun WHERE id = ?", [eval_run_id]
            ).fetchone()
            table_sql = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'evals_evalresult'"
            ).fetchone()[0]
            unique = "evalresult_unique_case" in table_sql

    duplicates = total - distinct
    resume_ok = final.returncode == 0 and status == "finished" and total == opts.cases
    print()
    early = " (run completed early)" if completed_early else ""
    print(f"kills (SIGKILL at random points)               {kills}{early}")
    print(f"lost finished cases (reported > {opts.delay_ms:g} ms before kill) {lost_total}   target 0")
    print(f"finished <= {opts.delay_ms:g} ms before a kill, not stored       {late_unstored}   (allowed)")
    print(f"oldest finished case not stored at a kill      {oldest_unstored_ms:.0f} ms before it")
    print(f"duplicates after resume                        {duplicates}   target 0 (unique constraint: {unique})")
    print(f"cases errored by the resumes                   {errored}   target 0")
    print(
        f"final --resume: exit {final.returncode}, status {status}, results {total}/{opts.cases} "
        f"({total - before_final} run by it), n_done {n_done}   {'ok' if resume_ok else 'MISSED'}"
    )
    if final.returncode:
        print(final.stderr[-2000:])
    ok = lost_total == 0 and duplicates == 0 and errored == 0 and resume_ok and n_done == total
    print("verdict:", "ok" if ok else "MISSED")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    else:
        main()
