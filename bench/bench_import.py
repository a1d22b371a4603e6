"""Benchmark: load a generated 100,000-case JSONL case bank.

Prints the load rate in cases/s against the target (>= 20,000 cases/s), and the peak memory of
loading, measured two ways: the growth of the process's peak RSS during the timed load
(``resource.getrusage``, kilobytes on Linux) and the peak of Python allocations in a separate,
slower run under ``tracemalloc``.

Run: ``.venv/bin/python bench/bench_import.py [--cases N] [--check]``; ``--check`` exits 1 when
the rate misses the target.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalcore.loaders import load_cases

TARGET_RATE = 20_000
"""Cases per second the loader must sustain."""

_WORDS = "alpha beta gamma delta retrieval agent citation answer question context tool model".split()


def generate(path: Path, count: int, seed: int = 7) -> int:
    """Write ``count`` realistic cases (text input, mixed expected, tags, some explicit splits).

    Returns:
        The file size in bytes.
    """
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(count):
            record: dict[str, object] = {
                "id": f"case-{index:06d}",
                "input": " ".join(rng.choices(_WORDS, k=rng.randint(8, 30))) + "?",
                "tags": rng.sample(_WORDS, k=rng.randint(0, 3)),
                "metadata": {"source": "bench", "difficulty": rng.random(), "row": index},
            }
            if index % 5:
                record["expected"] = rng.choice([str(rng.randint(0, 10_000)), ["doc-1", "doc-7"], None])
            if index % 3 == 0:
                record["split"] = rng.choice(["train", "dev", "test"])
            handle.write(json.dumps(record) + "\n")
    return path.stat().st_size


def _peak_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main(argv: list[str] | None = None) -> int:
    """Generate, load, report. Returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000, help="number of cases to generate")
    parser.add_argument("--check", action="store_true", help="exit 1 if the rate misses the target")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        path = Path(tmp) / "bench.jsonl"
        size = generate(path, args.cases)
        print(f"generated {args.cases:,} cases, {size / 1e6:.1f} MB")

        gc.collect()
        rss_before = _peak_rss_kb()
        start = time.perf_counter()
        bank = load_cases(path)
        elapsed = time.perf_counter() - start
        rss_growth = _peak_rss_kb() - rss_before
        assert len(bank.cases) == args.cases
        rate = len(bank.cases) / elapsed
        del bank
        gc.collect()

        tracemalloc.start()
        load_cases(path)
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

    ratio = rate / TARGET_RATE
    print(f"load: {elapsed:.2f} s, {rate:,.0f} cases/s, target {TARGET_RATE:,} cases/s, ratio {ratio:.2f}x")
    traced_mb = traced_peak / 2**20
    print(f"peak memory: RSS grew {rss_growth / 1024:.0f} MB; Python allocations peaked at {traced_mb:.0f} MB")
    ok = rate >= TARGET_RATE
    print("PASS" if ok else "BELOW TARGET")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
