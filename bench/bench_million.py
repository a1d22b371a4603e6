"""Benchmark: issue 30 floor 5, the pages of 1,000,000-result runs in <= 100 ms server time.

Builds (inserts below the ORM: ``executemany`` / ``COPY``) one set of N cases and two finished runs of N
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
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from itertools import batched
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.db.models import Model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_portal import setup_django  # noqa: E402

TARGET_MS = 100.0
SET_NAME = "bench-million"


def _insert(model: type[Model], rows: Iterable[dict[str, Any]], *, ids: bool = False, chunk: int = 20_000) -> None:
    """Insert rows of ``model`` below the ORM (every concrete column; a field not given takes its
    model default), as ``executemany`` on SQLite and ``COPY`` on PostgreSQL: the ORM's
    ``bulk_create`` of 5 million rows takes most of an hour on a busy machine."""
    from django.db import connection

    fields = [f for f in model._meta.concrete_fields if ids or not f.primary_key]  # ids: the rows give theirs
    columns = [str(f.column) for f in fields]
    json_fields = {f.attname for f in fields if "JSON" in type(f).__name__}
    postgres = connection.vendor == "postgresql"
    if postgres:
        from psycopg.types.json import Jsonb

    def prep(field: Any, value: Any) -> Any:
        if value is None:
            return None
        if field.attname in json_fields:  # Django stores json.dumps (SQLite) / Jsonb (psycopg)
            return Jsonb(value) if postgres else json.dumps(value)
        if isinstance(value, datetime):
            return field.get_db_prep_save(value, connection)
        return value

    defaults = [prep(f, f.get_default()) for f in fields]
    positions = {f.attname: i for i, f in enumerate(fields)}

    def row_values(row: dict[str, Any]) -> tuple[Any, ...]:
        values = list(defaults)
        for name, value in row.items():
            at = positions[name]
            values[at] = prep(fields[at], value)
        return tuple(values)

    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            raw = cursor.cursor
            with raw.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row_values(row))
        else:
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
            for batch in batched(rows, chunk):
                cursor.executemany(sql, [row_values(row) for row in batch])


def populate(n: int, seed: int = 11) -> tuple[str, str]:
    """One set of ``n`` cases and two finished runs over it (A, B), the same rows as
    ``bench_portal.populate`` writes (B differs from A on about 10% of cases), inserted below the
    ORM; returns (a_id, b_id)."""
    import random

    from django.core.management.color import no_style
    from django.db import connection, transaction
    from django.utils import timezone

    from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
    from apps.traces.models import Run
    from evalcore.serial import to_record
    from evalcore.types import Score

    rng = random.Random(seed)
    now = timezone.now()
    splits = ("train", "dev", "test")
    with transaction.atomic():
        eval_set = EvalSet.objects.create(name=SET_NAME, content_hash="bench")
        _insert(
            EvalCase,
            (
                {
                    "eval_set_id": eval_set.pk,
                    "case_id": f"case-{i:06d}",
                    "input": {"question": f"question {i}"},
                    "expected": str(i),
                    "has_expected": True,
                    "tags": ["bench"],
                    "split": splits[i % 3],
                    "position": i,
                }
                for i in range(n)
            ),
        )
    passed_a = [rng.random() < 0.7 for _ in range(n)]
    passed_b = [(not p) if rng.random() < 0.1 else p for p in passed_a]
    scores = {ok: [to_record(Score("exact_match", ok, passed=ok, explanation="compared"))] for ok in (True, False)}
    ids = []
    for label, passed in (("A", passed_a), ("B", passed_b)):
        with transaction.atomic():
            eval_run = EvalRun.objects.create(
                eval_set=eval_set,
                target_id="bench",
                variant=label,
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
            first_run = (Run.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
            _insert(
                Run,
                (
                    {
                        "id": first_run + i,
                        "run_id": f"{eval_run.pk}:{i}",
                        "trace_id": f"{eval_run.pk}:{i}",
                        "target_id": "bench",
                        "started": now,
                        "elapsed_ms": rng.uniform(5, 500),
                        "status": "ok",
                        "final_answer": f"answer {i}",
                        "tokens_in": 100,
                        "tokens_out": 20,
                    }
                    for i in range(n)
                ),
                ids=True,
            )
            first_result = (EvalResult.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
            _insert(
                EvalResult,
                (
                    {
                        "id": first_result + i,
                        "eval_run_id": eval_run.pk,
                        "case_id": f"case-{i:06d}",
                        "split": splits[i % 3],
                        "run_id": first_run + i,
                        "scores": scores[ok],
                        "passed": ok,
                        "status": "passed" if ok else "failed",
                        "score": float(ok),
                    }
                    for i, ok in enumerate(passed)
                ),
                ids=True,
            )
            if connection.vendor == "postgresql":  # the explicit ids moved past the sequences
                with connection.cursor() as cursor:
                    for statement in connection.ops.sequence_reset_sql(no_style(), [Run, EvalResult]):
                        cursor.execute(statement)
        ids.append(eval_run.pk)
    return ids[0], ids[1]


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
            run_a, run_b = populate(args.cases)
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
