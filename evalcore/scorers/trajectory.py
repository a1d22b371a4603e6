"""Trajectory scoring: the tool calls an agent made against the calls a case expects.

The ``tool_calls`` scorer compares a list of *actual* calls with a list of *expected* calls and
reports a verdict (per ``mode``) plus precision / recall / F1 over calls, with per-argument
detail for the portal.

Where the actual calls come from, first found wins:
    1. ``ctx.run.metadata["tool_calls"]``: what the agent runtime records, a list of
       ``{"name", "arguments"}`` (``arguments`` may be a JSON string, OpenAI-style
       ``{"function": {...}}`` wrappers and objects with ``name`` / ``arguments`` work too);
    2. the output itself when it holds calls in any shape expected calls are read from (below):
       a list of calls (BFCL's ``[{"func": {"arg": value}}]``, ``[{"name", "arguments"}]``,
       ADK's ``tool_name`` / ``tool_input``), a dict with a ``"tool_calls"`` list, or a list of
       per-turn dicts; so a target returning exactly a case's expected value made those calls;
    3. the trace: ``execute_tool`` spans in ``ctx.events`` (span name = tool name, arguments
       from the ``arguments`` payload key of the ``span_begin``, else of the ``span_end``).

Expected calls come from the case's expected value: a list of calls, a dict with a
``"tool_calls"`` list (ADK-derived cases), or a list of per-turn dicts each with a
``"tool_calls"`` list (multi-turn ADK cases: the whole trajectory is the turns' calls
concatenated in turn order). One expected call is either

* plain ``{"name": str, "arguments": {...}}`` (``args``, or ADK's ``tool_name`` /
  ``tool_input``, are accepted as aliases): each argument value is the one literal accepted
  value; or
* BFCL's possible answer ``{"func": {"arg": [accepted, ...]}}``: each argument lists its
  accepted values, and ``""`` in that list means the argument may be omitted. As in BFCL's
  ``dict_checker`` / ``list_dict_checker``, a dict inside an accepted value is itself a map of
  key -> accepted values. An empty accepted list ``[]`` is read as "the value is ``[]``" (BFCL's
  own checker can never pass such an argument; a few live answers use it for empty arrays).

Value comparison (documented choices, following BFCL's AST checker where sensible):
    * ``int`` and ``float`` compare by exact value (``6 == 6.0``; BFCL only widens int -> float
      for float parameters, we do it both ways because JSON does not keep the distinction).
      ``NaN`` equals nothing, and big integers are never rounded through ``float``.
    * ``bool`` is never a number (``True != 1``), and ``None`` only equals ``None``.
    * A string never equals a number or a bool (``"6" != 6``) unless ``coerce_types=True``: then
      a numeric string (a JSON number literal) compares numerically and ``"true"`` /
      ``"false"`` compare as bools.
    * Strings per ``strings``: ``"exact"`` (default), ``"casefold"``, or ``"bfcl"`` (BFCL's
      ``standardize_string``: drop spaces and ``,./-_*^``, lowercase, ``'`` -> ``"``).
    * Lists compare element by element, in order and same length; tuples are lists (JSON).
    * Plain dicts compare key by key with the same key set.
    * An actual argument the expected call does not list is a mismatch; a listed argument the
      call omits is a mismatch unless ``""`` is among its accepted values. Call ids never matter.

Modes: ``exact`` (same calls, same order, same count), ``in_order`` (the expected calls occur
in order as a subsequence; extra calls allowed), ``any_order`` (same multiset). With no
expected call (BFCL irrelevance) every mode passes iff no call was made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from evalcore.scorers.base import ScoreContext, Scorer, register
from evalcore.scorers.calls import (
    OMITTABLE,
    ActualCall,
    ExpectedCall,
    actual_calls,
    as_accepted_map,
    expected_calls,
)
from evalcore.scorers.jsonmatch import is_number, number_from_text
from evalcore.types import Score

Mode = Literal["exact", "in_order", "any_order"]
StringMode = Literal["exact", "casefold", "bfcl"]

MODES: tuple[str, ...] = ("exact", "in_order", "any_order")
STRING_MODES: tuple[str, ...] = ("exact", "casefold", "bfcl")


_BFCL_STRIP = re.compile(r"[ ,./\-_*^]")


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


# ---------------------------------------------------------------------------------------------
# Parsing calls


# ---------------------------------------------------------------------------------------------
# Comparing values


def bfcl_standardize(text: str) -> str:
    """BFCL's ``standardize_string``: drop spaces and ``,./-_*^``, lowercase, ``'`` -> ``"``."""
    return _BFCL_STRIP.sub("", text).lower().replace("'", '"')


def _coerce(value: Any) -> Any:
    """A string read as a number or bool when it cleanly is one (``coerce_types=True``).

    Numbers must be JSON number literals (:func:`~evalcore.scorers.jsonmatch.number_from_text`):
    ``"1_000"``, ``"0x10"``, ``"nan"`` and ``"inf"`` stay strings; an integer literal stays an
    exact ``int`` (``float()`` would make ``"9007199254740993"`` equal ``9007199254740992``).
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    number = number_from_text(text)
    return value if number is None else number


@dataclass(slots=True, frozen=True)
class ValueRules:
    """How two argument values compare (see the module docstring).

    Attributes:
        strings: ``exact``, ``casefold`` or ``bfcl``.
        coerce_types: Numeric / boolean strings equal the number / bool they spell.
    """

    strings: str = "exact"
    coerce_types: bool = False

    def _text(self, text: str) -> str:
        if self.strings == "casefold":
            return text.casefold()
        if self.strings == "bfcl":
            return bfcl_standardize(text)
        return text

    def scalar_equal(self, actual: Any, expected: Any) -> bool:
        """Equality of two non-container values."""
        if self.coerce_types and isinstance(actual, str) != isinstance(expected, str):
            actual, expected = _coerce(actual), _coerce(expected)
        if isinstance(actual, bool) or isinstance(expected, bool):
            return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
        if is_number(actual) and is_number(expected):
            # exact value comparison (Python compares int with float exactly; float() would
            # round big ints together); NaN equals nothing
            return bool(actual == expected)
        if isinstance(actual, str) and isinstance(expected, str):
            return self._text(actual) == self._text(expected)
        if actual is None or expected is None:
            return actual is None and expected is None
        return False

    def value_matches(self, actual: Any, accepted: Any, nested: bool) -> bool:
        """Whether ``actual`` equals one accepted value (recursing into lists and dicts)."""
        if isinstance(accepted, dict):
            if not isinstance(actual, dict):
                return False
            if nested:
                return self.nested_dict_matches(actual, accepted)
            if set(actual) != set(accepted):
                return False
            return all(self.value_matches(actual[k], accepted[k], nested) for k in accepted)
        if isinstance(accepted, list | tuple):
            if not isinstance(actual, list | tuple) or len(actual) != len(accepted):
                return False
            return all(self.value_matches(a, e, nested) for a, e in zip(actual, accepted, strict=True))
        if isinstance(actual, dict | list | tuple):
            return False
        return self.scalar_equal(actual, accepted)

    def any_matches(self, actual: Any, accepted_values: list[Any], nested: bool) -> bool:
        """Whether ``actual`` equals any of the accepted values (``""`` counts only as a string)."""
        return any(self.value_matches(actual, a, nested) for a in accepted_values)

    def nested_dict_matches(self, actual: dict[str, Any], accepted: dict[str, Any]) -> bool:
        """BFCL ``dict_checker``: keys map to accepted-value lists; ``""`` allows omission."""
        options = as_accepted_map(accepted)
        for key, value in actual.items():
            if key not in options or not self.any_matches(value, options[key], True):
                return False
        return all(key in actual or OMITTABLE in values for key, values in options.items())


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
        if arg not in actual.arguments:
            if expected.nested and OMITTABLE in accepted:
                detail[arg] = {"status": "omitted", "accepted": accepted}
            else:
                detail[arg] = {"status": "missing", "accepted": accepted}
                problem = problem or f"{expected.name}: missing argument {arg!r}"
            continue
        value = actual.arguments[arg]
        ok = rules.any_matches(value, accepted, expected.nested)
        detail[arg] = {"status": "match" if ok else "mismatch", "actual": value, "accepted": accepted}
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


# ---------------------------------------------------------------------------------------------
# Aligning call lists


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
    """An order-preserving alignment of maximum size (LCS), as (actual, expected) pairs."""
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


# ---------------------------------------------------------------------------------------------
# The scorer


@register
@dataclass
class ToolCalls(Scorer):
    """Expected vs actual tool calls: a verdict per ``mode`` plus precision / recall / F1.

    Emits ``tool_calls`` (bool verdict), ``tool_calls.precision``, ``tool_calls.recall`` and
    ``tool_calls.f1`` (floats in 0..1, measurements without a verdict). The verdict score's
    metadata holds per-call and per-argument detail; its explanation names the first mismatch.
    See the module docstring for where calls are read from and how values compare.

    Attributes:
        mode: ``exact``, ``in_order`` or ``any_order``.
        strings: String comparison: ``exact``, ``casefold`` or ``bfcl``.
        coerce_types: Let ``"6"`` equal ``6`` and ``"true"`` equal ``True``.
        loose_names: Treat ``.`` and ``_`` in tool names as the same (BFCL's renaming for APIs
            that forbid dots).
    """

    name: ClassVar[str] = "tool_calls"
    version: ClassVar[str] = "1"
    mode: str = "exact"
    strings: str = "exact"
    coerce_types: bool = False
    loose_names: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise TypeError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.strings not in STRING_MODES:
            raise TypeError(f"strings must be one of {', '.join(STRING_MODES)}, got {self.strings!r}")

    @property
    def score_names(self) -> list[str]:
        """``tool_calls`` and its ``.precision``, ``.recall``, ``.f1`` measurements."""
        return [self.name, f"{self.name}.precision", f"{self.name}.recall", f"{self.name}.f1"]

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """Score one case.

        Raises:
            ValueError: The case has no usable expected calls, or recorded calls are malformed.
        """
        expected = expected_calls(ctx.case.expected)
        actual, source = actual_calls(ctx)
        result = compare_calls(
            actual,
            expected,
            mode=self.mode,
            rules=ValueRules(self.strings, self.coerce_types),
            loose_names=self.loose_names,
        )
        detail = {**result.detail, "actual_source": source}
        return [
            Score(self.name, result.passed, passed=result.passed, explanation=result.explanation, metadata=detail),
            Score(f"{self.name}.precision", result.precision),
            Score(f"{self.name}.recall", result.recall),
            Score(f"{self.name}.f1", result.f1),
        ]
