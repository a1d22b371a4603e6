"""The persisted path (issue 12, section 3). Run: ``.venv/bin/python bench/bench_persisted.py``.

Each figure is measured on a real ``evalsite`` process (SQLite in a temp dir, migrated first) and
printed with its target and the ratio to it (ratio >= 1.0: met). Whole-process figures are timed
from outside (start to exit) with the process's own CPU time and peak RSS from ``getrusage``;
on a busy machine wall time exceeds CPU time, so both are printed.

  persisted eval    ``evalsite eval`` of a no-op target over 10,000 cases (c=50), whole process
  peak RSS          the same at 10,000 and 100,000 cases (<= 120 MB, flat)
  start-up          from exec to the first case's target call (a 1-case set)
  import            100,000-case JSONL loaded, imported and read back (in one process, timed inside)
  latency-bound     1,000 cases x 50 ms at c=50 through the CLI: the run's own wall time vs ideal

Options: ``--only NAME`` (persisted, rss, startup, import, latency), ``--cases N`` (10000),
``--million`` (also the peak RSS of a 1,000,000-case run, to show it flat: several minutes).
With ``DATABASE_URL`` set the eval figures are taken on that database instead (PostgreSQL).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from machine_speed import machine_line  # noqa: E402

EVALSITE = [sys.executable, "-m", "evalsite.cli"]

AGENTS = """
import asyncio, os, time

from evalcore.discovery import target

_first = []


@target(id="noop", scorers=["exact_match"])
async def noop(question):
    return question


@target(id="sleepy", scorers=["exact_match"])
async def sleepy(question):
    await asyncio.sleep(0.05)
    return question


@target(id="first", scorers=["exact_match"])
def first(question):
    if not _first:
        _first.append(time.time())
        with open(os.environ["BENCH_FIRST_CASE"], "w") as f:
            f.write(repr(_first[0]))
    return question
"""

IMPORT_CODE = """
import json, sys, time
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from apps.evals.models import EvalSet
from apps.evals.sets.cases import import_cases, set_cases
from evalcore.loaders import load_cases
t0 = time.perf_counter()
bank = load_cases(sys.argv[1])
t1 = time.perf_counter()
summary = import_cases(name=bank.name, cases=bank.cases, content_hash=bank.content_hash, source_path=sys.argv[1],
                       hashed_splits=bank.hashed_splits)
t2 = time.perf_counter()
del bank
cases = set_cases(EvalSet.objects.get(name=summary.eval_set.name), "all")
t3 = time.perf_counter()
assert len(cases) == summary.created, (len(cases), summary.created)
print(json.dumps({"load": t1 - t0, "import": t2 - t1, "read_back": t3 - t2}))
"""


def line(name: str, value: float, unit: str, target: float, higher_is_better: bool = True, note: str = "") -> None:
    ratio = value / target if higher_is_better else target / value
    verdict = "ok" if ratio >= 1.0 else "MISSED"
    op = ">=" if higher_is_better else "<="
    shown = f"{target:,.0f}" if target >= 100 else f"{target:.2f}"
    print(f"{name:<52} {value:>10,.2f} {unit:<8} target {op} {shown:>6} {unit:<8} ratio {ratio:5.2f}  {verdict} {note}")


def write_cases(path: Path, n: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"c{i}", "input": f"question {i}", "expected": f"question {i}", "split": "dev"}))
            f.write("\n")


class Workspace:
    """A temp dir with an agents folder and a migrated database (copied fresh for each run)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.agents = tmp / "agents"
        self.agents.mkdir()
        (self.agents / "bench_targets.py").write_text(AGENTS)
        self.template = tmp / "template.sqlite3"
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALSITE_DATA_DIR": str(tmp / "data")}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its bytecode cached
        if not os.environ.get("DATABASE_URL"):
            subprocess.run([*EVALSITE, "migrate", "-v0", "--db", str(self.template)], env=self.env, check=True, cwd=tmp)

    def run(self, *args: str, env: dict[str, str] | None = None) -> tuple[float, float, float, str]:
        """``evalsite ARGS`` on a fresh copy of the database: (wall s, cpu s, peak RSS MB, stdout)."""
        db = self.tmp / "run.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        extra: list[str] = []
        if not os.environ.get("DATABASE_URL"):
            db.write_bytes(self.template.read_bytes())
            extra = ["--db", str(db)]
        code = (
            "import resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True)\n"
            "wall = time.perf_counter() - t\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "sys.stdout.write(p.stdout)\n"
            "print('BENCH', wall, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024, p.returncode)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, *EVALSITE, *args, *extra],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            cwd=self.tmp,
        )
        last = out.stdout.strip().splitlines()[-1].split()
        if last[0] != "BENCH" or last[4] != "0":
            print(out.stdout[-2000:], out.stderr[-2000:])
            raise SystemExit(f"evalsite {' '.join(args)} failed")
        return float(last[1]), float(last[2]), float(last[3]), out.stdout


def bench_persisted(ws: Workspace, n: int) -> None:
    cases = ws.tmp / f"cases{n}.jsonl"
    write_cases(cases, n)
    runs = [ws.run("eval", str(ws.agents), "--target", "noop", "--set", str(cases), "--concurrency", "50", "--quiet")]
    runs += [
        ws.run("eval", str(ws.agents), "--target", "noop", "--set", str(cases), "--concurrency", "50", "--quiet")
        for _ in range(2)
    ]
    wall = sorted(r[0] for r in runs)[1]
    cpu = sorted(r[1] for r in runs)[1]
    where = "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite"
    line(f"persisted eval, no-op, {n:,} cases, {where} (wall)", n / wall, "cases/s", 10_000)
    line(f"persisted eval, no-op, {n:,} cases, {where} (cpu)", n / cpu, "cases/s", 10_000)


def bench_rss(ws: Workspace, million: bool = False) -> None:
    peaks = {}
    for n in (10_000, 100_000, *((1_000_000,) if million else ())):
        cases = ws.tmp / f"cases{n}.jsonl"
        if not cases.exists():
            write_cases(cases, n)
        peaks[n] = ws.run(
            "eval", str(ws.agents), "--target", "noop", "--set", str(cases), "--concurrency", "50", "--quiet"
        )[2]
    line("peak RSS, evalsite eval, 100,000 cases", peaks[100_000], "MB", 120, higher_is_better=False)
    line(
        "peak RSS growth 10,000 -> 100,000 cases",
        peaks[100_000] / peaks[10_000],
        "x",
        1.10,
        higher_is_better=False,
        note=f"({peaks[10_000]:.0f} -> {peaks[100_000]:.0f} MB)",
    )
    if million:
        line("peak RSS, evalsite eval, 1,000,000 cases", peaks[1_000_000], "MB", 120, higher_is_better=False)
        line(
            "peak RSS growth 10,000 -> 1,000,000 cases",
            peaks[1_000_000] / peaks[10_000],
            "x",
            1.10,
            higher_is_better=False,
            note=f"({peaks[10_000]:.0f} -> {peaks[1_000_000]:.0f} MB)",
        )


def bench_startup(ws: Workspace) -> None:
    cases = ws.tmp / "one.jsonl"
    write_cases(cases, 1)
    marker = ws.tmp / "first-case"
    delays = []
    ws.run(
        "eval",
        str(ws.agents),
        "--target",
        "first",
        "--set",
        str(cases),
        "--quiet",
        env={"BENCH_FIRST_CASE": str(marker)},
    )  # warm-up: bytecode written, page cache warm
    for _ in range(3):
        marker.unlink(missing_ok=True)
        started = time.time()
        ws.run(
            "eval",
            str(ws.agents),
            "--target",
            "first",
            "--set",
            str(cases),
            "--quiet",
            env={"BENCH_FIRST_CASE": str(marker)},
        )
        delays.append(float(marker.read_text()) - started)
    line("CLI start-up to first case", sorted(delays)[1], "s", 0.5, higher_is_better=False)


def bench_import(ws: Workspace, n: int = 100_000) -> None:
    cases = ws.tmp / f"import{n}.jsonl"
    write_cases(cases, n)
    db = ws.tmp / "import.sqlite3"
    db.unlink(missing_ok=True)
    env = {
        **ws.env,
        "EVALSITE_DB": str(db),
        "DJANGO_SETTINGS_MODULE": "evalsite.settings",
        "EVALSITE_COMMAND": "import",
    }
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_CODE, str(cases)], env=env, capture_output=True, text=True, cwd=ws.tmp
    )
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    t = json.loads(out.stdout.strip().splitlines()[-1])
    total = t["load"] + t["import"] + t["read_back"]
    line(
        f"import {n:,}-case JSONL incl. read-back",
        total,
        "s",
        2.0,
        higher_is_better=False,
        note=f"(load {t['load']:.2f} + import {t['import']:.2f} + read-back {t['read_back']:.2f})",
    )


def bench_latency(ws: Workspace, n: int = 1_000) -> None:
    cases = ws.tmp / f"latency{n}.jsonl"
    write_cases(cases, n)
    report = ws.tmp / "latency.json"
    walls = []
    for _ in range(3):
        ws.run(
            "eval",
            str(ws.agents),
            "--target",
            "sleepy",
            "--set",
            str(cases),
            "--concurrency",
            "50",
            "--quiet",
            "--json",
            str(report),
        )
        walls.append(json.loads(report.read_text())["report"]["elapsed_s"])
    ideal = n * 0.05 / 50
    line(
        f"latency-bound {n:,} x 50 ms, c=50, via the CLI (x ideal)",
        sorted(walls)[1] / ideal,
        "x",
        1.05,
        higher_is_better=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["persisted", "rss", "startup", "import", "latency"])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--million", action="store_true", help="also the peak RSS of a 1,000,000-case run")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="bench-persisted-") as tmp:
        ws = Workspace(Path(tmp))
        if args.only in (None, "persisted"):
            bench_persisted(ws, args.cases)
        if args.only in (None, "rss"):
            bench_rss(ws, million=args.million)
        if args.only in (None, "startup"):
            bench_startup(ws)
        if args.only in (None, "import"):
            bench_import(ws)
        if args.only in (None, "latency"):
            bench_latency(ws)


if __name__ == "__main__":
    main()
