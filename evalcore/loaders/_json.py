"""Strict JSON decoding: no NaN / Infinity, and errors located by field path.

The standard library accepts ``NaN``, ``Infinity`` and ``-Infinity`` (and turns ``1e999`` into
``inf``); none of them is JSON and none survives a round trip through a database JSON column, so
the loaders reject them and name the field that held one.
"""

from __future__ import annotations

import json
import math
from typing import Any


class NonFiniteNumber(ValueError):
    """Raised while decoding when a value is NaN or infinite."""


def _reject_constant(name: str) -> Any:
    raise NonFiniteNumber(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NonFiniteNumber(text)
    return value


STRICT = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
"""A decoder that raises :class:`NonFiniteNumber` on NaN, Infinity or an overflowing number."""


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


# One shared encoder: json.dumps with non-default options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Deterministic JSON text: sorted keys, no spaces, UTF-8 kept as is, NaN refused.

    Used for content hashes and auto ids, so its output must never change between versions.
    """
    return _CANONICAL.encode(value)


def json_type(value: Any) -> str:
    """A JSON type name with its article, for messages: ``an object``, ``a string``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
