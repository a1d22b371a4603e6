"""Benchmark: the case page's expected-vs-actual diff at any output size (repro bh-20).

For each scenario (values of a given size and kind), measures:

* ``diff``: :func:`evalcore.diff.diff_values` alone (the diff the pages show);
* ``case page``: server time of the case page (``evals:result``) through the Django test client;
* ``compare page``: the compare case page (``evals:compare_case``), which diffs A's output against B's.

Target: every page renders in < 300 ms, whatever the size (the diff falls back to lines, then
to no diff). Scenarios: bh-20's repeated lines with one changed line (6 KB to 5 MB), texts that
differ everywhere (the worst case of a diff algorithm), code against a dict (different
shapes), large JSON values (a few changed paths in 1 MB and 5 MB, an item inserted at the
front of a long array, two unrelated 1 MB objects, JSON text against an object), tool-call
lists and prose. Each figure is the median of ``--repeat`` warm calls. The mode the diff chose is printed.

Run: ``.venv/bin/python bench/bench_diff.py [--repeat R] [--check] [--only TEXT]``; ``--check``
exits 1 when a median misses the target. Uses a temporary SQLite database.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_MS = 300.0


def repeated(size: int) -> tuple[str, str]:
    """bh-20: ``ok`` lines, one ``FAIL`` line in the middle of the actual side."""
    n = size // 3
    return "ok\n" * n, "ok\n" * (n // 2) + "FAIL\n" + "ok\n" * (n // 2)


def churn(size: int) -> tuple[str, str]:
    """Two unrelated texts of short repeated words and lines: a diff's worst case."""
    rng = random.Random(size)

    def text() -> str:
        return "".join(rng.choice(("ok ", "no ", "ok\n", "x\n")) for _ in range(size // 3))

    return text(), text()


def scattered(size: int) -> tuple[str, str]:
    """Numbered log lines with 1 line in 20 changed."""
    rng = random.Random(size)
    lines = [f"step {i}: value {rng.randint(0, 99)}\n" for i in range(size // 20)]
    changed = [line if i % 20 else line.replace("value", "VALUE") for i, line in enumerate(lines)]
    return "".join(lines), "".join(changed)


def scenarios() -> list[tuple[str, Any, Any]]:
    rows: list[tuple[str, Any, Any]] = []
    for size in (6_000, 15_000, 30_000, 100_000, 300_000, 1_000_000, 5_000_000):
        rows.append((f"repeated lines {size // 1000} KB", *repeated(size)))
    for size in (6_000, 30_000, 100_000, 300_000):
        rows.append((f"churn {size // 1000} KB", *churn(size)))
    for size in (30_000, 300_000):
        rows.append((f"1 line in 20 changed {size // 1000} KB", *scattered(size)))
    code = "def f(x):\n    return x\n" * 2000
    rows.append(("dict vs code 40 KB", {"test": code, "entry_point": "f"}, code))
    rows.extend(json_scenarios())
    return rows


def records(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` records of about 200 bytes each (ids, names, tags, scores, a nested object)."""
    rng = random.Random(seed)
    return [
        {
            "id": f"r{i:06d}",
            "name": f"item {rng.randint(0, 10**6)}",
            "tags": [rng.choice(("a", "b", "c", "d")) for _ in range(3)],
            "score": round(rng.random(), 4),
            "where": {"city": rng.choice(("Paris", "Rome", "Oslo")), "n": rng.randint(0, 99)},
        }
        for i in range(n)
    ]


def json_scenarios() -> list[tuple[str, Any, Any]]:
    """Large JSON values: few changes, an insertion at the front, unrelated objects, JSON text,
    tool calls and prose."""
    rows: list[tuple[str, Any, Any]] = []
    for size_mb, n in ((1, 5_000), (5, 25_000)):
        expected = {"answer": {"city": "Paris", "sources": ["s1", "s2"]}, "records": records(n, 1)}
        actual = json.loads(json.dumps(expected))
        actual["answer"]["city"] = "Rome"
        actual["answer"]["sources"].append("s3")
        actual["records"][n // 2]["where"]["city"] = "Lyon"
        rows.append((f"JSON {size_mb} MB, 3 paths changed", expected, actual))
    items = records(5_000, 2)
    rows.append(("JSON array 1 MB, 1 inserted", items, [{"id": "new"}, *items]))
    rows.append(("JSON unrelated 1 MB", {"records": records(5_000, 3)}, {"records": records(5_000, 4)}))
    data = {"records": records(5_000, 5)}
    changed = json.loads(json.dumps(data))
    changed["records"][7]["score"] = 2.0
    rows.append(("JSON text vs object 1 MB", json.dumps(data), changed))
    calls = [{"name": f"tool_{i % 7}", "arguments": {"q": f"query {i}", "k": i}} for i in range(1_000)]
    other = [
        {**c, "arguments": {**c["arguments"], "k": c["arguments"]["k"] + (i % 50 == 0)}} for i, c in enumerate(calls)
    ]
    rows.append(("tool calls 1,000 calls", calls, other[:500] + other[501:]))
    rng = random.Random(6)
    words = ["the", "model", "answered", "city", "river", "capital", "because", "sources", "say", "it"]
    prose = " ".join(rng.choice(words) for _ in range(6_000))
    edited = " ".join(w if i % 40 else w.upper() for i, w in enumerate(prose.split(" ")))
    rows.append(("prose 40 KB, 1 word in 40", prose, edited))
    return rows


def setup_django(db_path: Path) -> None:
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def median_ms(call: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        response = call()
        samples.append((time.perf_counter() - start) * 1000)
        status = getattr(response, "status_code", 200)
        if status != 200:
            raise RuntimeError(f"request failed with {status}")
    return statistics.median(samples[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="exit 1 when a median misses the target")
    parser.add_argument("--only", default="", help="run only the scenarios whose name contains this text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.urls import reverse

        from evalcore.diff import diff_values
        from tests.apps.factories import make_eval_run, make_eval_set

        user = get_user_model().objects.create_superuser("bench", "bench@example.com", "x")
        client = Client()
        client.force_login(user)
        print(f"target: every page < {TARGET_MS:.0f} ms (median of {args.repeat} warm calls)")
        columns = ("diff ms", 8), ("case ms", 8), ("ratio", 6), ("compare ms", 10), ("ratio", 6)
        print(f"{'scenario':<30} {'mode':<10} " + " ".join(f"{title:>{width}}" for title, width in columns))
        missed = 0
        for i, (name, expected, actual) in enumerate(scenarios()):
            if args.only and args.only not in name:
                continue
            eval_set = make_eval_set(f"bench-diff-{i}", 1)
            eval_set.cases.update(expected=expected)
            run_a = make_eval_run(eval_set, [False], variant="a", outputs=[expected])
            run_b = make_eval_run(eval_set, [False], variant="b", outputs=[actual])
            result = run_b.results.get()
            mode = diff_values(expected, actual).mode
            diff_ms = median_ms(lambda e=expected, a=actual: diff_values(e, a), args.repeat)
            case_url = reverse("evals:result", args=[run_b.pk, result.pk])
            case_ms = median_ms(lambda u=case_url: client.get(u), args.repeat)
            query = {"a": run_a.pk, "b": run_b.pk, "case": "c0"}
            compare_ms = median_ms(lambda q=query: client.get(reverse("evals:compare_case"), q), args.repeat)
            missed += (case_ms > TARGET_MS) + (compare_ms > TARGET_MS)
            print(
                f"{name:<30} {mode:<10} {diff_ms:>8.1f} {case_ms:>8.1f} {case_ms / TARGET_MS:>6.2f}"
                f" {compare_ms:>10.1f} {compare_ms / TARGET_MS:>6.2f}",
                flush=True,
            )
        print("all pages within target" if not missed else f"{missed} page(s) over target")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
