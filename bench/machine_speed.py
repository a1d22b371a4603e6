"""How fast this machine runs Python now: printed at the top of the benches so that figures taken
on different days (or machines) can be read against each other.

Machines of the same kind here have given the same commit's figures up to 2x apart on different
days (start-up 0.37 s one day, 0.69-0.88 s another; docs/scale.md): a figure means little without
the speed of the machine it was taken on.
"""

from __future__ import annotations

import os
import time


def python_loop_ns(iterations: int = 2_000_000, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timings of ``for i in range(iterations): total += i``, in
    nanoseconds per iteration."""
    best = float("inf")
    for _ in range(repeat):
        total = 0
        started = time.perf_counter()
        for i in range(iterations):
            total += i
        best = min(best, time.perf_counter() - started)
    return best / iterations * 1e9


def machine_line() -> str:
    """One line: cores, the 1-minute load average and the loop's speed (see :func:`python_loop_ns`)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"machine: {os.cpu_count()} cores, load average {load:.2f}, a plain Python loop "
        f"{python_loop_ns():.0f} ns/iteration (figures scale with it; see docs/scale.md)"
    )


if __name__ == "__main__":
    print(machine_line())
