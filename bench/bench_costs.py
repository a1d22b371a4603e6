"""Benchmark: cost and latency of a run of 100,000 cases (issue 27).

Builds one finished run of ``--cases`` results with their traces (an LLM target that reported its
tokens, a judge verdict with its tokens on every case, a wall and model time) into a temporary
SQLite file, then times, each the median of ``--repeat`` calls:

* ``costing``: :func:`apps.evals.results.costs.cost_new_results` on the whole run (what a run's
  end adds: read every result's scores and run row, write one cost row per result), its cost rows
  deleted before each call;
* ``figures``: :func:`apps.evals.queries.costs.cost_latency` for the run, as the run page, the
  leaderboard and the bake-off read it (the figures stored on the run when it was costed);
* ``aggregate``: :func:`apps.evals.results.cost_figures.aggregate_cost_latency`, the same figures
  computed from the cost rows (SQL aggregate and order statistics; part of ``costing``, and what
  a run without stored figures costs a reader);
* ``reference``: one SQL pass over every result of the run (``COUNT``, ``SUM(score)``), to state
  the figures as ratios to something measured on the same machine in the same run (machine speed
  varies about 2x between days).

Targets: costing under 5 s (50 µs per case), the figures under 200 ms, the aggregate under 1 s. Prints each figure, its
ratio to the target and to the reference. Run: ``.venv/bin/python bench/bench_costs.py
[--cases 100000] [--repeat 3] [--check]``; ``--check`` exits 1 when a figure misses its target.
"""

from __future__ import annotations

import argparse
import json
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

TARGETS_MS = {"costing": 5000.0, "figures": 200.0, "aggregate": 1000.0}


def setup_django(db_path: Path) -> None:
    """Point the settings at a database file and migrate it (before any model import)."""
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def populate(n: int, seed: int = 27) -> str:
    """One set and one finished run of ``n`` results (raw ``executemany`` inserts); its id."""
    from django.db import connection, transaction
    from django.utils import timezone

    from apps.evals.models import EvalResult, EvalRun, EvalSet
    from apps.traces.models import Run

    rng = random.Random(seed)
    now = timezone.now()
    with transaction.atomic():
        eval_set = EvalSet.objects.create(name="bench-costs", content_hash="bench")
        eval_run = EvalRun.objects.create(
            eval_set=eval_set, target_id="bench", split="all", status="finished", started=now, finished=now,
            n_total=n, n_done=n, model="gpt-4o-mini",
        )  # fmt: skip
        judge = {"judge_model": "gpt-4o-mini", "judge_calls": 1, "judge_tokens_in": 900, "judge_tokens_out": 120}
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {Run._meta.db_table} (id, run_id, trace_id, target_id, started, elapsed_ms, status, "
                "finish_reason, model, tokens_in, tokens_out, step_metrics, metadata, private) "
                "VALUES (%s, %s, %s, 'bench', %s, %s, 'ok', '', 'gpt-4o-mini', %s, %s, '{}', %s, FALSE)",
                [
                    (
                        i + 1,
                        f"{eval_run.pk}:{i}",
                        f"{eval_run.pk}:{i}",
                        now.isoformat(),
                        (wall := rng.lognormvariate(6.5, 0.5)),
                        rng.randint(200, 2000),
                        rng.randint(20, 400),
                        json.dumps({"usage": {"source": "reported", "model_ms": wall * 0.8, "cached_in": 0}}),
                    )
                    for i in range(n)
                ],
            )
            scores = json.dumps([{"name": "rubric_judge", "value": True, "passed": True, "metadata": judge}])
            cursor.executemany(
                f"INSERT INTO {EvalResult._meta.db_table} (eval_run_id, case_id, repeat_index, split, run_id, "
                "scores, passed, status, reason, expected_hash, score) "
                "VALUES (%s, %s, 0, '', %s, %s, TRUE, 'passed', '', '', 1.0)",
                [(eval_run.pk, f"case-{i:06d}", i + 1, scores) for i in range(n)],
            )
    return str(eval_run.pk)


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
    parser.add_argument("--cases", type=int, default=100_000, help="results in the run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="calls per figure (median; default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a figure misses its target")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-costs-") as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from django.db import connection

        from apps.evals.models import CaseCost, EvalResult, EvalRun
        from apps.evals.queries.costs import cost_latency
        from apps.evals.results.cost_figures import aggregate_cost_latency
        from apps.evals.results.costs import cost_new_results

        start = time.perf_counter()
        run_id = populate(args.cases)
        print(f"populated one run of {args.cases:,} results in {time.perf_counter() - start:.1f} s")

        def scan() -> None:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT COUNT(*), SUM(score) FROM {EvalResult._meta.db_table} WHERE eval_run_id = %s", [run_id]
                )
                cursor.fetchone()

        def clear() -> None:
            CaseCost.objects.filter(eval_run_id=run_id).delete()

        reference = median_ms(scan, args.repeat)
        blocks: list[dict[str, object] | None] = []
        costing = median_ms(lambda: blocks.append(cost_new_results(run_id)), args.repeat, clear)
        EvalRun.objects.filter(pk=run_id).update(summary=blocks[-1])  # as finish_eval_run stores it
        figures = {
            "costing": costing,
            "figures": median_ms(lambda: cost_latency([run_id]), args.repeat),
            "aggregate": median_ms(lambda: aggregate_cost_latency([run_id]), args.repeat),
        }
        got = cost_latency([run_id])[run_id]
        assert got.n_priced == args.cases and got.cost_per_case_usd is not None, got
        print(
            f"1 run x {args.cases:,} cases, median of {args.repeat}; reference (one SQL pass over every result) "
            f"{reference:.1f} ms:"
        )
        for name, ms in figures.items():
            target = TARGETS_MS[name]
            print(
                f"  {name:<8} {ms:8.1f} ms   target {target:.0f} ms   to target {ms / target:.2f}   "
                f"to reference {ms / reference:.1f}"
            )
        if args.check and any(figures[name] > TARGETS_MS[name] for name in figures):
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
