"""JSON helpers the loaders share: line and column of an index, canonical text for hashes,
type names for messages, and where a document that does not parse ends.

The strict decoding itself (no NaN / Infinity, the field that held one) is
:mod:`evalcore.strictjson`.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any


# One shared encoder: json.dumps with non-default options builds a new encoder on every call.
class LineLocator:
    """Maps a character index in a text to its 1-based line and column."""

    def __init__(self, text: str) -> None:
        self.newlines = [match.start() for match in re.finditer("\n", text)]

    def line(self, index: int) -> int:
        """The 1-based line of ``index``."""
        return bisect.bisect_left(self.newlines, index) + 1

    def column(self, index: int) -> int:
        """The 1-based column of ``index``."""
        line = self.line(index)
        return index - (self.newlines[line - 2] + 1 if line > 1 else 0) + 1


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


# --- where a document that does not parse ends ------------------------------------------------

_SPACE = re.compile(r"[ \t\n\r]*")


def _space_end(text: str, index: int) -> int:
    match = _SPACE.match(text, index)
    return match.end() if match else index


_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
# An unfinished string running to the end of the text: no closing quote, no raw control
# character, possibly ending in the middle of an escape.
_STRING_TAIL = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*(?:\\(?:u[0-9a-fA-F]{0,3})?)?\Z')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_TAIL = re.compile(r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?)?\Z")
_LITERALS = ("true", "false", "null")


def unfinished_value(text: str, start: int = 0) -> str | None:
    """Say what is still open when a JSON value starting at ``text[start]`` runs to the end of ``text``.

    Trailing whitespace is ignored (a file cut inside a string and then given a final newline is
    still cut inside that string).

    Args:
        text: The document.
        start: Index where the value begins (whitespace before it is skipped).

    Returns:
        ``None`` when ``text[start:]`` is complete or is broken *before* its end (a real syntax
        error). Otherwise, when it is a valid beginning of a JSON value that ends too early, a
        phrase for what was open, e.g. ``"inside a string"``, ``"inside an object"``,
        ``"inside an array"``, ``"where a value should start"``.
    """
    text = text.rstrip(" \t\n\r")
    end = len(text)
    stack: list[str] = []  # "{" / "["
    index = _space_end(text, start)
    state = "value"  # value | after | key | colon
    while True:
        if index >= end:
            break
        char = text[index]
        if state in ("value", "key"):
            if state == "key" and char != '"':
                return None
            if char == '"':
                match = _STRING.match(text, index)
                if match is None:
                    return "inside a string" if _STRING_TAIL.match(text, index) else None
                index = match.end()
                state = "colon" if state == "key" else "after"
            elif char in "{[":
                stack.append(char)
                index = _space_end(text, index + 1)
                closer = "}" if char == "{" else "]"
                if index < end and text[index] == closer:
                    stack.pop()
                    index += 1
                    state = "after"
                else:
                    state = "key" if char == "{" else "value"
                continue
            elif char == "-" or char.isdigit():
                match = _NUMBER.match(text, index)
                if _NUMBER_TAIL.match(text, index) is not None:  # the number runs to the end
                    if match is None or match.end() < end:
                        return "inside a number"
                    return _open_phrase(stack) if stack else None
                if match is None:
                    return None
                index = match.end()
                state = "after"
            else:
                literal = next((word for word in _LITERALS if text.startswith(word, index)), None)
                if literal is not None:
                    index += len(literal)
                    state = "after"
                elif any(word.startswith(text[index:]) for word in _LITERALS):
                    return "inside a literal (true / false / null)"
                else:
                    return None
        elif state == "colon":
            if char != ":":
                return None
            index += 1
            state = "value"
        else:  # after a value
            if not stack:
                return None  # complete (anything after it is another problem)
            top = stack[-1]
            if char == ",":
                index += 1
                state = "key" if top == "{" else "value"
            elif (char == "}" and top == "{") or (char == "]" and top == "["):
                stack.pop()
                index += 1
                if not stack:
                    return None
            else:
                return None
        index = _space_end(text, index)
    if state == "after" and not stack:
        return None
    if state == "value" and not stack:
        return "where a value should start"
    return _open_phrase(stack)


def _open_phrase(stack: list[str]) -> str:
    return "inside an object" if stack and stack[-1] == "{" else "inside an array"


def last_content_position(text: str) -> int:
    """Index just past the last non-whitespace character of ``text`` (0 for a blank text)."""
    return len(text.rstrip(" \t\n\r"))


def decode_error_reason(exc: json.JSONDecodeError, line_shift: int = 0, column_shift: int = 0) -> str:
    """The full message of a JSON syntax error, never cut short.

    The standard library's ``exc.msg`` drops the position that some messages end on
    (``"Unterminated string starting at"``); the position is put back as ``line L, column C``.

    Args:
        exc: The decode error.
        line_shift: Added to ``exc.lineno`` (for a text that starts inside a bigger file).
        column_shift: Added to ``exc.colno`` when the error is on the text's first line.
    """
    message = exc.msg
    if message.endswith(" at"):
        column = exc.colno + (column_shift if exc.lineno == 1 else 0)
        message = f"{message} line {exc.lineno + line_shift}, column {column}"
    if message.startswith("Invalid control character"):
        char = exc.doc[exc.pos : exc.pos + 1]
        name = {"\n": "a raw line break", "\r": "a raw carriage return", "\t": "a raw tab"}.get(
            char, f"the control character U+{ord(char):04X}" if char else "a control character"
        )
        message += f" ({name} inside a string: write it escaped, e.g. \\n)"
    elif exc.doc[exc.pos : exc.pos + 1] == "\ufeff":
        message += (
            " (a byte-order mark, U+FEFF, where a value should start: files joined with `cat` keep"
            " each one's BOM; save the file without them)"
        )
    return message
