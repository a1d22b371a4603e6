"""JSON values as readable, diffable text (strings as they are, structures as indented JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def _is_block(value: Any) -> bool:
    return isinstance(value, str) and ("\n" in value or "\r" in value)


def _join(items: list[tuple[str, Any]], pad: str, sort_keys: bool) -> str:
    """``prefix + value`` per item, comma-separated; after a text block the comma goes on a line
    of its own, so it never reads as the last character of the text."""
    inner = pad + "  "
    parts = []
    for index, (prefix, value) in enumerate(items):
        part = inner + prefix + _render(value, inner, sort_keys)
        if index < len(items) - 1:
            part += "\n" + inner + "," if _is_block(value) else ","
        parts.append(part)
    return "\n".join(parts) + "\n" + pad


def _render(value: Any, pad: str, sort_keys: bool) -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        pairs = sorted(value.items(), key=lambda kv: str(kv[0])) if sort_keys else list(value.items())
        items = [(json.dumps(str(k), ensure_ascii=False) + ": ", v) for k, v in pairs]
        return "{\n" + _join(items, pad, sort_keys) + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return "[\n" + _join([("", v) for v in value], pad, sort_keys) + "]"
    if _is_block(value):
        # a multi-line string (code, a traceback, a poem) reads as text, not as "a\n    b": a
        # YAML-style block, each line indented under its key, the value's own indentation kept
        block = pad + "    "
        lines = value.splitlines(keepends=True)
        return "|\n" + "".join(block + line if line.strip("\r\n") else line for line in lines).rstrip("\r\n")
    return json.dumps(value, ensure_ascii=False, default=str)


def as_text(value: Any, *, sort_keys: bool = True) -> str:
    """A JSON value as readable, diffable text.

    Strings as they are; anything else as indented JSON (keys sorted unless ``sort_keys`` is
    false), except that a multi-line string inside a structure is written as a text block
    (``"test": |`` then its lines, indented) so code and tracebacks keep their indentation instead
    of showing as one JSON string full of ``\\n``.
    """
    if isinstance(value, str):
        return value
    return _render(value, "", sort_keys)


def compact_head(value: Any, limit: int) -> tuple[str, bool]:
    """The first ``limit`` characters of a value's compact JSON (``json.dumps`` with its default
    separators, non-ASCII kept), and whether the text is longer (then it is cut at ``limit``).

    The cost follows the characters written, not the value's size: a 5 MB structure costs what
    its first ``limit`` characters cost (big containers are opened lazily, member by member;
    small ones are written whole by the C encoder).
    """
    parts: list[str] = []
    size = 0
    for text in _chunks(value, limit):
        parts.append(text)
        size += len(text)
        if size > limit:
            return "".join(parts)[:limit], True
    return "".join(parts), False


_CHUNK = 64
"""Containers with more members than this (or holding such a container) are opened lazily."""
_ENCODE = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _big(item: Any) -> bool:
    """Worth opening lazily: a container with more than :data:`_CHUNK` members, or holding one
    (two levels are looked at; deeper bulk is written whole, still correctly)."""
    if not isinstance(item, dict | list | tuple):
        return False
    if len(item) > _CHUNK:
        return True
    members = item.values() if isinstance(item, dict) else item
    return any(isinstance(m, dict | list | tuple) and len(m) > _CHUNK for m in members)


def _chunks(item: Any, limit: int) -> Iterator[str]:
    if isinstance(item, str) and len(item) > limit:
        yield _ENCODE(item[: limit + 1])
    elif not _big(item):
        yield _ENCODE(item)
    elif isinstance(item, dict):
        yield "{"
        for index, (key, child) in enumerate(item.items()):
            yield (", " if index else "") + _ENCODE(str(key)) + ": "
            yield from _chunks(child, limit)
        yield "}"
    else:
        yield "["
        for index, child in enumerate(item):
            if index:
                yield ", "
            yield from _chunks(child, limit)
        yield "]"
