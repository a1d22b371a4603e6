"""Benchmark: a set's leaderboard with many runs (issue 27: "fast with many runs").

Builds the data once into a temporary SQLite file: one set, ``--variants`` (target, variant)
pairs, each with ``--older`` finished runs (summaries only, no results: the query must pass them
over) and a latest finished run of ``--cases`` results with traces; every other latest run used
the target cache (``config.cache_target``, 30% of its cases marked as hits; their cached count
and called cases' wall time stored as a run's end stores them). No run has cost rows, so the board
reads the results of the runs without the cache for their latency (the path of runs stored before
costs existed: the worst case). Then times, each the median of ``--repeat`` calls:

* ``leaderboard()``: :func:`apps.evals.queries.leaderboard.leaderboard` (the query for the latest
  runs, the cost / latency interface, the grouped aggregate over the cached runs' results);
* ``board page``: ``GET /sets/ID/leaderboard/?split=all`` through the Django test client, cold
  (the cache cleared first) and warm (the cached runs' aggregate kept while they do not change);
* ``API``: ``GET /api/eval/sets/ID/leaderboard?split=all``, cold.

Target: 1 s of server time. Prints each figure and its ratio to the target, and, as the machine's
speed varies about 2x between days, the ratio to a reference measured in the same run (one SQL
pass summing the wall time of every result, joined to its run row). Run:
``.venv/bin/python bench/bench_leaderboard.py [--variants 10] [--older 40] [--cases 100000]
[--repeat 3] [--db PATH] [--check]``.
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
sys.path.insert(0, str(ROOT / "bench"))

from machine_speed import machine_line  # noqa: E402

TARGET_MS = 1000.0
SET_NAME = "bench-leaderboard"


def setup_django(db_path: Path) -> None:
    """Point the settings at a database file and migrate it (before any model import)."""
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def populate(n_variants: int, n_older: int, n: int, seed: int = 27) -> int:
    """The set, its runs and the latest runs' results (raw ``executemany`` inserts); its id."""
    from datetime import timedelta

    from django.db import connection, transaction
    from django.utils import timezone

    from apps.evals.models import EvalResult, EvalRun, EvalSet
    from apps.evals.runs.target_cache import store_cache_figures
    from apps.traces.models import Run

    rng = random.Random(seed)
    now = timezone.now()
    summary = {"metrics": {"exact_match": {"n": n, "cases": n, "mean": 0.5, "low": 0.49, "high": 0.51}}}
    with transaction.atomic():
        eval_set = EvalSet.objects.create(name=SET_NAME, content_hash="bench")
    next_trace = (Run.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    for v in range(n_variants):
        with transaction.atomic():
            for k in range(n_older):
                EvalRun.objects.create(
                    eval_set=eval_set,
                    target_id="bench",
                    variant=f"v{v}",
                    split="all",
                    status="finished",
                    started=now - timedelta(days=k + 1),
                    finished=now - timedelta(days=k + 1),
                    n_total=n,
                    n_done=n,
                    n_passed=n // 2,
                    n_failed=n - n // 2,
                    summary=summary,
                )
            cached = v % 2 == 1
            share = 0.3 + 0.04 * v
            passed = [rng.random() < share for _ in range(n)]
            eval_run = EvalRun.objects.create(
                eval_set=eval_set,
                target_id="bench",
                variant=f"v{v}",
                split="all",
                model=f"model-{v}",
                status="finished",
                started=now,
                finished=now,
                n_total=n,
                n_done=n,
                n_passed=sum(passed),
                n_failed=n - sum(passed),
                summary=summary,
                config={"cache_target": cached},
            )
            hit = '{"target_cache": {"hit": true}}'
            with connection.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {Run._meta.db_table} (id, run_id, trace_id, target_id, started, elapsed_ms, status, "
                    "finish_reason, model, step_metrics, metadata, private) "
                    "VALUES (%s, %s, %s, 'bench', %s, %s, 'ok', '', '', '{}', %s, FALSE)",
                    [
                        (
                            next_trace + i,
                            f"{eval_run.pk}:{i}",
                            f"{eval_run.pk}:{i}",
                            now.isoformat(),
                            rng.uniform(50, 900),
                            hit if cached and rng.random() < 0.3 else "{}",
                        )
                        for i in range(n)
                    ],
                )
                cursor.executemany(
                    f"INSERT INTO {EvalResult._meta.db_table} (eval_run_id, case_id, repeat_index, split, run_id, "
                    "scores, passed, status, reason, expected_hash, score) "
                    "VALUES (%s, %s, 0, '', %s, '[]', %s, %s, '', '', %s)",
                    [
                        (eval_run.pk, f"case-{i:06d}", next_trace + i, ok, "passed" if ok else "failed", float(ok))
                        for i, ok in enumerate(passed)
                    ],
                )
            next_trace += n
        if cached:  # as the run's end does (the eval_run_finished listener)
            store_cache_figures(None, eval_run_id=eval_run.pk, status="finished")
    return eval_set.pk


def median_ms(call: Callable[[], object], repeat: int, before: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=10, help="(target, variant) pairs (default: %(default)s)")
    parser.add_argument("--older", type=int, default=40, help="older finished runs per pair (default: %(default)s)")
    parser.add_argument("--cases", type=int, default=100_000, help="cases per latest run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="calls per figure (median; default: %(default)s)")
    parser.add_argument("--db", default=None, help="keep the database in this file and reuse it on the next run")
    parser.add_argument("--check", action="store_true", help="exit 1 when the board page misses 1 s")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-leaderboard-") as tmp:
        db_path = Path(args.db) if args.db else Path(tmp) / "bench.sqlite3"
        setup_django(db_path)
        from django.contrib.auth.models import Group, User
        from django.core.cache import cache
        from django.db import connection
        from django.test import Client

        from apps.evals.models import EvalResult, EvalSet
        from apps.evals.queries.leaderboard import leaderboard
        from apps.traces.models import Run

        eval_set = EvalSet.objects.filter(name=SET_NAME).first()
        if eval_set is not None:
            print(f"reusing {db_path}")
        else:
            start = time.perf_counter()
            populate(args.variants, args.older, args.cases)
            eval_set = EvalSet.objects.get(name=SET_NAME)
            total = args.variants * (args.older + 1)
            took = time.perf_counter() - start
            print(f"populated {total} runs ({args.variants} x {args.cases:,} results) in {took:.1f} s")

        user, _ = User.objects.get_or_create(username="bench")
        user.groups.add(Group.objects.get(name="viewer"))
        client = Client()
        client.force_login(user)

        def get(path: str) -> None:
            response = client.get(path)
            assert response.status_code == 200, (response.status_code, response.content[:500])

        def scan() -> None:  # the floor: one pass over every latest run's cases, joined to their run rows
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT SUM(t.elapsed_ms) FROM {EvalResult._meta.db_table} r "
                    f"JOIN {Run._meta.db_table} t ON t.id = r.run_id"
                )
                cursor.fetchone()

        board = leaderboard(eval_set, "all")
        assert len(board.rows) == args.variants, len(board.rows)
        print(machine_line())
        reference = median_ms(scan, args.repeat)
        page = f"/sets/{eval_set.pk}/leaderboard/?split=all"
        api = f"/api/eval/sets/{eval_set.pk}/leaderboard?split=all"
        figures = {
            "leaderboard() (cold)": median_ms(lambda: leaderboard(eval_set, "all"), args.repeat, cache.clear),
            "board page (cold)": median_ms(lambda: get(page), args.repeat, cache.clear),
            "board page (warm)": median_ms(lambda: get(page), args.repeat),
            "API (cold)": median_ms(lambda: get(api), args.repeat, cache.clear),
        }
        print(
            f"{args.variants} variants x {args.older + 1} runs, latest {args.cases:,} cases each, "
            f"median of {args.repeat}, target {TARGET_MS:.0f} ms; reference (one SQL pass over every result) "
            f"{reference:.1f} ms:"
        )
        for name, ms in figures.items():
            print(f"  {name:<22} {ms:8.1f} ms   to target {ms / TARGET_MS:.2f}   to reference {ms / reference:.2f}")
        if args.check and figures["board page (cold)"] > TARGET_MS:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
