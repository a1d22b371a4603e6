"""Myers' O((N+M)·D) shortest edit script (Myers 1986), with a hard step budget.

Used by :mod:`evalcore.diff` (text, prose, JSON lists and tool calls); the common prefix and
suffix are cut off before the search, and a search past its budget gives up (``None``) instead
of running long.
"""

from __future__ import annotations

from typing import Any


class StepBudget:
    """The steps a diff may still spend (shared by its line and word passes)."""

    __slots__ = ("left",)

    def __init__(self, steps: int) -> None:
        self.left = steps


Opcode = tuple[str, int, int, int, int]


def _myers_matches(a: list[Any], b: list[Any], budget: StepBudget) -> list[tuple[int, int]] | None:
    """Matched index pairs of a shortest edit script (Myers 1986), or None past the budget."""
    n, m = len(a), len(b)
    v: dict[int, int] = {1: 0}
    trace: list[dict[int, int]] = []
    for d in range(n + m + 1):
        trace.append(dict(v))
        budget.left -= d + 1
        if budget.left < 0:
            return None
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[k - 1] < v[k + 1]):
                x = v[k + 1]
            else:
                x = v[k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            budget.left -= x - start
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m)
        if budget.left < 0:
            return None
    return _backtrack(trace, n, m)  # pragma: no cover - the loop always ends at d <= n + m


def _backtrack(trace: list[dict[int, int]], n: int, m: int) -> list[tuple[int, int]]:
    x, y = n, m
    matches: list[tuple[int, int]] = []
    for d in range(len(trace) - 1, -1, -1):
        v = trace[d]
        k = x - y
        prev_k = k + 1 if k == -d or (k != d and v.get(k - 1, -1) < v.get(k + 1, -1)) else k - 1
        prev_x = v.get(prev_k, 0)
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            matches.append((x, y))
        x, y = prev_x, prev_y
    matches.reverse()
    return matches


def common_prefix(a: Any, b: Any) -> int:
    """Length of the common prefix of two sequences (binary search over C-speed slice compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def common_suffix(a: Any, b: Any, limit: int) -> int:
    """Length of the common suffix of two sequences, at most ``limit``."""
    low, high = 0, limit
    n, m = len(a), len(b)
    while low < high:
        mid = (low + high + 1) // 2
        if a[n - mid :] == b[m - mid :]:
            low = mid
        else:
            high = mid - 1
    return low


def opcodes(a: list[Any], b: list[Any], budget: StepBudget | None) -> list[Opcode] | None:
    """difflib-style opcodes between two sequences, or None when the budget ran out.

    Without a budget, only the common prefix and suffix are found; the middle is one change."""
    n, m = len(a), len(b)
    head = common_prefix(a, b)
    tail = common_suffix(a, b, min(n, m) - head)
    middle: list[Opcode] = []
    a_mid, b_mid = a[head : n - tail], b[head : m - tail]
    found = _myers_matches(a_mid, b_mid, budget) if budget is not None else []
    if found is None:
        return None
    i = j = 0
    for x, y in [*found, (len(a_mid), len(b_mid))]:
        if x > i or y > j:
            tag = "replace" if x > i and y > j else "delete" if x > i else "insert"
            middle.append((tag, i + head, x + head, j + head, y + head))
        if x < len(a_mid):
            if middle and middle[-1][0] == "equal" and middle[-1][2] == x + head:
                _, i1, _, j1, _ = middle[-1]
                middle[-1] = ("equal", i1, x + head + 1, j1, y + head + 1)
            else:
                middle.append(("equal", x + head, x + head + 1, y + head, y + head + 1))
        i, j = x + 1, y + 1
    codes: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    codes.extend(middle)
    if tail:
        codes.append(("equal", n - tail, n, m - tail, m))
    return codes
