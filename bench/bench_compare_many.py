"""Benchmark: the N-way compare summary of 10 runs x 100,000 cases (issue 27).

Builds the data once into a temporary SQLite file (one set, ``--runs`` finished runs of
``--cases`` results each, with traces; every run differs from the first on a share of cases that
grows with its index, so there are flips and a clear ranking), then times, each the median of
``--repeat`` calls:

* ``summary (cold)``: :func:`apps.evals.queries.compare_many.compare_many_runs` with the cache
  cleared first: the SQL pass to outcome patterns and the engine's statistics (ranking with its
  bootstrap, k-1 corrected readings against the baseline, k-1 against the best, flip matrix);
* ``summary page (cold)``: ``GET /compare/?runs=...`` through the Django test client (summary,
  ranking, verdicts, flip matrix and the first page of the per-case table), cache cleared;
* ``summary page (warm)``: the same page again (the summary cached while no run changes);
* ``case table page``: one page of the per-case table alone (``/compare/cases/``), cold (cache
  cleared: each run's verdicts read again) and warm (after the summary page, as a browser asks it).

Each figure is given as wall time and as this process's CPU time (SQLite runs in the process, so
that is the server's whole work); on a machine shared with other jobs the wall time also counts
the time spent waiting for a core (the load average is printed).

Target: the summary renders in under 1 s of server time. Prints each figure and its ratio to
the target. Run: ``.venv/bin/python bench/bench_compare_many.py [--runs 10] [--cases 100000]
[--repeat 3] [--db PATH] [--check]``; ``--db`` keeps the database to reuse on the next run;
``--check`` exits 1 when the cold summary page misses the target.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_MS = 1000.0
SET_NAME = "bench-compare-many"


def setup_django(db_path: Path) -> None:
    """Point the settings at a database file and migrate it (before any model import)."""
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"  # DEBUG records every query: not what production pays
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def populate(n_runs: int, n: int, seed: int = 27) -> list[str]:
    """One set of ``n`` cases and ``n_runs`` finished runs over it; returns the run ids in order.

    Raw ``executemany`` inserts (the ORM's bulk_create of 2 x 10^6 rows takes minutes): run i
    flips the first run's verdict on ``2 + i`` percent of cases, improving a bit more often than
    not as i grows.
    """
    from django.db import connection, transaction
    from django.utils import timezone

    from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
    from apps.traces.models import Run

    rng = random.Random(seed)
    now = timezone.now()
    with transaction.atomic():
        eval_set = EvalSet.objects.create(name=SET_NAME, content_hash="bench")
        EvalCase.objects.bulk_create(
            (
                EvalCase(eval_set=eval_set, case_id=f"case-{i:06d}", input={"q": i}, expected=str(i), position=i)
                for i in range(n)
            ),
            batch_size=5000,
        )
    base = [rng.random() < 0.6 for _ in range(n)]
    ids: list[str] = []
    next_trace = (Run.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    for index in range(n_runs):
        flip = 0.02 + 0.01 * index
        up = 0.5 + 0.02 * index
        passed = [
            (p if rng.random() >= flip else (not p if (rng.random() < up) != p else p)) if index else p for p in base
        ]
        with transaction.atomic():
            eval_run = EvalRun.objects.create(
                eval_set=eval_set,
                target_id="bench",
                variant=f"v{index}",
                split="all",
                status="finished",
                started=now,
                finished=now,
                n_total=n,
                n_done=n,
                n_passed=sum(passed),
                n_failed=n - sum(passed),
                scorer_specs=[{"name": "exact_match", "args": {}}],
            )
            started = now.isoformat()
            with connection.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {Run._meta.db_table} (id, run_id, trace_id, target_id, started, elapsed_ms, status, "
                    "finish_reason, model, step_metrics, metadata, private) "
                    "VALUES (%s, %s, %s, 'bench', %s, %s, 'ok', '', '', '{}', '{}', FALSE)",
                    [
                        (next_trace + i, f"{eval_run.pk}:{i}", f"{eval_run.pk}:{i}", started, rng.uniform(50, 900))
                        for i in range(n)
                    ],
                )
                cursor.executemany(
                    f"INSERT INTO {EvalResult._meta.db_table} (eval_run_id, case_id, repeat_index, split, run_id, "
                    "scores, passed, status, reason, expected_hash, score) "
                    "VALUES (%s, %s, 0, '', %s, %s, %s, %s, '', '', %s)",
                    [
                        (
                            eval_run.pk,
                            f"case-{i:06d}",
                            next_trace + i,
                            '[{"name": "exact_match", "value": %s, "error": null}]' % ("true" if ok else "false"),
                            ok,
                            "passed" if ok else "failed",
                            1.0 if ok else 0.0,
                        )
                        for i, ok in enumerate(passed)
                    ],
                )
            next_trace += n
        ids.append(eval_run.pk)
    return ids


def median_ms(
    call: Callable[[], object], repeat: int, before: Callable[[], object] | None = None
) -> tuple[float, float]:
    """Median wall time and median CPU time of this process (ms) over ``repeat`` calls. SQLite
    runs inside the process, so the CPU figure is the server's whole work; on a loaded machine
    the wall figure also holds the time spent waiting for a core."""
    walls, cpus = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        start, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs compared (default: %(default)s)")
    parser.add_argument("--cases", type=int, default=100_000, help="cases per run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="calls per figure (median; default: %(default)s)")
    parser.add_argument("--db", default=None, help="keep the database in this file and reuse it on the next run")
    parser.add_argument("--check", action="store_true", help="exit 1 when the cold summary page misses 1 s")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-compare-many-") as tmp:
        db_path = Path(args.db) if args.db else Path(tmp) / "bench.sqlite3"
        setup_django(db_path)
        from django.contrib.auth.models import Group, User
        from django.core.cache import cache
        from django.test import Client

        from apps.evals.models import EvalRun
        from apps.evals.queries.compare_many import compare_many_runs, load_runs

        existing = list(
            EvalRun.objects.filter(eval_set__name=SET_NAME, n_total=args.cases)
            .order_by("variant")
            .values_list("pk", flat=True)
        )
        if len(existing) == args.runs:
            ids = sorted(existing, key=lambda pk: int(EvalRun.objects.get(pk=pk).variant[1:]))
            print(f"reusing {db_path}")
        else:
            start = time.perf_counter()
            ids = populate(args.runs, args.cases)
            print(f"populated {args.runs} runs x {args.cases:,} results in {time.perf_counter() - start:.1f} s")

        user, _ = User.objects.get_or_create(username="bench")
        user.groups.add(Group.objects.get(name="member"))
        client = Client()
        client.force_login(user)
        url = f"/compare/?runs={','.join(ids)}"

        def get(path: str) -> None:
            response = client.get(path)
            assert response.status_code == 200, (response.status_code, response.content[:500])

        runs = load_runs(ids)
        figures = {
            "summary (cold)": median_ms(lambda: compare_many_runs(runs), args.repeat, cache.clear),
            "summary page (cold)": median_ms(lambda: get(url), args.repeat, cache.clear),
            "summary page (warm)": median_ms(lambda: get(url), args.repeat),
            "case table page (cold)": median_ms(
                lambda: get(f"/compare/cases/?runs={','.join(ids)}&page=3"), args.repeat, cache.clear
            ),
            "case table page (warm)": median_ms(
                lambda: get(f"/compare/cases/?runs={','.join(ids)}&page=4"), args.repeat
            ),
        }
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(
            f"{args.runs} runs x {args.cases:,} cases, median of {args.repeat}, target {TARGET_MS:.0f} ms "
            f"({os.cpu_count()} cores, load average {load:.1f}):"
        )
        for name, (wall, cpu) in figures.items():
            print(
                f"  {name:<22} wall {wall:8.1f} ms (ratio to target {wall / TARGET_MS:.2f})   "
                f"cpu {cpu:8.1f} ms (ratio {cpu / TARGET_MS:.2f})"
            )
        if args.check and figures["summary page (cold)"][0] > TARGET_MS:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
