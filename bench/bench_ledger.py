"""Benchmark: what the judge ledger adds to the result writer (issue 28: ledger rows are written in
the result writer's own batches, no commit of their own).

Builds ``--cases`` finished cases (a no-op target's run records) each with ``--scorers`` scorers'
scores (an exact match, and a rubric judge verdict with five axes when ``--scorers`` >= 2), then
writes them through :class:`apps.evals.results.batches.BatchWriter` in batches of 500 inside
transactions on a temporary SQLite file, twice on fresh eval runs: once as the writer does (the
ledger included), once with the ledger hook replaced by a no-op. Prints both times (median of
``--repeat``), the ledger's share and its cost per case. Target: the ledger adds at most 25% to
the writer's time per case. Run: ``.venv/bin/python bench/bench_ledger.py [--cases 10000]
[--scorers 2] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from machine_speed import machine_line  # noqa: E402

TARGET_SHARE = 0.25
BATCH = 500


def setup_django(db_path: Path) -> None:
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def results(n: int, scorers: int, run_id: str) -> list[Any]:
    from evalcore.judge import AXES
    from evalcore.types import Case, CaseResult, RunRecord, Score

    out = []
    for i in range(n):
        scores = [Score("exact_match", i % 3 != 0)]
        if scorers >= 2:
            meta = {
                "judge_model": "m",
                "judge_calls": 1,
                "judge_tokens_in": 40,
                "judge_tokens_out": 20,
                "judge_ms": 3.0,
            }
            scores.append(Score("rubric_judge", i % 2 == 0, metadata=meta))
            scores += [Score(f"rubric_judge.{a}", 0.8, passed=True) for a in AXES]
        rid = f"{run_id}:c{i}"
        run = RunRecord(case_id=f"c{i}", run_id=rid, trace_id=rid, output="x", elapsed_ms=0.1)
        out.append(CaseResult(case=Case(id=f"c{i}", input="q", expected="x", split="dev"), run=run, scores=scores))
    return out


def write_all(with_ledger: bool, n: int, scorers: int) -> float:
    from django.db import transaction

    from apps.evals.models import EvalRun, EvalSet
    from apps.evals.results import batches

    eval_set = EvalSet.objects.get_or_create(name="bench-ledger", defaults={"content_hash": "b"})[0]
    specs = [{"name": "exact_match", "args": {}}] + (
        [{"name": "rubric_judge", "args": {"judge_model": "m"}}] if scorers >= 2 else []
    )
    run = EvalRun.objects.create(eval_set=eval_set, target_id="noop", split="dev", status="running", scorer_specs=specs)
    items = results(n, scorers, run.pk)
    original = getattr(batches, "write_ledger")  # noqa: B009 - swapped below for the run without it
    if not with_ledger:
        setattr(batches, "write_ledger", lambda *a, **k: 0)  # noqa: B010
    try:
        writer = batches.BatchWriter(target_id="noop", eval_run_id=run.pk, rescore=False)
        started = time.perf_counter()
        for start in range(0, n, BATCH):
            with transaction.atomic():
                writer.write([], items[start : start + BATCH])
        return time.perf_counter() - started
    finally:
        setattr(batches, "write_ledger", original)  # noqa: B010


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--scorers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        print(machine_line())
        with_ledger, without = [], []
        for _ in range(args.repeat):
            without.append(write_all(False, args.cases, args.scorers))
            with_ledger.append(write_all(True, args.cases, args.scorers))
        a, b = statistics.median(with_ledger), statistics.median(without)
        share = (a - b) / b
        print(f"writer without ledger: {b:.3f} s for {args.cases} cases ({b / args.cases * 1e6:.0f} µs/case)")
        print(
            f"writer with ledger:    {a:.3f} s ({a / args.cases * 1e6:.0f} µs/case; "
            f"ledger rows: {args.scorers} per case)"
        )
        print(
            f"ledger adds {share:+.1%} ({(a - b) / args.cases * 1e6:.0f} µs/case); target <= {TARGET_SHARE:.0%}: "
            f"ratio {TARGET_SHARE / share if share > 0 else float('inf'):.2f}"
        )


if __name__ == "__main__":
    main()
