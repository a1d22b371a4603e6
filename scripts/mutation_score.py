"""Print the mutation score per module from a finished ``mutmut run`` (``make mutation``).

Reads mutmut 3's per-file results (``mutants/<path>.meta``: JSON, ``exit_code_by_key`` maps each
mutant to the exit code of its test run) and prints one line per module and a total:
killed (tests failed or timed out; the timeouts also counted apart), survived, no tests, and the score
``killed / (killed + survived + no tests)``. Mutants with no test covering them count against
the score. Exits 1 when the total is below ``--min`` (default 85).

Usage: ``python scripts/mutation_score.py [--min 85] [--survivors]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

KILLED = {1, 3, 36, 37, 24, -24, 152, 255}  # test failure, pytest error, timeout, type check
TIMEOUT = {36, 24, -24, 152, 255}  # mutmut's timeouts (wall clock, or the CPU limit: SIGXCPU)
SURVIVED = {0}
NO_TESTS = {5, 33}


def module_name(meta: Path, root: Path) -> str:
    """``mutants/evalcore/stats.py.meta`` -> ``evalcore/stats.py``."""
    return str(meta.relative_to(root))[: -len(".meta")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("mutants"))
    parser.add_argument("--min", type=float, default=85.0, help="lowest acceptable total score (percent)")
    parser.add_argument("--survivors", action="store_true", help="list surviving mutants")
    args = parser.parse_args(argv)
    metas = sorted(args.root.rglob("*.py.meta"))
    if not metas:
        print(f"no mutmut results under {args.root}/: run `make mutation` first", file=sys.stderr)
        return 2
    total: Counter[str] = Counter()
    survivors: list[str] = []
    print(f"{'module':44} {'mutants':>7} {'killed':>7} {'timeout':>7} {'survived':>8} {'no tests':>8} {'score':>7}")
    for meta in metas:
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        counts: Counter[str] = Counter()
        for name, code in codes.items():
            kind = (
                "killed"
                if code in KILLED
                else "survived"
                if code in SURVIVED
                else "no_tests"
                if code in NO_TESTS
                else "skipped"
                if code == 34
                else "not_checked"
                if code is None
                else "suspicious"
            )
            counts[kind] += 1
            counts["timeout"] += code in TIMEOUT
            if kind in ("survived", "no_tests"):
                survivors.append(f"{name} ({kind.replace('_', ' ')})")
        if not codes:
            continue
        total.update(counts)
        print(line(module_name(meta, args.root), counts))
    print(line("TOTAL", total))
    if args.survivors:
        print("\n".join(["", "surviving mutants (`mutmut show NAME` prints the diff):", *survivors]))
    return 0 if score(total) >= args.min else 1


def score(counts: Counter[str]) -> float:
    """Killed over killed + survived + no tests, in percent (0 when nothing was tested)."""
    tested = counts["killed"] + counts["survived"] + counts["no_tests"]
    return 100.0 * counts["killed"] / tested if tested else 0.0


def line(name: str, counts: Counter[str]) -> str:
    n = sum(counts.values()) - counts["timeout"]  # the timeouts are among the killed
    extra = "".join(
        f"  {counts[k]} {k.replace('_', ' ')}" for k in ("not_checked", "suspicious", "skipped") if counts[k]
    )
    return (
        f"{name:44} {n:7} {counts['killed']:7} {counts['timeout']:7} {counts['survived']:8} {counts['no_tests']:8} "
        f"{score(counts):6.1f}%{extra}"
    )


if __name__ == "__main__":
    sys.exit(main())
