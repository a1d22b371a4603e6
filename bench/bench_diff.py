"""Benchmark: the case page's expected-vs-actual diff at any output size (repro bh-20).

For each scenario (texts of a given size and kind), measures:

* ``diff``: :func:`evalcore.diff.diff_texts` alone;
* ``case page``: server time of the case page (``evals:result``) through the Django test client;
* ``compare page``: the compare case page (``evals:compare_case``), which diffs A's output against B's.

Target: every page renders in < 300 ms, whatever the size (the diff falls back to lines, then
to no diff). Scenarios: bh-20's repeated lines with one changed line (6 KB to 5 MB), texts that
differ everywhere (the worst case of a diff algorithm), and code against a dict (different
shapes). Each figure is the median of ``--repeat`` warm calls. The mode the diff chose is printed.

Run: ``.venv/bin/python bench/bench_diff.py [--repeat R] [--check]``; ``--check`` exits 1 when a
median misses the target. Uses a temporary SQLite database.
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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.urls import reverse

        from evalcore.diff import diff_texts
        from tests.apps.factories import make_eval_run, make_eval_set

        user = get_user_model().objects.create_superuser("bench", "bench@example.com", "x")
        client = Client()
        client.force_login(user)
        print(f"target: every page < {TARGET_MS:.0f} ms (median of {args.repeat} warm calls)")
        columns = ("diff ms", 8), ("case ms", 8), ("ratio", 6), ("compare ms", 10), ("ratio", 6)
        print(f"{'scenario':<30} {'mode':<8} " + " ".join(f"{title:>{width}}" for title, width in columns))
        missed = 0
        for i, (name, expected, actual) in enumerate(scenarios()):
            eval_set = make_eval_set(f"bench-diff-{i}", 1)
            eval_set.cases.update(expected=expected)
            run_a = make_eval_run(eval_set, [False], variant="a", outputs=[expected])
            run_b = make_eval_run(eval_set, [False], variant="b", outputs=[actual])
            result = run_b.results.get()
            mode = diff_texts(expected, actual).mode
            diff_ms = median_ms(lambda e=expected, a=actual: diff_texts(e, a), args.repeat)
            case_url = reverse("evals:result", args=[run_b.pk, result.pk])
            case_ms = median_ms(lambda u=case_url: client.get(u), args.repeat)
            query = {"a": run_a.pk, "b": run_b.pk, "case": "c0"}
            compare_ms = median_ms(lambda q=query: client.get(reverse("evals:compare_case"), q), args.repeat)
            missed += (case_ms > TARGET_MS) + (compare_ms > TARGET_MS)
            print(
                f"{name:<30} {mode:<8} {diff_ms:>8.1f} {case_ms:>8.1f} {case_ms / TARGET_MS:>6.2f}"
                f" {compare_ms:>10.1f} {compare_ms / TARGET_MS:>6.2f}",
                flush=True,
            )
        print("all pages within target" if not missed else f"{missed} page(s) over target")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
