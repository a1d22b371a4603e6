"""Call alignment of the ``tool_calls`` scorer: pairing actual calls with expected calls.

Modes: ``exact`` (same calls, same order, same count), ``in_order`` (the expected calls occur
in order as a subsequence; extra calls allowed), ``any_order`` (same multiset). With no
expected call (BFCL irrelevance) every mode passes iff no call was made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from evalcore.jsonvalue import MISSING
from evalcore.scorers.calls import OMITTABLE, ActualCall, ExpectedCall
from evalcore.scorers.values import ValueRules, argument_verdict

Mode = Literal["exact", "in_order", "any_order"]
MODES: tuple[str, ...] = ("exact", "in_order", "any_order")


@dataclass(slots=True)
class CallMatch:
    """How one actual call compares with one expected call.

    Attributes:
        ok: Name and every argument match.
        name_ok: The names match.
        arguments: Per-argument detail: name -> ``{"status", "actual"?, "accepted"?}`` with status
            ``match``, ``mismatch``, ``missing``, ``omitted`` (allowed omission) or ``unexpected``.
        problem: The first problem in words, ``None`` when ``ok``.
    """

    ok: bool
    name_ok: bool
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    problem: str | None = None

    @property
    def matched_arguments(self) -> int:
        """Arguments whose status is ``match`` or ``omitted`` (used to pick the closest call)."""
        return sum(1 for d in self.arguments.values() if d["status"] in ("match", "omitted"))


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def match_call(
    actual: ActualCall, expected: ExpectedCall, rules: ValueRules, *, loose_names: bool = False
) -> CallMatch:
    """Compare one actual call with one expected call, argument by argument."""
    name_ok = _name_key(actual.name, loose_names) == _name_key(expected.name, loose_names)
    if not name_ok:
        return CallMatch(False, False, {}, f"called {actual.name!r} instead of {expected.name!r}")
    if actual.arguments is None:
        return CallMatch(False, True, {}, f"{actual.name}: arguments are not a JSON object")
    detail: dict[str, dict[str, Any]] = {}
    problem: str | None = None
    for arg, accepted in expected.arguments.items():
        shown = [a for a in accepted if a != OMITTABLE] if expected.nested else accepted
        value = actual.arguments.get(arg, MISSING)
        status = argument_verdict(value, accepted, nested=expected.nested, rules=rules)
        if value is MISSING:
            detail[arg] = {"status": status, "accepted": accepted}
            if status == "missing":
                problem = problem or f"{expected.name}: missing argument {arg!r}"
            continue
        ok = status == "match"
        detail[arg] = {"status": status, "actual": value, "accepted": accepted}
        if not ok and problem is None:
            expected_text = _short(shown[0]) if len(shown) == 1 else f"one of {_short(shown)}"
            problem = f"{expected.name}: argument {arg!r} = {_short(value)}, expected {expected_text}"
    for arg, value in actual.arguments.items():
        if arg not in expected.arguments:
            detail[arg] = {"status": "unexpected", "actual": value}
            problem = problem or f"{expected.name}: unexpected argument {arg!r} = {_short(value)}"
    return CallMatch(problem is None, True, detail, problem)


def _name_key(name: str, loose: bool) -> str:
    # BFCL renames "a.b" to "a_b" for APIs that forbid dots in tool names.
    return name.replace(".", "_") if loose else name


def _max_matching(ok: list[list[bool]], n_actual: int, n_expected: int) -> list[tuple[int, int]]:
    """Maximum bipartite matching (Kuhn's augmenting paths), as (actual, expected) pairs."""
    owner: list[int | None] = [None] * n_actual

    def augment(j: int, seen: set[int]) -> bool:
        for i in range(n_actual):
            if ok[i][j] and i not in seen:
                seen.add(i)
                current = owner[i]
                if current is None or augment(current, seen):
                    owner[i] = j
                    return True
        return False

    for j in range(n_expected):
        augment(j, set())
    return sorted(((i, j) for i, j in enumerate(owner) if j is not None), key=lambda p: p[1])


def _longest_common_subsequence(ok: list[list[bool]], n_actual: int, n_expected: int) -> list[tuple[int, int]]:
    """An order-preserving alignment of maximum size (LCS), as (actual, expected) pairs; between
    alignments of the same size, the earlier expected calls are the ones matched."""
    table = [[0] * (n_expected + 1) for _ in range(n_actual + 1)]
    for i in range(n_actual - 1, -1, -1):
        for j in range(n_expected - 1, -1, -1):
            if ok[i][j]:
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < n_actual and j < n_expected:
        if ok[i][j] and table[i][j] == table[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


@dataclass(slots=True)
class TrajectoryComparison:
    """The outcome of comparing actual calls with expected calls.

    Attributes:
        passed: The verdict under the mode.
        precision: Matched calls / actual calls (1.0 when both lists are empty, 0.0 when only
            the actual list is).
        recall: Matched calls / expected calls (same empty-list convention).
        f1: Harmonic mean of precision and recall (0.0 when both are 0).
        pairs: (actual index, expected index) of matched calls.
        explanation: The first mismatch in words, ``None`` on a pass.
        detail: JSON detail for the portal (per expected call: matched actual index and
            per-argument statuses against the matched or closest call).
    """

    passed: bool
    precision: float
    recall: float
    f1: float
    pairs: list[tuple[int, int]]
    explanation: str | None
    detail: dict[str, Any]


def compare_calls(
    actual: list[ActualCall],
    expected: list[ExpectedCall],
    *,
    mode: str = "exact",
    rules: ValueRules | None = None,
    loose_names: bool = False,
) -> TrajectoryComparison:
    """Align actual with expected calls under ``mode`` and score the alignment.

    ``any_order`` uses a maximum bipartite matching; ``exact`` and ``in_order`` use the longest
    order-preserving alignment. Precision, recall and F1 count matched calls over that alignment.

    Raises:
        ValueError: Unknown ``mode``.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (modes: {', '.join(MODES)})")
    rules = rules or ValueRules()
    n_act, n_exp = len(actual), len(expected)
    matches = [[match_call(a, e, rules, loose_names=loose_names) for e in expected] for a in actual]
    ok = [[m.ok for m in row] for row in matches]
    if mode == "any_order":
        pairs = _max_matching(ok, n_act, n_exp)
    else:
        pairs = _longest_common_subsequence(ok, n_act, n_exp)
    matched = len(pairs)
    if mode == "in_order":
        passed = matched == n_exp and (n_exp > 0 or n_act == 0)
    else:
        passed = matched == n_exp == n_act
    if n_act == 0 and n_exp == 0:
        precision = recall = 1.0
    else:
        precision = matched / n_act if n_act else 0.0
        recall = matched / n_exp if n_exp else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    by_expected = {j: i for i, j in pairs}
    used = set(by_expected.values())
    calls_detail: list[dict[str, Any]] = []
    first_problem: str | None = None
    for j, exp in enumerate(expected):
        if j in by_expected:
            i = by_expected[j]
            calls_detail.append(
                {"index": j, "name": exp.name, "matched_actual": i, "arguments": matches[i][j].arguments}
            )
            continue
        closest = _closest(matches, j, used)
        entry: dict[str, Any] = {"index": j, "name": exp.name, "matched_actual": None, "closest_actual": closest}
        if closest is not None:
            entry["arguments"] = matches[closest][j].arguments
            problem = f"expected call #{j + 1}: {matches[closest][j].problem}"
            if matches[closest][j].ok:
                problem = f"expected call #{j + 1} {exp.name!r} is out of order"
        else:
            made = ", ".join(a.name for a in actual) or "none"
            problem = f"expected call #{j + 1} {exp.name!r} was not made (calls made: {made})"
        first_problem = first_problem or problem
        calls_detail.append(entry)
    extra = [i for i in range(n_act) if i not in used]
    if first_problem is None and not passed:
        if n_exp == 0:
            names = ", ".join(actual[i].name for i in extra)
            first_problem = f"expected no tool call, got {n_act}: {names}"
        elif extra:
            first_problem = f"unexpected extra call #{extra[0] + 1} {actual[extra[0]].name!r}"
    detail = {
        "mode": mode,
        "expected_count": n_exp,
        "actual_count": n_act,
        "matched": [list(p) for p in pairs],
        "calls": calls_detail,
        "unexpected_calls": [{"index": i, "name": actual[i].name, "arguments": actual[i].arguments} for i in extra],
    }
    return TrajectoryComparison(passed, precision, recall, f1, pairs, None if passed else first_problem, detail)


def _closest(matches: list[list[CallMatch]], j: int, used: set[int]) -> int | None:
    """The same-named actual call closest to expected call ``j`` (unmatched ones first)."""
    candidates = [i for i in range(len(matches)) if matches[i][j].name_ok]
    if not candidates:
        return None
    free = [i for i in candidates if i not in used] or candidates
    return max(free, key=lambda i: (matches[i][j].matched_arguments, -i))
