"""Benchmark: issue 30 floor 5, the pages of 1,000,000-result runs in <= 100 ms server time.

Builds (bulk inserts, as ``bench_portal.py`` does) one set of N cases and two finished runs of N
results each over it (B differs from A on about 10% of cases), ends both as a run ends
(``finish_eval_run``: costed, figures kept) and indexes them for full-text search as the sweeper
does, then prints the server time of:

* the run page of A, HTML and the JSON API (first page);
* the compare page of A and B, HTML and the JSON API (first page, paired statistics included);
* A's case search: a text query (``?text=``, a number in one case's input) and a status filter
  (``?status=failed``, about 30% of the results), HTML and API;

each as the cold (first) request and min / median / max of ``--repeat`` warm ones (>= 5), with
the median's ratio to the 100 ms target, and the machine's load average before and after.
"Server time" is one request through the Django test client (middleware, auth, view, queries,
rendering; no network), as ``bench_portal.py`` measures it.

SQLite (WAL, the embedded default) by default; PostgreSQL when ``DATABASE_URL`` is set (start a
throwaway cluster with ``PG_KEEP=1 scripts/test-postgres.sh --version``, which prints the URL).

Run: ``.venv/bin/python bench/bench_million.py [--cases N] [--repeat R] [--db FILE] [--check]``;
``--db`` keeps the SQLite file and reuses it next time (on PostgreSQL the runs are reused when
present); ``--check`` exits 1 when a median misses the target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_portal import populate, setup_django  # noqa: E402

TARGET_MS = 100.0
SET_NAME = "bench-100k"  # bench_portal.populate's set


def time_all(fetch: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    """(cold ms, warm ms samples) of ``repeat`` + 1 calls; each call must answer 200."""
    samples = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        response = fetch()
        samples.append((time.perf_counter() - start) * 1000)
        status = getattr(response, "status_code", None)
        if status != 200:
            raise RuntimeError(f"request failed with {status}: {getattr(response, 'content', b'')[:300]!r}")
    return samples[0], samples[1:]


def line(label: str, cold: float, warm: list[float]) -> bool:
    """Print one figure; whether its median meets the target."""
    median = statistics.median(warm)
    ok = median <= TARGET_MS
    print(
        f"{label:<40} cold {cold:8.1f}   min {min(warm):7.1f}  median {median:7.1f}  max {max(warm):7.1f} ms"
        f"   ratio {median / TARGET_MS:5.2f}  {'ok' if ok else 'MISS'}",
        flush=True,
    )
    return ok


def main() -> int:
    """Populate (or reuse), then print the figures; 1 with ``--check`` when a median misses."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1_000_000, help="results per run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="warm requests per figure, >= 5 (default: %(default)s)")
    parser.add_argument("--db", default=None, help="keep the SQLite database in this file and reuse it next time")
    parser.add_argument("--check", action="store_true", help="exit 1 when a median misses the target")
    args = parser.parse_args()
    repeat = max(5, args.repeat)

    with tempfile.TemporaryDirectory(prefix="bench-million-") as tmp:
        db_path = Path(args.db) if args.db else Path(tmp) / "bench.sqlite3"
        setup_django(db_path)
        from django.contrib.auth.models import Group, User
        from django.db import connection
        from django.test import Client
        from django.urls import reverse

        from apps.evals.models import EvalRun
        from apps.evals.results.readback import finish_eval_run
        from apps.evals.worker.sweeper import index_pending

        backend = "SQLite WAL" if connection.vendor == "sqlite" else "PostgreSQL"
        found = list(EvalRun.objects.filter(eval_set__name=SET_NAME).order_by("variant").values_list("pk", "n_done"))
        if len(found) == 2 and all(n == args.cases for _, n in found):
            run_a, run_b = (pk for pk, _ in found)
            print(f"reusing 2 runs x {args.cases:,} results ({backend})")
        else:
            start = time.perf_counter()
            run_a, run_b, _ = populate(args.cases)
            print(f"populated 2 runs x {args.cases:,} results in {time.perf_counter() - start:.0f} s ({backend})")
        # end each run as a run ends (finish_eval_run: its cases costed, the run's cost and latency
        # figures kept on it, and whatever else this tree does at a run's end), once
        unfinished = EvalRun.objects.filter(pk__in=[run_a, run_b]).exclude(summary__has_key="cost_latency")
        for pk in unfinished.values_list("pk", flat=True):
            start = time.perf_counter()
            finish_eval_run(pk, None)
            print(f"finish_eval_run of {pk}: {time.perf_counter() - start:.1f} s", flush=True)
        start = time.perf_counter()
        while index_pending(limit=2):  # both runs, as the sweeper would over two sweeps
            pass
        print(f"search index brought up to date in {time.perf_counter() - start:.1f} s", flush=True)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

        user, _ = User.objects.get_or_create(username="bench")
        user.groups.add(Group.objects.get(name="viewer"))
        client = Client()
        client.force_login(user)
        page = reverse("evals:eval_run", args=[run_a])
        api = f"/api/eval/runs/{run_a}"
        compare = f"{reverse('evals:compare')}?a={run_a}&b={run_b}"
        needle = str(args.cases // 2 + 7)
        figures: list[tuple[str, Callable[[], object]]] = [
            ("run page, HTML", lambda: client.get(page)),
            ("run page, API", lambda: client.get(api)),
            ("compare page, HTML", lambda: client.get(compare)),
            ("compare page, API", lambda: client.get(f"/api/eval/compare?a={run_a}&b={run_b}")),
            (f"case search ?text={needle}, HTML", lambda: client.get(page, {"text": needle})),
            (f"case search ?text={needle}, API", lambda: client.get(api, {"text": needle})),
            ("case search ?status=failed, HTML", lambda: client.get(page, {"status": "failed"})),
            ("case search ?status=failed, API", lambda: client.get(api, {"status": "failed"})),
        ]
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"target {TARGET_MS:.0f} ms (median of {repeat} warm requests); {backend}; {args.cases:,} results/run")
        ok = [line(label, *time_all(fetch, repeat)) for label, fetch in figures]
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        from django.db import connections

        connections.close_all()
    return 1 if args.check and not all(ok) else 0


if __name__ == "__main__":
    raise SystemExit(main())
