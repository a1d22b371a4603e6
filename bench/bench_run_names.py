"""Benchmark: the pages of issue 26 on a database of many runs.

Creates a temporary SQLite database (WAL, the embedded default) with ``--sets`` sets of 10 cases,
``--runs`` finished eval runs spread over them (ten variants per set, each run scoring every case:
a case's history is ``runs / sets`` rows long) with their ``traces.Run`` rows and a report
(``tokens_in`` / ``tokens_out``, a cost on every third run), then measures the server time of:

* the runs list, first page, in its default order and sorted by tokens, pass rate, duration and
  cost (the sort is SQL over the report's JSON: target <= 300 ms);
* the sets list with the latest pass rate per variant (target <= 300 ms);
* one case's history page and its API twin (target <= 300 ms);
* migration 0024's backfill over every run (numbers and names; printed, no target).

"Server time" is one request through the Django test client (middleware, auth, view, queries,
rendering; no network), the median of ``--repeat`` warm requests.

Run: ``.venv/bin/python bench/bench_run_names.py [--runs N] [--sets S] [--repeat R] [--check]``;
``--check`` exits 1 when a median misses its target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_MS = 300.0
N_CASES = 10


def setup_django(db_path: Path) -> None:
    """Point the settings at a fresh database file and migrate it (before any model import)."""
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def populate(n_runs: int, n_sets: int) -> tuple[int, str]:
    """The sets, runs, traces and results; returns (a set id, a case id) for the history page."""
    from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
    from apps.traces.models import Run

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    sets = EvalSet.objects.bulk_create(EvalSet(name=f"set{i}", description=f"set {i}") for i in range(n_sets))
    EvalCase.objects.bulk_create(
        EvalCase(eval_set=s, case_id=f"c{j}", input="q", expected="a", split="dev", position=j)
        for s in sets
        for j in range(N_CASES)
    )
    runs = []
    for i in range(n_runs):
        started = t0 + timedelta(minutes=i)
        passed = (i * 7) % (N_CASES + 1)
        summary: dict[str, float] = {"tokens_in": 100 + i, "tokens_out": 10 + i % 50}
        if i % 3 == 0:
            summary["cost_usd"] = 0.001 * (i % 97)
        runs.append(
            EvalRun(
                id=f"{i:016x}",
                eval_set=sets[i % n_sets],
                target_id="agent",
                variant=f"v{(i // n_sets) % 10}",
                split="dev",
                model=f"model-{i % 4}",
                status="finished",
                started=started,
                finished=started + timedelta(seconds=5 + i % 300),
                n_total=N_CASES,
                n_done=N_CASES,
                n_passed=passed,
                n_failed=N_CASES - passed,
                summary=summary,
                number=i // n_sets + 1,
                name=f"set{i % n_sets} · agent/v{(i // n_sets) % 10} · dev · #{i // n_sets + 1}",
            )
        )
    EvalRun.objects.bulk_create(runs, batch_size=1000)
    traces = [
        Run(run_id=f"{r.id}:c{j}", trace_id=f"{r.id}:c{j}", target_id="agent", started=t0, status="ok")
        for r in runs
        for j in range(N_CASES)
    ]
    Run.objects.bulk_create(traces, batch_size=2000)
    pks = dict(Run.objects.values_list("run_id", "pk"))
    EvalResult.objects.bulk_create(
        (
            EvalResult(
                eval_run=r,
                case_id=f"c{j}",
                split="dev",
                run_id=pks[f"{r.id}:c{j}"],
                scores=[{"name": "exact_match", "value": j < r.n_passed, "passed": j < r.n_passed}],
                passed=j < r.n_passed,
                status="passed" if j < r.n_passed else "failed",
            )
            for r in runs
            for j in range(N_CASES)
        ),
        batch_size=2000,
    )
    return sets[0].pk, "c3"


def median_ms(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(cold, median warm) wall time of ``call`` in ms."""
    start = time.perf_counter()
    call()
    cold = (time.perf_counter() - start) * 1000
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return cold, statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--sets", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from django.apps import apps as django_apps
        from django.contrib.auth.models import User
        from django.test import Client

        from apps.evals.models import EvalRun

        start = time.perf_counter()
        set_id, case_id = populate(args.runs, args.sets)
        print(f"populated {args.runs} runs, {args.runs * N_CASES} results in {time.perf_counter() - start:.1f} s")
        staff = User.objects.create_superuser("bench", password="bench-pass-123")
        client = Client()
        client.force_login(staff)
        checks = {
            "runs list, newest first": "/runs/",
            "runs list, ?sort=-tokens": "/runs/?sort=-tokens",
            "runs list, ?sort=-pass_rate": "/runs/?sort=-pass_rate",
            "runs list, ?sort=duration": "/runs/?sort=duration",
            "runs list, ?sort=-cost": "/runs/?sort=-cost",
            "sets list (latest per variant)": "/sets/",
            f"case history ({args.runs // args.sets} runs)": f"/sets/{set_id}/cases/{case_id}/history/",
            "case history API": f"/api/eval/sets/{set_id}/cases/{case_id}/history",
        }
        missed = []
        for label, url in checks.items():
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
            cold, warm = median_ms(partial(client.get, url), args.repeat)
            print(f"{label:<40} cold {cold:7.1f} ms   median {warm:7.1f} ms   (target <= {TARGET_MS:.0f})")
            if warm > TARGET_MS:
                missed.append(label)
        migration = __import__("importlib").import_module("apps.evals.migrations.0024_run_numbers_names")
        EvalRun.objects.update(number=0, name="")
        start = time.perf_counter()
        migration.number_and_name(django_apps, None)
        print(f"{'migration 0024 backfill':<40} {(time.perf_counter() - start) * 1000:7.1f} ms for {args.runs} runs")
    if args.check and missed:
        print("missed:", ", ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
