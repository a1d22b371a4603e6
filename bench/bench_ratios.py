"""Issue 30's floors as ratios measured in one interleaved run. Run: ``.venv/bin/python bench/bench_ratios.py``.

Every figure is a ratio to a reference measured in the same run, on the same machine, with the
repetitions interleaved (reference, then the CLI, then again ...), so a machine whose speed drifts
moves both. Each line gives min / median / max over ``--reps`` repetitions (3) and the load
average before and after. Whole-process figures are timed from outside (exec to exit).

  floor 1  throughput   persisted ``evalsite eval`` of 10,000 no-op cases (c=50) vs the in-memory
                        engine's whole process on the same cases: engine wall / CLI wall >= 0.5
  floor 2  latency      1,000 cases x 50 ms at c=50 through the CLI: the run's own time / ideal
                        <= 1.03 (the engine's own ratio printed beside it)
  floor 3  start-up     a 1-case ``evalsite eval`` vs the engine's 1-case run, whole process:
                        <= 2.0; a new database file vs an existing one: <= +0.3 s
  floor 4  memory       (``--million``) peak RSS at 1,000,000 cases / at 10,000: <= 1.10

Floors 5 (pages at 1M results) and 6 (scale-out) have their own commands:
``bench/bench_portal.py`` and ``bench/bench_cluster.py``.

Options: ``--reps N`` (3), ``--only NAME`` (throughput, latency, startup, memory), ``--million``,
``--compare TREE`` (repeatable: also time the CLI of other checkouts of Evalsite, e.g. an older
commit exported with ``git archive``, interleaved with this one: a before/after table in one run;
each is labelled by its folder's name).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

AGENTS = """
import asyncio

from evalcore.discovery import target


@target(id="noop", scorers=["exact_match"])
async def noop(question):
    return question


@target(id="sleepy", scorers=["exact_match"])
async def sleepy(question):
    await asyncio.sleep(0.05)
    return question
"""

ENGINE = """
import asyncio, json, sys, time
from evalcore import InMemoryEvalStore, run_eval
from evalcore.loaders import load_cases


async def noop(x):
    return x


async def sleepy(x):
    await asyncio.sleep(0.05)
    return x


bank = load_cases(sys.argv[1])
target = sleepy if sys.argv[2] == "sleepy" else noop
sink = InMemoryEvalStore(keep_events=False, keep_results=False)
report = asyncio.run(run_eval(bank.cases, target, ["exact_match"], concurrency=50, sink=sink))
print(json.dumps({"elapsed_s": report.elapsed_s}))
"""

TIMED = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)\n"
    "wall = time.perf_counter() - t\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "sys.stdout.write(p.stdout)\n"
    "sys.stderr.write(p.stderr[-3000:])\n"
    "print('BENCH', wall, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024, p.returncode)\n"
)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def spread(values: list[float], fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(min(values))} / {fmt.format(statistics.median(values))} / {fmt.format(max(values))}"


def verdict(name: str, values: list[float], target: float, higher_is_better: bool, unit: str = "x") -> None:
    median = statistics.median(values)
    ok = median >= target if higher_is_better else median <= target
    op = ">=" if higher_is_better else "<="
    print(f"  {name:<58} {spread(values)} {unit}  (min/median/max)  target {op} {target}  {'ok' if ok else 'MISSED'}")


def write_cases(path: Path, n: int) -> Path:
    if not path.exists():
        with open(path, "w", encoding="utf-8") as f:
            for i in range(n):
                f.write(
                    json.dumps({"id": f"c{i}", "input": f"question {i}", "expected": f"question {i}", "split": "dev"})
                )
                f.write("\n")
    return path


class Bench:
    """A temp dir with the agents folder, case files and one migrated database per tree."""

    def __init__(self, tmp: Path, trees: dict[str, Path]) -> None:
        self.tmp = tmp
        self.trees = trees
        self.agents = tmp / "agents"
        self.agents.mkdir()
        (self.agents / "bench_targets.py").write_text(AGENTS)
        (tmp / "engine.py").write_text(ENGINE)
        self.templates: dict[str, Path] = {}
        for label, tree in trees.items():
            template = tmp / f"template-{label}.sqlite3"
            out = self._timed(tree, ["-m", "evalsite.cli", "migrate", "-v0", "--db", str(template)])
            if out[3] != 0:
                raise SystemExit(f"migrate failed for {tree}")
            self.templates[label] = template

    def _env(self, tree: Path) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(tree), "EVALSITE_DATA_DIR": str(self.tmp / "data")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its bytecode cached
        env.pop("DJANGO_SETTINGS_MODULE", None)
        return env

    def _timed(self, tree: Path, args: list[str]) -> tuple[float, float, float, int, str]:
        """``python ARGS`` under ``tree``: (wall s, cpu s, peak RSS MB, exit code, stdout)."""
        out = subprocess.run(
            [sys.executable, "-c", TIMED, sys.executable, *args],
            env=self._env(tree),
            capture_output=True,
            text=True,
            cwd=self.tmp,
        )
        last = out.stdout.strip().splitlines()[-1].split()
        if last[0] != "BENCH":
            raise SystemExit(out.stdout[-2000:] + out.stderr[-2000:])
        if last[4] != "0":
            sys.stderr.write(out.stderr[-2000:])
        return float(last[1]), float(last[2]), float(last[3]), int(last[4]), out.stdout

    def engine(self, cases: Path, target: str) -> tuple[float, float, float, float]:
        """The in-memory engine, whole process: (wall, cpu, peak MB, the run's own elapsed s)."""
        wall, cpu, rss, code, stdout = self._timed(ROOT, [str(self.tmp / "engine.py"), str(cases), target])
        if code:
            raise SystemExit("the engine run failed")
        return wall, cpu, rss, json.loads(stdout.strip().splitlines()[-2])["elapsed_s"]

    def cli(
        self, label: str, cases: Path, target: str, *, new_db: bool = False, report: bool = False
    ) -> tuple[float, float, float, float]:
        """``evalsite eval`` of ``label``'s tree on a copy of its migrated database (``new_db``:
        on a file that does not exist yet): (wall, cpu, peak MB, the run's own elapsed s, or NaN
        without ``report``: the ``--json`` report file, a separate export of every case, is
        written only when the run's own time is wanted)."""
        db = self.tmp / f"run-{label}.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        if not new_db:
            shutil.copyfile(self.templates[label], db)
        report_file = self.tmp / "report.json"
        args = ["-m", "evalsite.cli", "eval", str(self.agents), "--target", target, "--set", str(cases)]
        args += ["--concurrency", "50", "--quiet", "--db", str(db)]
        if report:
            args += ["--json", str(report_file)]
        wall, cpu, rss, code, _ = self._timed(self.trees[label], args)
        if code:
            raise SystemExit(f"evalsite eval ({label}) failed with exit {code}")
        elapsed = json.loads(report_file.read_text())["report"]["elapsed_s"] if report else float("nan")
        return wall, cpu, rss, elapsed


def floor_throughput(b: Bench, reps: int) -> None:
    cases = write_cases(b.tmp / "cases10000.jsonl", 10_000)
    b.engine(cases, "noop")  # warm-up: bytecode written, page cache warm
    for label in b.trees:
        b.cli(label, cases, "noop")
    ratios: dict[str, list[float]] = {label: [] for label in b.trees}
    rates: dict[str, list[float]] = {label: [] for label in b.trees}
    engine_rates: list[float] = []
    cpu_ratios: dict[str, list[float]] = {label: [] for label in b.trees}
    before = load()
    for _ in range(reps):
        for label in b.trees:
            engine_wall, engine_cpu = b.engine(cases, "noop")[:2]
            cli_wall, cli_cpu = b.cli(label, cases, "noop")[:2]
            ratios[label].append(engine_wall / cli_wall)
            cpu_ratios[label].append(engine_cpu / cli_cpu)
            rates[label].append(10_000 / cli_wall)
            engine_rates.append(10_000 / engine_wall)
    print(f"floor 1: persisted throughput, 10,000 no-op cases, c=50, whole process (load {before} -> {load()})")
    print(f"  {'in-memory engine (cases/s)':<58} {spread(engine_rates, '{:,.0f}')}")
    for label in b.trees:
        print(f"  {f'evalsite eval [{label}] (cases/s)':<58} {spread(rates[label], '{:,.0f}')}")
        verdict(f"[{label}] CLI throughput / engine throughput", ratios[label], 0.5, True)
        verdict(f"[{label}] the same in CPU time (engine CPU / CLI CPU)", cpu_ratios[label], 0.5, True)


def floor_latency(b: Bench, reps: int) -> None:
    cases = write_cases(b.tmp / "cases1000.jsonl", 1_000)
    ideal = 1_000 * 0.05 / 50
    engine: list[float] = []
    cli: dict[str, list[float]] = {label: [] for label in b.trees}
    before = load()
    for _ in range(reps):
        for label in b.trees:
            engine.append(b.engine(cases, "sleepy")[3] / ideal)
            cli[label].append(b.cli(label, cases, "sleepy", report=True)[3] / ideal)
    print(f"floor 2: latency-bound 1,000 x 50 ms, c=50, the run's own time / ideal (load {before} -> {load()})")
    print(f"  {'in-memory engine (x ideal)':<58} {spread(engine)}")
    for label in b.trees:
        verdict(f"[{label}] evalsite eval (x ideal)", cli[label], 1.03, False)


def floor_startup(b: Bench, reps: int) -> None:
    cases = write_cases(b.tmp / "cases1.jsonl", 1)
    b.engine(cases, "noop")
    for label in b.trees:
        b.cli(label, cases, "noop")
        b.cli(label, cases, "noop", new_db=True)  # a tree with a schema template makes it here
    ratios: dict[str, list[float]] = {label: [] for label in b.trees}
    extra: dict[str, list[float]] = {label: [] for label in b.trees}
    walls: dict[str, list[float]] = {label: [] for label in b.trees}
    cpu_ratios: dict[str, list[float]] = {label: [] for label in b.trees}
    cpu_extra: dict[str, list[float]] = {label: [] for label in b.trees}
    engine: list[float] = []
    before = load()
    for _ in range(reps):
        for label in b.trees:
            engine_wall, engine_cpu = b.engine(cases, "noop")[:2]
            existing, existing_cpu = b.cli(label, cases, "noop")[:2]
            fresh, fresh_cpu = b.cli(label, cases, "noop", new_db=True)[:2]
            engine.append(engine_wall)
            walls[label].append(existing)
            ratios[label].append(existing / engine_wall)
            extra[label].append(fresh - existing)
            cpu_ratios[label].append(existing_cpu / engine_cpu)
            cpu_extra[label].append(fresh_cpu - existing_cpu)
    print(f"floor 3: start-up, a 1-case run, whole process (load {before} -> {load()})")
    print(f"  {'in-memory engine (s)':<58} {spread(engine)}")
    for label in b.trees:
        print(f"  {f'evalsite eval [{label}], existing database (s)':<58} {spread(walls[label])}")
        verdict(f"[{label}] CLI / engine", ratios[label], 2.0, False)
        verdict(f"[{label}] the same in CPU time", cpu_ratios[label], 2.0, False)
        verdict(f"[{label}] new database file - existing one", extra[label], 0.3, False, unit="s")
        verdict(f"[{label}] the same in CPU time", cpu_extra[label], 0.3, False, unit="s")


def floor_memory(b: Bench) -> None:
    small = write_cases(b.tmp / "cases10000.jsonl", 10_000)
    big = write_cases(b.tmp / "cases1000000.jsonl", 1_000_000)
    before = load()
    print(f"floor 4: peak RSS, evalsite eval of no-op cases (load {before})")
    for label in b.trees:
        low = b.cli(label, small, "noop")[2]
        high = b.cli(label, big, "noop")[2]
        print(f"  [{label}] 10,000 cases {low:.0f} MB, 1,000,000 cases {high:.0f} MB")
        verdict(f"[{label}] peak RSS 1,000,000 / 10,000", [high / low], 1.10, False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", choices=["throughput", "latency", "startup", "memory"])
    parser.add_argument("--million", action="store_true", help="floor 4: a 1,000,000-case run (minutes)")
    parser.add_argument(
        "--compare", type=Path, action="append", default=[], help="another Evalsite tree (repeatable), interleaved"
    )
    args = parser.parse_args()
    trees = {**{path.resolve().name: path.resolve() for path in args.compare}, "this": ROOT}
    print(f"{os.cpu_count()} cores, load {load()}; {args.reps} interleaved repetitions; trees: {trees}")
    with tempfile.TemporaryDirectory(prefix="bench-ratios-") as tmp:
        b = Bench(Path(tmp), trees)
        if args.only in (None, "throughput"):
            floor_throughput(b, args.reps)
        if args.only in (None, "latency"):
            floor_latency(b, args.reps)
        if args.only in (None, "startup"):
            floor_startup(b, args.reps)
        if args.only == "memory" or args.million:
            floor_memory(b)


if __name__ == "__main__":
    main()
