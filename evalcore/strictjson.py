"""Strict JSON (RFC 8259) reading: the one place the engine refuses what ``json.loads`` lets by.

The standard library accepts ``NaN``, ``Infinity`` and ``-Infinity`` (and turns ``1e999`` into
``inf``) and keeps the last of a repeated object key; none of them is JSON, a non-finite number
does not survive a round trip through a database JSON column, and a repeated key read last-wins
is a guess (a judge's ``"verdict"`` given twice). Two readers, for two kinds of caller:

* :func:`loads_strict` for a value a model or a target wrote (a judge answer, tool-call
  arguments, an output checked as JSON): refuses NaN / Infinity and repeated keys, raising
  :class:`StrictJSONError` with the reason.
* :data:`STRICT` for case-bank files: a decoder refusing NaN / Infinity and overflowing numbers
  with :class:`NonFiniteNumber`; :func:`locate_non_finite` then names the field that held one
  and :func:`non_finite_reason` gives the message.
"""

from __future__ import annotations

import json
import math
from typing import Any


class StrictJSONError(ValueError):
    """Text that is not strict JSON (RFC 8259): NaN/Infinity, duplicate keys, bad syntax."""


class NonFiniteNumber(ValueError):
    """Raised while decoding when a value is NaN or infinite (its text is the offending token)."""


def refuse_non_finite(token: str) -> Any:
    """A ``parse_constant`` hook for ``json.loads``: raises :class:`NonFiniteNumber` for ``token``.

    ``json.loads`` calls it for ``NaN``, ``Infinity`` and ``-Infinity``, which it reads by default.

    Raises:
        NonFiniteNumber: Always, with the token as its message.
    """
    raise NonFiniteNumber(token)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NonFiniteNumber(text)
    return value


class DuplicateKey(json.JSONDecodeError):
    """Raised while decoding when one object names a key twice (``json.loads`` would silently keep
    the last value: a case's ``"split": "dev", "split": "test"`` filed it under test). A
    :class:`json.JSONDecodeError`, so a caller that takes any invalid JSON as such refuses it too;
    the loaders catch it first to name the key. ``key``: the repeated key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} appears twice in one object", "", 0)
        self.key = key


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return result


STRICT = json.JSONDecoder(
    parse_constant=refuse_non_finite, parse_float=_finite_float, object_pairs_hook=_refuse_duplicate_keys
)
"""A decoder that raises :class:`NonFiniteNumber` on NaN, Infinity or an overflowing number, and
:class:`DuplicateKey` on an object that names a key twice."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key makes the object ambiguous (json.loads silently keeps the last one).
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJSONError(f"duplicate key {key!r}")
        result[key] = value
    return result


def loads_strict(text: str) -> Any:
    """Parse strict JSON: no NaN / Infinity / -Infinity, no duplicate object keys.

    Args:
        text: JSON text.

    Returns:
        The parsed value.

    Raises:
        StrictJSONError: The text is not strict JSON (the message says why).
    """
    try:
        return json.loads(text, parse_constant=refuse_non_finite, object_pairs_hook=_no_duplicate_keys)
    except NonFiniteNumber as exc:
        raise StrictJSONError(f"{exc} is not valid JSON") from None
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None


class _Marker:
    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token


def _marker_float(text: str) -> float | _Marker:
    value = float(text)
    return _Marker(text) if math.isinf(value) else value


# Used only after STRICT failed, to find where the offending value sits.
_MARKING = json.JSONDecoder(parse_constant=_Marker, parse_float=_marker_float)


def _find_marker(value: Any, path: str) -> tuple[str, str] | None:
    if isinstance(value, _Marker):
        return path, value.token
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find_marker(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _find_marker(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def locate_non_finite(text: str, start: int = 0) -> tuple[str | None, str]:
    """Find the first NaN / infinite value in the JSON value starting at ``text[start]``.

    Args:
        text: A document that :data:`STRICT` rejected with :class:`NonFiniteNumber`.
        start: Index where the value begins.

    Returns:
        ``(field path or None for a bare top-level value, the offending token)``; the path looks
        like ``expected`` or ``metadata.scores[2]``.
    """
    value, _ = _MARKING.raw_decode(text, start)
    found = _find_marker(value, "")
    if found is None:
        return None, "NaN"
    path, token = found
    return path or None, token


def non_finite_reason(token: str) -> str:
    """The error message for a rejected NaN / Infinity token."""
    return f'{token} is not allowed: JSON has no NaN or Infinity (use null, or a string such as "NaN")'
