"""Engine benchmarks (issue 2, section 8). Run: ``.venv/bin/python bench/bench_engine.py``.

Prints each figure with its target and the ratio to it (ratio >= 1.0 means the target is met).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalcore import Case, InMemoryEvalStore, run_eval  # noqa: E402


async def noop(x):
    return x


def cases(n: int):
    return (Case(f"c{i}", i, i, split="dev") for i in range(n))


def line(name: str, value: float, unit: str, target: float, higher_is_better: bool = True) -> None:
    ratio = value / target if higher_is_better else target / value
    verdict = "ok" if ratio >= 1.0 else "MISSED"
    op = ">=" if higher_is_better else "<="
    shown = f"{target:,.0f}" if target >= 100 else f"{target:.2f}"
    print(f"{name:<48} {value:>12,.2f} {unit:<8} target {op} {shown} {unit:<8} ratio {ratio:5.2f}  {verdict}")


def bench_in_memory(n: int = 10_000) -> None:
    store = InMemoryEvalStore(keep_events=False, keep_results=False)
    started = time.perf_counter()
    asyncio.run(run_eval(cases(n), noop, ["exact_match"], concurrency=50, sink=store))
    line(f"engine overhead, in-memory store, {n:,} cases", n / (time.perf_counter() - started), "cases/s", 20_000)


def bench_latency(n: int = 1_000) -> None:
    async def sleepy(x):
        await asyncio.sleep(0.05)
        return x

    started = time.perf_counter()
    asyncio.run(run_eval(cases(n), sleepy, [], concurrency=50))
    wall = time.perf_counter() - started
    ideal = n * 0.05 / 50
    line(f"latency-bound {n:,} x 50 ms, concurrency 50 (wall)", wall, "s", ideal * 1.15, higher_is_better=False)


def bench_memory(n: int = 100_000) -> None:
    code = (
        "import asyncio, resource, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from evalcore import Case, InMemoryEvalStore, run_eval\n"
        "async def noop(x): return x\n"
        f"cases = (Case(f'c{{i}}', 'question ' * 20, 'question ' * 20, split='dev') for i in range({n}))\n"
        "asyncio.run(run_eval(cases, noop, ['exact_match'], concurrency=50,"
        " sink=InMemoryEvalStore(keep_events=False, keep_results=False)))\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    peak_mb = int(out.stdout.strip()) / 1024
    line(f"peak RSS of a {n:,}-case in-memory run", peak_mb, "MB", 300, higher_is_better=False)


def bench_sqlite(n: int = 10_000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "EVALSITE_DB": str(Path(tmp) / "bench.sqlite3"),
            "DJANGO_SETTINGS_MODULE": "evalsite.settings",
        }
        code = (
            "import asyncio, time, django, sys\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            "django.setup()\n"
            "from django.core.management import call_command\n"
            "call_command('migrate', verbosity=0)\n"
            "from apps.evals.runs.liveness import executor_fields, this_executor\n"
            "from apps.evals.models import EvalSet, EvalResult, EvalRun\n"
            "from apps.evals.results.writer import DjangoEvalStore\n"
            "from evalcore import Case, run_eval\n"
            "async def noop(x): return x\n"
            "s = EvalSet.objects.create(name='bench')\n"
            "rid = EvalRun.objects.create(eval_set=s, target_id='noop', status='running', **executor_fields()).id\n"
            "store = DjangoEvalStore(target_id='noop', eval_run_id=rid, executor=this_executor())\n"
            "t = time.perf_counter()\n"
            f"cases = (Case(f'c{{i}}', i, i, split='dev') for i in range({n}))\n"
            "with store:\n"
            "    asyncio.run(run_eval(cases, noop, ['exact_match'], concurrency=50, sink=store, eval_run_id=rid))\n"
            "elapsed = time.perf_counter() - t\n"
            f"assert EvalResult.objects.filter(eval_run_id=rid).count() == {n}\n"
            "print(elapsed)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        if out.returncode:
            print(out.stderr)
            raise SystemExit(1)
        elapsed = float(out.stdout.strip().splitlines()[-1])
    line(f"SQLite store (run + result + 2 events per case), {n:,}", n / elapsed, "cases/s", 1_500)


if __name__ == "__main__":
    bench_in_memory()
    bench_sqlite()
    bench_latency()
    bench_memory()
