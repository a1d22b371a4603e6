"""Faithful conversion of Python values to JSON values, refusing what has no faithful form.

Everything a target returns (its output, its ``TargetOutput.metadata``, the payloads of its
trace spans) goes through :func:`to_json` before it is stored. A value is either converted to
the JSON value it stands for or refused by name with :class:`NotJSONError`; it never silently
becomes ``str(value)``.

Accepted (recursively, inside dicts and lists too):

==============================  =====================================================
value                           stored as
==============================  =====================================================
str, int, bool, None            itself (str / int subclasses as plain str / int)
float                           itself; NaN and +-Infinity are refused (not JSON)
dict, other ``Mapping``         object; keys str, int, float, bool, None or enum
list, tuple, deque              array
set, frozenset                  array, sorted (by JSON text when items do not compare)
numpy arrays and scalars        via their ``tolist()`` (any object with ``tolist`` and
                                ``dtype``: numpy, torch, jax, pandas Series); numpy is
                                never imported here
bytes, bytearray, memoryview    text when the bytes are UTF-8; refused otherwise
decimal.Decimal                 int when integral, else float; NaN / Infinity refused
datetime, date, time            ISO 8601 text (``isoformat()``)
timedelta                       seconds (float)
uuid.UUID, pathlib paths        text
enum members                    their value (converted)
dataclass instances             object of their fields
pydantic models                 ``model_dump(mode="json")``
``MISSING``                     null
==============================  =====================================================

Anything else (a generator, a socket, a DataFrame, an arbitrary object) is refused.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring, encode_basestring_ascii  # the C versions when there
from math import isfinite
from pathlib import PurePath
from typing import Any

try:
    from _json import make_encoder as _c_make_encoder

    c_make_encoder: Any = _c_make_encoder
except ImportError:  # pragma: no cover - CPython always has it
    c_make_encoder = None

MAX_DEPTH = 200
"""Nesting deeper than this is refused (it is almost always a reference cycle)."""


class Missing:
    """Sentinel type for "no expected value" (distinct from an expected ``null``)."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING = Missing()
"""The expected value of a case that has none."""


class NotJSONError(ValueError):
    """A value with no faithful JSON form.

    Attributes:
        type_name: Qualified type name of the offending value (e.g. ``"socket.socket"``).
        where: Where it sits inside the converted value (e.g. ``"['citations'][2]"``; empty
            for the value itself).
        reason: Why it was refused.
    """

    def __init__(self, type_name: str, where: str, reason: str) -> None:
        self.type_name = type_name
        self.where = where
        self.reason = reason
        at = f" at {where}" if where else ""
        super().__init__(f"{type_name}{at}: {reason}")


def type_name(value: Any) -> str:
    """``module.QualName`` of a value's type (``builtins.`` left out)."""
    cls = type(value)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in ("builtins", "") else f"{module}.{name}"


def to_json(value: Any) -> Any:
    """Convert ``value`` to plain JSON values (dict, list, str, int, finite float, bool, None).

    Returns:
        A value made only of JSON types: ``value`` itself when it already is one, else a new
        value (the input is never modified).

    Raises:
        NotJSONError: Some part of the value has no faithful JSON form (its type and where it
            sits are named).
    """
    if _is_plain(value, 0):
        return value  # already plain JSON (the common case): no copy
    return _convert(value, "", 0)


def _is_plain(value: Any, depth: int) -> bool:
    """True when ``value`` is made only of exact JSON types (finite floats, str keys)."""
    cls = type(value)
    if cls is str or cls is int or cls is bool or value is None:
        return True
    if cls is float:
        return isfinite(value)
    if depth > MAX_DEPTH:
        return False
    if cls is dict:
        items: Any = value.values()
        for key in value:
            if type(key) is not str:
                return False
    elif cls is list:
        items = value
    else:
        return False
    for item in items:  # scalars checked inline: most values are flat
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if isfinite(item):
                continue
            return False
        if not _is_plain(item, depth + 1):
            return False
    return True


def _convert(value: Any, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NotJSONError(type_name(value), where, f"nested more than {MAX_DEPTH} levels deep (a reference cycle?)")
    # exact JSON types first: the common case stays cheap
    cls = type(value)
    if value is None or cls is str or cls is bool or cls is int:
        return value
    if cls is float:
        if not math.isfinite(value):
            raise NotJSONError("float", where, f"non-finite number {value!r} is not valid JSON")
        return value
    if cls is dict:
        return {_key(k, where): _convert(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
    if cls is list or cls is tuple:
        return [_convert(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if value is MISSING:
        return None
    if isinstance(value, enum.Enum):
        return _convert(value.value, where, depth + 1)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _convert(float(value), where, depth)
    if isinstance(value, Mapping):
        return {_key(k, where): _convert(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | deque):
        return [_convert(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, set | frozenset):
        items = [_convert(v, f"{where}{{item}}", depth + 1) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotJSONError(
                type_name(value), where, f"bytes that are not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise NotJSONError(type_name(value), where, f"non-finite number {value!r} is not valid JSON")
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID | PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _convert(getattr(value, f.name), f"{where}.{f.name}", depth + 1) for f in dataclasses.fields(value)
        }
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump) and not isinstance(value, type):
        try:
            dumped = model_dump(mode="json")
        except Exception as exc:  # noqa: BLE001 - the model's own refusal, named
            raise NotJSONError(type_name(value), where, f"model_dump failed: {type(exc).__name__}: {exc}") from None
        return _convert(dumped, where, depth + 1)
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and hasattr(value, "dtype") and not isinstance(value, type):
        # numpy arrays and scalars (also torch / jax arrays, pandas Series), duck-typed
        try:
            plain = tolist()
        except Exception as exc:  # noqa: BLE001
            raise NotJSONError(type_name(value), where, f"tolist() failed: {type(exc).__name__}: {exc}") from None
        if type(plain) is type(value):
            raise NotJSONError(type_name(value), where, "tolist() did not give plain values")
        return _convert(plain, where, depth + 1)
    raise NotJSONError(
        type_name(value),
        where,
        "not a JSON value (convert it in the target: a str, number, bool, None, list or dict)",
    )


def _key(key: Any, where: str) -> str:
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, str):
        return str(key)
    if isinstance(key, bool) or key is None:
        return json.dumps(key)  # true / false / null, as json.dumps writes such keys
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float) and math.isfinite(key):
        return repr(float(key))
    raise NotJSONError(type_name(key), f"{where} key {key!r}", "a dict key must be a str, number, bool or None")


NON_FINITE_TEXT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""How a NaN / infinity is stored where a value from outside must be kept rather than refused
(OTLP attributes, imported logs): as this text, the spelling JavaScript and OTLP JSON use."""


def finite_or_text(value: Any) -> Any:
    """``value`` with every NaN / infinite float in it (inside dicts and lists too) replaced by
    its text in :data:`NON_FINITE_TEXT` (``"NaN"``, ``"Infinity"``, ``"-Infinity"``), so it can be
    stored as JSON; the input is not modified. Walks iteratively (any nesting depth).
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else NON_FINITE_TEXT[repr(value)]
    if not isinstance(value, dict | list | tuple):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            parent[key] = NON_FINITE_TEXT[repr(item)]
        elif isinstance(item, dict):
            copy: dict[Any, Any] = dict(item)
            parent[key] = copy
            stack.extend((copy, k, v) for k, v in copy.items() if isinstance(v, dict | list | tuple | float))
        elif isinstance(item, list | tuple):
            seq = list(item)
            parent[key] = seq
            stack.extend((seq, i, v) for i, v in enumerate(seq) if isinstance(v, dict | list | tuple | float))
        else:
            parent[key] = item
    return root[0]


def json_encoder(*, sort_keys: bool = False, compact: bool = False, ascii: bool = False) -> Callable[[Any], str]:
    """A fast ``json.dumps`` for plain JSON values, its encoder built once: UTF-8 kept as is
    (``ensure_ascii=False``; with ``ascii``, escaped as ``json.dumps`` does by default), NaN and
    infinities refused; keys sorted with ``sort_keys``; ``(",", ":")`` separators with
    ``compact``, else ``json.dumps``'s ``(", ", ": ")``.

    The text is exactly ``json.dumps(value, ensure_ascii=False, allow_nan=False, ...)``'s, made by
    the C encoder without its per-call set-up (a third of the time for a small object). Values
    must be acyclic (e.g. from :func:`to_json`): there is no circular-reference check.

    Raises (from the returned function):
        ValueError: NaN or an infinity inside the value.
        TypeError: A value that is not JSON (not a dict, list, tuple, str, int, float, bool or None).
    """
    separators = (":", ",") if compact else (": ", ", ")
    if c_make_encoder is None:  # no C accelerator (another Python): the plain encoder, same text
        return json.JSONEncoder(
            ensure_ascii=ascii, allow_nan=False, sort_keys=sort_keys, separators=(separators[1], separators[0])
        ).encode
    quote = encode_basestring_ascii if ascii else encode_basestring
    encode = c_make_encoder(None, _not_json, quote, None, separators[0], separators[1], sort_keys, False, False)
    join = "".join

    def dumps(value: Any) -> str:
        if type(value) is str:
            return quote(value)
        return join(encode(value, 0))

    return dumps


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
