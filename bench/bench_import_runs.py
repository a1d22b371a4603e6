"""Benchmark: importing another tool's results (``evalsite import-run``, issue 29) against the floor
of writing the same results.

Writes a promptfoo results file (results version 3) of ``--tests`` tests x 2 providers, each
result with three assertions (``contains``, ``llm-rubric``, ``latency``), then on a temporary
SQLite file times (median of ``--repeat``, each on a fresh set):

* **import**: :func:`apps.evals.runs.run_import.import_peer_file` (read, match, create the
  cases, two runs, every result, its RunSource) in its one transaction;
* **floor**: :class:`apps.evals.results.batches.BatchWriter` writing the same number of results
  with three scores each and a two-event trace each (the import's shape), in one transaction:
  what any run's results cost to store.

Prints both, per result, and the ratio. Target: the import at most 3x the floor (reading,
matching and the set's new version on top of storing). Run:
``.venv/bin/python bench/bench_import_runs.py [--tests 2000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
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

TARGET_RATIO = 3.0
PROVIDERS = ("openai:gpt-5", "openai:gpt-5-mini")


def setup_django(db_path: Path) -> None:
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def results_file(path: Path, tests: int, salt: str) -> None:
    """A promptfoo v3 results file: ``tests`` tests x 2 providers, three assertions each."""
    rows = []
    for t in range(tests):
        for p, provider in enumerate(PROVIDERS):
            asserts = [
                {"type": "contains", "value": "echo"},
                {"type": "llm-rubric", "value": "Do not apologize"},
                {"type": "latency", "threshold": 3000},
            ]
            passed = [t % 3 != 0, True, (t + p) % 4 != 0]
            rows.append(
                {
                    "id": f"{salt}-{t}-{p}",
                    "promptIdx": p,
                    "testIdx": t,
                    "provider": {"id": provider, "label": ""},
                    "prompt": {"raw": f"Q{t}", "label": "Answer: {{q}}"},
                    "vars": {"q": f"question {salt} {t}"},
                    "testCase": {"vars": {"q": f"question {salt} {t}"}, "assert": asserts},
                    "response": {"output": f"echo {t}", "tokenUsage": {"prompt": 20, "completion": 5}},
                    "latencyMs": 1200 + t % 2000,
                    "cost": 0.0001,
                    "success": all(passed),
                    "score": sum(passed) / 3,
                    "namedScores": {},
                    "failureReason": 0 if all(passed) else 1,
                    "gradingResult": {
                        "pass": all(passed),
                        "score": sum(passed) / 3,
                        "reason": "",
                        "componentResults": [
                            {"pass": ok, "score": float(ok), "reason": "r", "assertion": a}
                            for ok, a in zip(passed, asserts, strict=True)
                        ],
                    },
                }
            )
    doc = {
        "evalId": f"eval-{salt}",
        "results": {"version": 3, "timestamp": "2026-12-01T10:00:00Z", "prompts": [], "results": rows},
        "config": {"description": f"bench {salt}"},
        "metadata": {"promptfooVersion": "0.118.10"},
    }
    path.write_text(json.dumps(doc))


def floor(n: int, salt: str) -> float:
    """Seconds to write ``n`` results with three scores each through the BatchWriter."""
    from django.db import transaction

    from apps.evals.models import EvalRun, EvalRunStatus, EvalSet
    from apps.evals.results.batches import BatchWriter
    from evalcore.tracing import SPAN_BEGIN, SPAN_END, TraceEvent
    from evalcore.types import Case, CaseResult, RunRecord, Score

    eval_set = EvalSet.objects.create(name=f"floor {salt}")
    run = EvalRun.objects.create(eval_set=eval_set, target_id="t", split="all", status=EvalRunStatus.RUNNING)
    out: list[Any] = []
    events: list[Any] = []
    for i in range(n):
        rid = f"{run.pk}:c{i}"
        span = {"span_id": "s0", "parent_span_id": None, "kind": "invoke_agent"}
        events.append(TraceEvent(rid, rid, 0, 0.0, SPAN_BEGIN, "t", dict(span)))
        events.append(TraceEvent(rid, rid, 1, 1.0, SPAN_END, "t", {**span, "status": "ok"}))
        record = RunRecord(case_id=f"c{i}", run_id=f"{run.pk}:c{i}", trace_id=f"{run.pk}:c{i}", output=f"echo {i}")
        scores = [Score("contains", i % 3 != 0), Score("llm-rubric", True), Score("latency", i % 4 != 0)]
        out.append(CaseResult(case=Case(id=f"c{i}", input=f"q{i}"), run=record, scores=scores))
    writer = BatchWriter(target_id="t", eval_run_id=run.pk, rescore=False)
    started = time.perf_counter()
    with transaction.atomic():
        for start in range(0, n, 200):
            writer.write(events[2 * start : 2 * (start + 200)], out[start : start + 200])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from apps.evals.runs.run_import import import_peer_file

        n = args.tests * len(PROVIDERS)
        imports, floors = [], []
        for r in range(args.repeat):
            path = Path(tmp) / f"results-{r}.json"
            results_file(path, args.tests, f"r{r}")
            started = time.perf_counter()
            done = import_peer_file(path)
            imports.append(time.perf_counter() - started)
            assert sum(run.eval_run.n_done for run in done.runs) == n
            floors.append(floor(n, f"r{r}"))
        imp, flo = statistics.median(imports), statistics.median(floors)
        ratio = imp / flo
        print(machine_line())
        print(
            f"promptfoo results file, {args.tests} tests x {len(PROVIDERS)} providers = {n} results, 3 assertions each"
        )
        print(f"import-run     {imp:7.2f} s  ({imp / n * 1000:.3f} ms/result)")
        print(f"writer floor   {flo:7.2f} s  ({flo / n * 1000:.3f} ms/result)")
        verdict = "OK" if ratio <= TARGET_RATIO else "OVER"
        print(f"ratio import/floor {ratio:.2f} (target <= {TARGET_RATIO:.1f}): {verdict}")


if __name__ == "__main__":
    main()
