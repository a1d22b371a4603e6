"""Benchmark: `evalsite export` of a stored run, 10,000 and 100,000 results, each format.

Builds a SQLite database per size (a set, its cases, one run with a trace row and a result per
case, 200-character outputs), then runs the console script ``evalsite export RUN --format F -o
FILE`` in a subprocess and reports its wall time, the file size and the subprocess's peak RSS
(``ru_maxrss`` of that child alone, from ``os.wait4``). Flat memory: the peak at 100,000
results stays near the one at 10,000.

Run: ``.venv/bin/python bench/bench_export.py [--sizes 10000 100000] [--check]``; ``--check``
exits 1 when the largest size's peak RSS is more than 1.5x the smallest's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVALSITE = Path(sys.executable).with_name("evalsite")


def build(db: Path, n: int) -> str:
    """A database holding one run of ``n`` results; the run's id."""
    env = {**os.environ, "EVALSITE_DB": str(db), "PYTHONPATH": str(ROOT)}
    subprocess.run([str(EVALSITE), "migrate", "-v0"], env=env, check=True, cwd=ROOT)
    script = f"""
import django, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
django.setup()
from datetime import datetime, UTC
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from apps.traces.models import Run
n = {n}
s = EvalSet.objects.create(name="bench")
EvalCase.objects.bulk_create((EvalCase(eval_set=s, case_id=f"c{{i}}", input={{"q": f"question {{i}}"}},
    expected=f"answer {{i}}", tags=["bench"], split="dev", metadata={{"row": i}}, position=i) for i in range(n)),
    batch_size=2000)
r = EvalRun.objects.create(eval_set=s, target_id="t", split="dev", status="finished", n_total=n, n_done=n)
t0 = datetime(2026, 1, 1, tzinfo=UTC)
runs = Run.objects.bulk_create((Run(run_id=f"{{r.pk}}:c{{i}}", trace_id=f"{{r.pk}}:c{{i}}", started=t0,
    final_answer="x" * 200, elapsed_ms=1.0) for i in range(n)), batch_size=2000)
score = [{{"name": "exact_match", "value": True, "passed": True, "explanation": None, "error": None, "metadata": {{}}}}]
EvalResult.objects.bulk_create((EvalResult(eval_run=r, case_id=f"c{{i}}", run=run, scores=score, passed=True,
    status="passed", score=1.0) for i, run in enumerate(runs)), batch_size=2000)
print(r.pk)
"""
    out = subprocess.run([sys.executable, "-c", script], env=env, check=True, cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--formats", nargs="+", default=["jsonl", "csv", "parquet"])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    peaks: dict[int, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            db = Path(tmp) / f"bench-{n}.sqlite3"
            run_id = build(db, n)
            env = {**os.environ, "EVALSITE_DB": str(db), "PYTHONPATH": str(ROOT)}
            for fmt in args.formats:
                out = Path(tmp) / f"run-{n}.{fmt}"
                start = time.perf_counter()
                child = subprocess.Popen([str(EVALSITE), "export", run_id, "--format", fmt, "-o", str(out)], env=env)
                _, status, usage = os.wait4(child.pid, 0)
                child.returncode = os.waitstatus_to_exitcode(status)
                elapsed = time.perf_counter() - start
                if child.returncode:
                    raise SystemExit(f"export failed ({child.returncode})")
                peak_kb = usage.ru_maxrss
                peaks[n] = max(peaks.get(n, 0), peak_kb)
                print(
                    f"{n:>7} results  {fmt:<8} {elapsed:6.1f} s  {out.stat().st_size / 1e6:7.1f} MB  "
                    f"peak RSS {peak_kb / 1024:6.1f} MiB"
                )
    smallest, largest = peaks[min(peaks)], peaks[max(peaks)]
    print(f"peak RSS {smallest / 1024:.1f} MiB at {min(peaks)} results, {largest / 1024:.1f} MiB at {max(peaks)}")
    return 1 if args.check and largest > 1.5 * smallest else 0


if __name__ == "__main__":
    raise SystemExit(main())
