"""``json_match``: compare a JSON output with an expected JSON value, strictly.

Also home of :func:`canonical_text`, the one way scorers turn a non-string output into text.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from evalcore.scorers.base import ScoreContext, Scorer, ScorerSpecError
from evalcore.strictjson import StrictJSONError, loads_strict
from evalcore.types import Score

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```$", re.DOTALL)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# RFC 8259 number grammar: no "+1", "01", ".5", "5.", "1_000", "0x10", "nan" or "inf".
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


def canonical_text(value: Any) -> str:
    """A string as is; any other value as canonical JSON text (sorted keys, UTF-8 kept).

    Args:
        value: Any value a target may return.

    Returns:
        The text scorers match against. Values JSON cannot encode fall back to ``str()``.
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def number_from_text(text: str) -> int | float | None:
    """The number a text spells as a JSON number literal (surrounding whitespace ignored).

    ``"4"`` gives ``4`` (an int, so big integers stay exact), ``"4.0"`` / ``"1e3"`` give floats.
    Anything else gives ``None``: ``"+4"``, ``"04"``, ``"4."``, ``"1_000"``, ``"NaN"``,
    ``"Infinity"``, and a literal too large for a finite float (``"1e999"``).
    """
    stripped = text.strip()
    if not _JSON_NUMBER.fullmatch(stripped):
        return None
    value = json.loads(stripped)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return cast(int | float, value)  # pragma: no mutate (cast only informs the type checker)


def is_number(value: Any) -> bool:
    """True for an ``int`` or ``float`` that is not a ``bool`` (``True == 1`` in Python, not in JSON)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def strip_code_fence(text: str) -> str:
    """Remove one surrounding Markdown code fence (```` ```json ... ``` ````), if any.

    Models often wrap JSON answers in a fence; the content inside is what they meant.
    """
    stripped = text.strip()
    match = _FENCE.match(stripped)
    return match.group("body") if match else stripped


def _check_finite(value: Any, path: str) -> None:
    # A Python value (not text) may still carry float('nan'); it is no more JSON than the text form.
    if isinstance(value, float) and not math.isfinite(value):
        raise StrictJSONError(f"{value!r} at {path} is not valid JSON")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, _child(path, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_finite(item, f"{path}[{index}]")


def _child(path: str, key: Any) -> str:
    key = str(key)
    return f"{path}.{key}" if _IDENTIFIER.match(key) else f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _short(value: Any) -> str:
    text = canonical_text(value) if not isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(slots=True, frozen=True)
class JSONDiff:
    """The first difference found between expected and actual JSON.

    Attributes:
        path: JSONPath-like location, e.g. ``$.items[2].price`` (``$`` is the root).
        reason: What differs there, in words.
    """

    path: str
    reason: str


def json_diff(expected: Any, actual: Any, *, subset: bool = False, list_subset: bool = False) -> JSONDiff | None:
    """Find the first place where ``actual`` does not match ``expected``.

    Comparison is by JSON type: ``true`` never equals ``1``, ``"1"`` never equals ``1``, while
    ``1`` equals ``1.0`` (numbers compare by exact value, so ``2**53 + 1`` is not
    ``2.0**53``). ``NaN`` equals nothing, not even itself. Object key order never matters; array
    order does (unless ``list_subset``).

    Args:
        expected: The reference JSON value.
        actual: The value to check.
        subset: Objects in ``actual`` may carry keys ``expected`` does not (recursively).
        list_subset: Arrays in ``actual`` may carry extra elements: every expected element must
            match a distinct actual element, in any order. Without it arrays match element-wise
            and must have the same length (elements still compared with ``subset``).

    Returns:
        ``None`` when they match, else the first :class:`JSONDiff` in document order.
    """
    return _diff(expected, actual, "$", subset, list_subset)


def _diff(expected: Any, actual: Any, path: str, subset: bool, list_subset: bool) -> JSONDiff | None:
    kind_e, kind_a = _kind(expected), _kind(actual)
    if kind_e != kind_a:
        return JSONDiff(path, f"expected {kind_e} {_short(expected)}, got {kind_a} {_short(actual)}")
    if kind_e == "object":
        for key, value in expected.items():
            if key not in actual:
                return JSONDiff(_child(path, key), "missing in output")
            found = _diff(value, actual[key], _child(path, key), subset, list_subset)
            if found:
                return found
        if not subset:
            for key in actual:
                if key not in expected:
                    return JSONDiff(_child(path, key), "unexpected key in output")
        return None
    if kind_e == "array":
        if list_subset:
            return _diff_list_subset(list(expected), list(actual), path, subset)
        for index, (item_e, item_a) in enumerate(zip(expected, actual, strict=False)):
            found = _diff(item_e, item_a, f"{path}[{index}]", subset, list_subset)
            if found:
                return found
        if len(expected) != len(actual):
            shorter = min(len(expected), len(actual))
            return JSONDiff(f"{path}[{shorter}]", f"expected {len(expected)} items, got {len(actual)}")
        return None
    if expected != actual:
        return JSONDiff(path, f"expected {_short(expected)}, got {_short(actual)}")
    return None


def _diff_list_subset(expected: list[Any], actual: list[Any], path: str, subset: bool) -> JSONDiff | None:
    # Each expected element needs its own actual element (a bipartite matching): greedy
    # first-fit would wrongly fail e.g. expected [{}, {"a": 1}] against actual [{"a": 1}, {}].
    fits = [
        [j for j, item_a in enumerate(actual) if _diff(item_e, item_a, path, subset, True) is None]
        for item_e in expected
    ]
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        if not assign(i, set()):
            reason = "no matching element in output" if fits[i] else "no element of the output matches"
            return JSONDiff(f"{path}[{i}]", f"{reason} for expected {_short(expected[i])}")
    return None


@dataclass
class JsonMatch(Scorer):
    """The output, as strict JSON, equals (or contains) the expected JSON value.

    The output may be a JSON value or a string holding JSON (one surrounding Markdown code fence
    is removed). The expected value may be a JSON value or a string holding JSON. Strict JSON:
    ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON and never pass, neither as text nor as a
    Python float; nor does an object with a repeated key.

    The verdict is a bool; the explanation names the first differing path (``$.items[2].price``).
    Output that is not JSON fails (a verdict on the answer); an expected value that is not JSON
    raises (a fault in the case).
    """

    name: ClassVar[str] = "json_match"
    version: ClassVar[str] = "1"
    mode: str = "equal"
    """``"equal"``: same keys everywhere. ``"subset"``: the output may carry extra object keys."""
    list_subset: bool = False
    """Arrays in the output may carry extra elements, in any order (see :func:`json_diff`)."""

    def __post_init__(self) -> None:
        if self.mode not in ("equal", "subset"):
            raise ScorerSpecError(f"json_match: mode must be 'equal' or 'subset', got {self.mode!r}")

    async def score(self, ctx: ScoreContext) -> Score:
        """Compare; raises ValueError when the case has no (valid JSON) expected value."""
        if not ctx.case.has_expected:
            raise ValueError(f"case {ctx.case.id!r} has no expected value")
        try:
            expected = self._parse(ctx.case.expected)
        except StrictJSONError as exc:
            raise ValueError(f"case {ctx.case.id!r}: expected value is not strict JSON: {exc}") from None
        try:
            actual = self._parse(ctx.output)
        except StrictJSONError as exc:
            return Score(self.name, False, explanation=f"output is not strict JSON: {exc}")
        diff = json_diff(expected, actual, subset=self.mode == "subset", list_subset=self.list_subset)
        if diff is None:
            return Score(self.name, True)
        return Score(
            self.name,
            False,
            explanation=f"{diff.path}: {diff.reason}",
            metadata={"path": diff.path},
        )

    @staticmethod
    def _parse(value: Any) -> Any:
        if isinstance(value, str):
            return loads_strict(strip_code_fence(value))
        _check_finite(value, "$")
        return value
