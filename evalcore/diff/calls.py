"""Tool-call diff: two lists of calls compared call by call (name, then each argument).

A trajectory read as JSON text hides what matters: which call is missing, which one was made
instead, which argument changed. :func:`diff_calls` aligns the two lists on the tool names
(Myers' shortest edit script over the names, bounded), pairs the calls of a changed block by
position, and for each pair lists the argument paths that differ (:func:`~evalcore.diff.
structural.diff_json` over the arguments, rooted at ``$``).

Recognised calls (:func:`as_calls`): ``{"name", "arguments" | "args"}``, OpenAI's
``{"function": {"name", "arguments"}}`` (arguments may be a JSON-object string), ADK's
``{"tool_name", "tool_input"}``; a list of such calls (at least one with arguments), or an object holding one under
``"tool_calls"`` (ADK-derived cases, whose other keys are diffed structurally). BFCL's
``{"fn": {...}}`` shape is taken for calls only as an expected value holding BFCL's possible
answers (:func:`as_accepted_calls`: every argument a list of accepted values) against calls
made; anywhere else it cannot be told from plain JSON.

Whether an argument differs is the ``tool_calls`` scorer's own rule
(:func:`evalcore.scorers.values.argument_verdict`, with the scorer's value rules when the caller
passes them): an accepted value (``3`` against BFCL's ``[3]``, an omitted argument whose
accepted values hold ``""``) is never shown as changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evalcore.diff.myers import StepBudget, opcodes
from evalcore.diff.structural import PathChange, StructuralDiff, canonical, diff_json, same_json
from evalcore.jsonvalue import MISSING
from evalcore.scorers.calls import OMITTABLE
from evalcore.scorers.values import DEFAULT_RULES, ValueRules, argument_verdict

__all__ = [
    "MAX_CALLS",
    "ROWS_SHOWN",
    "Call",
    "CallChange",
    "CallsDiff",
    "as_accepted_calls",
    "as_calls",
    "diff_calls",
]

MAX_CALLS = 2_000
"""Lists longer than this are not read as tool calls (they are diffed as JSON)."""
ARGUMENT_CHANGES_MAX = 50
"""Argument changes listed at most per call."""
ROWS_SHOWN = 100
"""Rows a page lists at most (see :attr:`CallsDiff.shown`)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One recognised call: its tool name and arguments (a dict, or the raw value when the
    arguments are not an object, e.g. unparseable JSON text)."""

    name: str
    arguments: Any
    accepted: bool = False
    """The arguments map each name to a list of accepted values (BFCL's possible answer)."""


def _arguments(raw: Any) -> Any:
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return raw


_PLAIN_KEYS = {"name", "arguments", "args", "id", "type", "call_id"}
"""Keys a plain call may have (``{"name": "Ada", "age": 36}`` is a record, not a call)."""


def _call(item: Any) -> Call | None:
    if not isinstance(item, dict):
        return None
    inner = item.get("function")
    if isinstance(inner, dict) and isinstance(inner.get("name"), str):
        return Call(inner["name"], _arguments(inner.get("arguments", inner.get("args"))))
    if isinstance(item.get("name"), str) and set(item) <= _PLAIN_KEYS:
        return Call(item["name"], _arguments(item.get("arguments", item.get("args"))))
    if isinstance(item.get("tool_name"), str):
        return Call(item["tool_name"], _arguments(item.get("tool_input")))
    return None


def as_calls(value: Any) -> tuple[list[Call], dict[str, Any]] | None:
    """``(calls, rest)`` when ``value`` holds a list of tool calls, else ``None``.

    ``rest`` is the rest of an object holding the calls under ``"tool_calls"`` (``{}`` for a
    plain list). An empty list is no list of calls (nothing tells it from any empty array).
    """
    rest: dict[str, Any] = {}
    items = value
    if isinstance(value, dict):
        items = value.get("tool_calls")
        rest = {k: v for k, v in value.items() if k != "tool_calls"}
    if not isinstance(items, list | tuple) or not items or len(items) > MAX_CALLS:
        return None
    calls = []
    for item in items:
        call = _call(item)
        if call is None:
            return None
        calls.append(call)
    if not any(isinstance(item, dict) and item.keys() - {"name", "id", "type", "call_id"} for item in items):
        return None  # names alone (``[{"name": "Ada"}]``): a list of records as much as of calls
    return calls, rest


def _bfcl_item(item: Any, *, answer: bool) -> Call | None:
    """``{"fn": {"arg": ...}}`` as a call; with ``answer`` only when every argument is a list
    (BFCL's possible answer: accepted values)."""
    if not isinstance(item, dict) or len(item) != 1:
        return None
    ((name, args),) = item.items()
    if not isinstance(args, dict) or (answer and not all(isinstance(v, list) for v in args.values())):
        return None
    return Call(str(name), args, accepted=answer)


def _bfcl_items(value: Any, *, answer: bool) -> tuple[list[Call], dict[str, Any]] | None:
    rest: dict[str, Any] = {}
    items = value
    if isinstance(value, dict):
        items = value.get("tool_calls")
        rest = {k: v for k, v in value.items() if k != "tool_calls"}
    if not isinstance(items, list | tuple) or len(items) > MAX_CALLS:
        return None
    calls = [_bfcl_item(item, answer=answer) for item in items]
    if any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None], rest


def as_accepted_calls(
    expected: Any, actual: Any
) -> tuple[tuple[list[Call], dict[str, Any]], tuple[list[Call], dict[str, Any]]] | None:
    """Both sides as calls when ``expected`` holds BFCL's possible answers and ``actual`` calls made.

    ``expected`` must be a non-empty list (or ``{"tool_calls": [...]}``) of
    ``{"fn": {"arg": [accepted, ...]}}``, every argument a list; ``actual`` any shape
    :func:`as_calls` reads, BFCL's ``[{"fn": {"arg": value}}]`` or an empty list (no call made).
    ``None`` otherwise.
    """
    answers = _bfcl_items(expected, answer=True)
    if answers is None or not answers[0]:
        return None
    made = as_calls(actual)
    if made is None:
        made = _bfcl_items(actual, answer=False)
    return None if made is None else (answers, made)


@dataclass(frozen=True, slots=True)
class CallChange:
    """One row of a tool-call diff.

    Attributes:
        status: ``same``, ``arguments`` (same tool, arguments differ), ``replaced`` (another
            tool at this place), ``missing`` (expected, not made) or ``extra`` (made, not expected).
        expected_index, actual_index: The call's 0-based position on each side (``None`` where absent).
        expected, actual: The calls (``None`` where absent).
        arguments: Argument paths that differ (``$.city``...), for ``arguments`` and ``replaced``.
        arguments_complete: ``arguments`` lists every difference.
    """

    status: str
    expected_index: int | None
    actual_index: int | None
    expected: Call | None
    actual: Call | None
    arguments: list[PathChange] = field(default_factory=list)
    arguments_complete: bool = True

    @property
    def changed(self) -> bool:
        return self.status != "same"

    @property
    def position(self) -> str:
        """``#1``, or ``#2 → #3`` when the call moved (1-based, as people count calls)."""
        left = f"#{self.expected_index + 1}" if self.expected_index is not None else "—"
        right = f"#{self.actual_index + 1}" if self.actual_index is not None else "—"
        return left if left == right else f"{left} → {right}"


@dataclass(slots=True)
class CallsDiff:
    """Two lists of tool calls compared call by call.

    Attributes:
        calls: One row per call position (see :class:`CallChange`), in order.
        rest: Structural diff of the other keys of a ``{"tool_calls": ...}`` object (``None``
            when both are plain lists or the other keys are equal).
        n_expected, n_actual: Calls on each side.
    """

    calls: list[CallChange]
    rest: StructuralDiff | None
    n_expected: int
    n_actual: int

    @property
    def n_changed(self) -> int:
        return sum(1 for c in self.calls if c.changed)

    @property
    def shown(self) -> list[CallChange]:
        """The rows a page lists: all of them up to :data:`ROWS_SHOWN`; past it the changed
        ones only, the first :data:`ROWS_SHOWN` (a long trajectory renders fast)."""
        if len(self.calls) <= ROWS_SHOWN:
            return self.calls
        return [c for c in self.calls if c.changed][:ROWS_SHOWN]

    @property
    def not_shown(self) -> int:
        """Rows left out of :attr:`shown`."""
        return len(self.calls) - len(self.shown)

    def summary(self) -> str:
        """One sentence: ``3 expected calls, 4 made: 1 with other arguments, 1 extra.``"""
        counts: dict[str, int] = {}
        for change in self.calls:
            if change.changed:
                counts[change.status] = counts.get(change.status, 0) + 1
        words = {
            "arguments": "with other arguments",
            "replaced": "replaced by another tool",
            "missing": "missing",
            "extra": "extra",
        }
        parts = [f"{n} {words[k]}" for k, n in counts.items()]
        head = f"{self.n_expected} expected call{'s' if self.n_expected != 1 else ''}, {self.n_actual} made"
        return f"{head}: {', '.join(parts)}." if parts else f"{head}: the same calls."


def _argument_changes(expected: Call, actual: Call, rules: ValueRules) -> list[PathChange]:
    """The arguments the scorer's rule does not accept (:func:`argument_verdict`), as path
    changes: an accepted-values expectation shows its accepted values (one, or the list)."""
    if not isinstance(expected.arguments, dict) or not isinstance(actual.arguments, dict):
        return (
            []
            if same_json(expected.arguments, actual.arguments)
            else [PathChange("changed", "$", expected.arguments, actual.arguments)]
        )
    changes: list[PathChange] = []
    for name, value in expected.arguments.items():
        accepted = list(value) if expected.accepted else [value]
        got = actual.arguments.get(name, MISSING)
        verdict = argument_verdict(got, accepted, nested=expected.accepted, rules=rules)
        if verdict in ("match", "omitted"):
            continue
        shown: Any = value
        if expected.accepted:
            options = [v for v in accepted if v != OMITTABLE]
            shown = options[0] if len(options) == 1 else options
        path = f"$.{name}"
        change = PathChange("removed", path, shown) if got is MISSING else PathChange("changed", path, shown, got)
        changes.append(change)
    extra = [(n, v) for n, v in actual.arguments.items() if n not in expected.arguments]
    changes += [PathChange("added", f"$.{n}", after=v) for n, v in extra]
    return changes


def _pair(i: int, j: int, a: Call, b: Call, rules: ValueRules = DEFAULT_RULES) -> CallChange:
    rejected = _argument_changes(a, b, rules)
    if a.name == b.name and not rejected:
        return CallChange("same", i, j, a, b)
    status = "arguments" if a.name == b.name else "replaced"
    if a.accepted or not rejected:
        # accepted values have no JSON path diff; another tool with accepted arguments lists none
        return CallChange(status, i, j, a, b, rejected[:ARGUMENT_CHANGES_MAX], len(rejected) <= ARGUMENT_CHANGES_MAX)
    found = diff_json(a.arguments, b.arguments, max_changes=ARGUMENT_CHANGES_MAX)
    return CallChange(status, i, j, a, b, found.changes, found.complete)


def _align(
    a: list[Call], b: list[Call], offset_a: int, offset_b: int, budget: StepBudget, rules: ValueRules = DEFAULT_RULES
) -> list[CallChange]:
    """Calls of a changed block aligned on their names, pairs of a block of other names by position."""
    codes = opcodes([c.name for c in a], [c.name for c in b], budget)
    if codes is None:
        codes = [("replace", 0, len(a), 0, len(b))]
    rows: list[CallChange] = []
    for op, i1, i2, j1, j2 in codes:
        paired = (i2 - i1) if op == "equal" else min(i2 - i1, j2 - j1)
        for k in range(paired):
            rows.append(_pair(offset_a + i1 + k, offset_b + j1 + k, a[i1 + k], b[j1 + k], rules))
        for i in range(i1 + paired, i2):
            rows.append(CallChange("missing", offset_a + i, None, a[i], None))
        for j in range(j1 + paired, j2):
            rows.append(CallChange("extra", None, offset_b + j, None, b[j]))
    return rows


def diff_calls(
    expected: tuple[list[Call], dict[str, Any]],
    actual: tuple[list[Call], dict[str, Any]],
    *,
    rules: ValueRules = DEFAULT_RULES,
) -> CallsDiff:
    """Compare two lists of calls (as :func:`as_calls` returns them), call by call.

    A call is the same when the tool matches and the ``tool_calls`` scorer's rule accepts its
    arguments (:func:`~evalcore.scorers.values.argument_verdict` with ``rules``, the scorer's
    value rules; its defaults otherwise).

    Identical calls (same tool, same arguments) are aligned first, so one call missing from a
    long trajectory is one ``missing`` row; inside each changed stretch, calls are aligned on
    their tool names, then paired by position. Bounded: both alignments share a step budget
    (past it, calls are paired by position) and each call lists at most
    :data:`ARGUMENT_CHANGES_MAX` argument changes. Never raises.
    """
    a, rest_a = expected
    b, rest_b = actual
    budget = StepBudget(50_000)
    # accepted-value lists never equal a call made as text: those pairs go through the rule
    keys_a = [("\x01" if c.accepted else "") + c.name + "\x00" + canonical(c.arguments) for c in a]
    keys_b = [("\x01" if c.accepted else "") + c.name + "\x00" + canonical(c.arguments) for c in b]
    codes = opcodes(keys_a, keys_b, budget) or [("replace", 0, len(a), 0, len(b))]
    rows: list[CallChange] = []
    for op, i1, i2, j1, j2 in codes:
        if op == "equal":
            rows.extend(CallChange("same", i1 + k, j1 + k, a[i1 + k], b[j1 + k]) for k in range(i2 - i1))
        else:
            rows.extend(_align(a[i1:i2], b[j1:j2], i1, j1, budget, rules))
    rest = diff_json(rest_a, rest_b) if not same_json(rest_a, rest_b) else None
    return CallsDiff(rows, rest, len(a), len(b))
