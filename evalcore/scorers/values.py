"""Value rules of the ``tool_calls`` scorer: when an actual argument value matches an accepted one.

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from evalcore.jsonvalue import MISSING
from evalcore.scorers.calls import (
    OMITTABLE,
    as_accepted_map,
)
from evalcore.scorers.jsonmatch import is_number, number_from_text

StringMode = Literal["exact", "casefold", "bfcl"]
STRING_MODES: tuple[str, ...] = ("exact", "casefold", "bfcl")

_BFCL_STRIP = re.compile(r"[ ,./\-_*^]")


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
        return actual is None and expected is None  # other kinds: equal only when both are None

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


DEFAULT_RULES = ValueRules()
"""The ``tool_calls`` scorer's default value rules (exact strings, no type coercion)."""


def argument_verdict(value: Any, accepted: list[Any], *, nested: bool, rules: ValueRules = DEFAULT_RULES) -> str:
    """How one argument of an actual call stands against an expected call's accepted values.

    The one acceptance rule: the ``tool_calls`` scorer
    (:func:`evalcore.scorers.alignment.match_call`) and the tool-call diff the case page shows
    (:mod:`evalcore.diff.calls`) both call it, so a value the scorer accepts is never shown as
    changed (BFCL's expected ``[3]`` lists the accepted values, and the actual ``3`` is one).

    Args:
        value: The actual call's value, or :data:`~evalcore.jsonvalue.MISSING` when the call
            omits the argument.
        accepted: The accepted values (a plain expectation's one literal is ``[literal]``).
        nested: A BFCL-shaped expectation: a dict inside an accepted value maps keys to
            accepted values, and ``""`` among the accepted values lets the argument be omitted.
        rules: The value rules (the scorer's ``strings`` and ``coerce_types``).

    Returns:
        ``"match"``, ``"mismatch"``, ``"omitted"`` (absent and allowed to be) or ``"missing"``.
    """
    if value is MISSING:
        return "omitted" if nested and OMITTABLE in accepted else "missing"
    return "match" if rules.any_matches(value, accepted, nested) else "mismatch"
