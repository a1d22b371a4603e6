"""Structural diff of two JSON values: the paths added, removed or changed, bounded in time.

A JSON expected value is rarely read well as text: a reordered key or a re-indented object
shows as red and green lines while the one answer that matters (``$.answer.city: "Paris" →
"Rome"``) hides in them. :func:`diff_json` walks both values together and lists each difference
once, at the deepest path where the two still have the same shape:

* objects key by key (expected's key order, then keys only in actual);
* arrays aligned on their items (common head and tail first, then Myers' shortest edit script
  on each item's canonical JSON), so an item inserted at the front is one ``added`` path, not a
  change of every later item; items of a changed block are paired by position and walked into;
* scalars by their JSON text, so ``true`` vs ``1`` and ``1`` vs ``1.0`` differ as they read.

Paths are JSONPath-like: ``$`` is the root, ``.key`` (or ``["odd key"]``) an object member,
``[i]`` an array item. A removed or changed item is named by its index in expected, an added
one by its index in actual.

Bounded whatever the size: equal subtrees are skipped at C speed (Python's ``==``, which also
aligns array items), at most :data:`MAX_CHANGES` changes are listed and :data:`MAX_NODES` nodes
walked, arrays whose changed middle is longer than :data:`MAX_ALIGNED_ITEMS` are compared by position, and
:attr:`StructuralDiff.complete` says when the listing stopped early. ``==`` takes ``true`` for
``1`` and ``1`` for ``1.0`` inside containers; when that hides the only differences (the walk finds
none though the JSON texts differ), a second, strict walk compares canonical JSON texts instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from evalcore.diff.myers import StepBudget, opcodes
from evalcore.diff.text import TextDiff, diff_texts

__all__ = [
    "ABSENT",
    "MAX_ALIGNED_ITEMS",
    "MAX_CHANGES",
    "MAX_NODES",
    "VALUE_MAX_CHARS",
    "PathChange",
    "StructuralDiff",
    "canonical",
    "compact",
    "diff_json",
    "same_json",
]

MAX_CHANGES = 500
"""Changes listed at most; past it the listing stops (``complete`` is False)."""
MAX_NODES = 200_000
"""Nodes (values) walked at most."""
MAX_ALIGNED_ITEMS = 20_000
"""Arrays with more items than this (on a side) are compared item by item by position."""
VALUE_MAX_CHARS = 300
"""A value shown in a change is cut after this many characters of compact JSON."""
STEP_BUDGET = 20_000
"""Myers steps one diff may spend aligning arrays (all arrays together): about 200 inserted or
removed items; arrays more different than that are paired by position."""
WORD_DIFF_MAX_CHARS = 5_000
"""Two changed strings both at most this long get a word diff."""
WORD_DIFFS_MAX = 50
"""Word diffs computed at most per structural diff."""


class _Absent:
    """The other side of an added or removed path."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""The value on the side where a path does not exist."""

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def canonical(value: Any) -> str:
    """The canonical JSON text of a value (sorted keys, compact, non-ASCII kept): equal values
    and only equal values have the same text (``true`` is not ``1``, ``1`` is not ``1.0``)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def same_json(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same JSON value (``==`` first, then their canonical texts)."""
    if a is b:
        return True
    try:
        if a != b:
            return False
    except RecursionError:  # pragma: no cover - absurdly deep values: the texts decide
        pass
    return canonical(a) == canonical(b)


def compact(value: Any, limit: int = VALUE_MAX_CHARS) -> str:
    """A value as one line of JSON, cut after ``limit`` characters (``…`` marks the cut)."""
    if value is ABSENT:
        return ""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def _key_path(path: str, key: Any) -> str:
    key = str(key)
    return f"{path}.{key}" if _IDENTIFIER.match(key) else f"{path}[{json.dumps(key, ensure_ascii=False)}]"


@dataclass(frozen=True, slots=True)
class PathChange:
    """One difference between two JSON values.

    Attributes:
        op: ``added`` (only in actual), ``removed`` (only in expected) or ``changed``.
        path: Where, e.g. ``$.answer.city`` or ``$.sources[2]`` (see the module docstring).
        before: Expected's value there (:data:`ABSENT` when added).
        after: Actual's value there (:data:`ABSENT` when removed).
        words: For two changed strings of at most :data:`WORD_DIFF_MAX_CHARS`: their word diff.
    """

    op: str
    path: str
    before: Any = ABSENT
    after: Any = ABSENT
    words: TextDiff | None = None

    @property
    def before_text(self) -> str:
        """Expected's value as one line of JSON, cut (empty when added)."""
        return compact(self.before)

    @property
    def after_text(self) -> str:
        """Actual's value as one line of JSON, cut (empty when removed)."""
        return compact(self.after)

    @property
    def kind_changed(self) -> bool:
        """A changed path whose value changed kind (e.g. a string became a number or an object)."""
        if self.op != "changed":
            return False
        return _kind(self.before) != _kind(self.after)

    def __str__(self) -> str:
        sign = {"added": "+", "removed": "-", "changed": "~"}[self.op]
        if self.op == "changed":
            return f"{sign} {self.path}: {self.before_text} → {self.after_text}"
        return f"{sign} {self.path}: {self.after_text if self.op == 'added' else self.before_text}"


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


@dataclass(slots=True)
class StructuralDiff:
    """The differences between two JSON values, in walk order.

    Attributes:
        changes: At most :data:`MAX_CHANGES` path changes.
        complete: Every difference is listed (False: the listing stopped at a bound).
        added, removed, changed: How many changes of each kind are listed.
        note: One sentence for the page when the listing is incomplete; else ``""``.
    """

    changes: list[PathChange] = field(default_factory=list)
    complete: bool = True
    note: str = ""

    @property
    def added(self) -> int:
        return sum(1 for c in self.changes if c.op == "added")

    @property
    def removed(self) -> int:
        return sum(1 for c in self.changes if c.op == "removed")

    @property
    def changed(self) -> int:
        return sum(1 for c in self.changes if c.op == "changed")

    def lines(self) -> list[str]:
        """Each change as one line: ``~ $.answer.city: "Paris" → "Rome"``, ``+ $.sources[2]: …``."""
        return [str(c) for c in self.changes]


class _Stop(Exception):
    """A bound was reached: stop walking."""


class _Walk:
    def __init__(self, max_changes: int, *, strict: bool = False) -> None:
        self.strict = strict
        self.out: list[PathChange] = []
        self.max_changes = max_changes
        self.nodes = 0
        self.words = 0
        self.budget = StepBudget(STEP_BUDGET)
        self.stopped = ""

    def add(self, op: str, path: str, before: Any = ABSENT, after: Any = ABSENT) -> None:
        if len(self.out) >= self.max_changes:
            self.stopped = f"the first {self.max_changes:,} differences are listed"
            raise _Stop
        words = None
        if (
            op == "changed"
            and isinstance(before, str)
            and isinstance(after, str)
            and max(len(before), len(after)) <= WORD_DIFF_MAX_CHARS
            and self.words < WORD_DIFFS_MAX
        ):
            self.words += 1
            words = diff_texts(before, after)
        self.out.append(PathChange(op, path, before, after, words))

    def tick(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.stopped = f"the walk stopped after {MAX_NODES:,} values"
            raise _Stop

    def same(self, a: Any, b: Any) -> bool:
        """Strict: the same JSON text. Fast: ``==``, and of the same type at the leaves."""
        if self.strict:
            return same_json(a, b)
        if isinstance(a, dict | list | tuple):
            return bool(a == b)
        return type(a) is type(b) and bool(a == b)

    def walk(self, a: Any, b: Any, path: str) -> None:
        self.tick()
        if isinstance(a, dict) and isinstance(b, dict):
            if not self.same(a, b):
                self.walk_object(a, b, path)
        elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
            if not self.same(a, b):
                self.walk_array(list(a), list(b), path)
        elif not self.same(a, b):
            self.add("changed", path, a, b)

    def walk_object(self, a: dict[Any, Any], b: dict[Any, Any], path: str) -> None:
        for key, value in a.items():
            where = _key_path(path, key)
            if key in b:
                self.walk(value, b[key], where)
            else:
                self.add("removed", where, value)
        for key, value in b.items():
            if key not in a:
                self.add("added", _key_path(path, key), after=value)

    def walk_array(self, a: list[Any], b: list[Any], path: str) -> None:
        # common head and tail by a linear scan (a binary search over slices would compare
        # deep items O(n log n) times), then the middle aligned, or paired by position
        head = 0
        for x, y in zip(a, b, strict=False):
            if not self.same(x, y):
                break
            head += 1
        tail = 0
        for x, y in zip(reversed(a[head:]), reversed(b[head:]), strict=False):
            if not self.same(x, y):
                break
            tail += 1
        a_mid, b_mid = a[head : len(a) - tail], b[head : len(b) - tail]
        codes = None
        if max(len(a_mid), len(b_mid)) <= MAX_ALIGNED_ITEMS:
            keys = (a_mid, b_mid) if not self.strict else ([canonical(x) for x in a_mid], [canonical(y) for y in b_mid])
            codes = opcodes(keys[0], keys[1], self.budget)
        if codes is None:  # too long or too different to align: by position
            codes = [("replace", 0, len(a_mid), 0, len(b_mid))]
        for op, i1, i2, j1, j2 in codes:
            if op == "equal":
                continue
            paired = min(i2 - i1, j2 - j1)
            for k in range(paired):
                self.walk(a_mid[i1 + k], b_mid[j1 + k], f"{path}[{head + i1 + k}]")
            for i in range(i1 + paired, i2):
                self.add("removed", f"{path}[{head + i}]", a_mid[i])
            for j in range(j1 + paired, j2):
                self.add("added", f"{path}[{head + j}]", after=b_mid[j])


def diff_json(expected: Any, actual: Any, *, max_changes: int = MAX_CHANGES) -> StructuralDiff:
    """The paths where two JSON values differ (see the module docstring for the rules).

    Args:
        expected: Any JSON value (dict, list, str, number, bool, None).
        actual: Any JSON value.
        max_changes: Changes listed at most.

    Returns:
        The changes in walk order; an empty list when the values are the same JSON value.
        Never raises on JSON values.
    """
    walk = _Walk(max_changes)
    try:
        walk.walk(expected, actual, "$")
        if not walk.out and not same_json(expected, actual):
            walk = _Walk(max_changes, strict=True)  # only ``true`` vs ``1`` or ``1`` vs ``1.0`` differ
            walk.walk(expected, actual, "$")
    except _Stop:
        return StructuralDiff(walk.out, False, f"Not every difference is listed: {walk.stopped}.")
    return StructuralDiff(walk.out)
