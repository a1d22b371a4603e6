"""One-line previews of JSON values from the first characters of their stored JSON text.

A table of results shows each case's input, expected value and output without reading them
whole: the database returns only the first :data:`PREVIEW_CHARS` characters of each JSON column
(``SUBSTR`` / ``LEFT`` of its text), and :func:`preview_from_json` turns that prefix, possibly
cut in the middle of a string or an escape, into readable text: a JSON string shows its
characters (escapes decoded), a structure its compact JSON with non-ASCII characters as
themselves (SQLite stores them as ``\\uXXXX``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PREVIEW_CHARS", "SUMMARY_CHARS", "Preview", "preview_from_json"]

PREVIEW_CHARS = 600
"""Characters of stored JSON text read per value (the expanded preview shows about this many)."""
SUMMARY_CHARS = 90
"""Characters of the one-line summary."""

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_UNICODE = re.compile(r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})")


@dataclass(frozen=True, slots=True)
class Preview:
    """A value's preview.

    Attributes:
        text: The readable text (a string's characters, or a structure's compact JSON); at most
            about :data:`PREVIEW_CHARS` characters.
        cut: The value is longer than ``text`` (the case page shows it whole).
        empty: There is no value (``None`` stored, or no column).
    """

    text: str = ""
    cut: bool = False
    empty: bool = True

    @property
    def summary(self) -> str:
        """``text`` on one line (whitespace runs squeezed), cut at :data:`SUMMARY_CHARS` with ``…``."""
        line = " ".join(self.text.split())
        if len(line) > SUMMARY_CHARS:
            return line[: SUMMARY_CHARS - 1] + "…"
        return line + ("…" if self.cut else "")

    @property
    def expands(self) -> bool:
        """More than the summary line to show (an expandable preview)."""
        line = " ".join(self.text.split())
        return len(line) > SUMMARY_CHARS or "\n" in self.text.strip()


def _decode_string(body: str) -> tuple[str, bool]:
    """Characters of a JSON string literal's body (after the opening quote); second item: the
    literal was closed (else the prefix was cut inside it)."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch == '"':
            return "".join(out), True
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            break  # cut inside an escape
        code = body[i + 1]
        if code == "u":
            match = _UNICODE.match(body, i)
            if match is None:
                break  # cut inside \\uXXXX
            out.append(_code_point(match))
            i = match.end()
            continue
        out.append(_ESCAPES.get(code, code))
        i += 2
    return "".join(out), False


def _code_point(match: re.Match[str]) -> str:
    """The character of a ``\\uXXXX`` escape or of a surrogate pair (a lone surrogate: U+FFFD)."""
    if match.group(1):
        high, low = int(match.group(1), 16), int(match.group(2), 16)
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    point = int(match.group(3), 16)
    return "\ufffd" if 0xD800 <= point <= 0xDFFF else chr(point)


def _unescape_unicode(text: str) -> str:
    """Non-ASCII escapes of a structure's JSON text as their characters (quotes, backslashes
    and control characters stay escaped, so the text still reads as JSON)."""

    def one(match: re.Match[str]) -> str:
        char = _code_point(match)
        return char if char.isprintable() and char not in ('"', "\\") else match.group(0)

    return _UNICODE.sub(one, text)


def preview_from_json(prefix: str | None, limit: int = PREVIEW_CHARS) -> Preview:
    """The preview of a value from the first characters of its JSON text.

    Args:
        prefix: The stored JSON text's first ``limit + 1`` characters (``None``: no value).
        limit: How many characters are shown; a longer ``prefix`` means the value was cut.

    Returns:
        A :class:`Preview`; never raises, whatever the prefix (cut strings and escapes included).
    """
    if prefix is None:
        return Preview()
    cut = len(prefix) > limit
    text = prefix[:limit].strip()
    if text in ("", "null"):
        return Preview(empty=True) if not cut else Preview("null", cut, False)
    if text.startswith('"'):
        decoded, closed = _decode_string(text[1:])
        return Preview(decoded, cut or not closed, False)
    return Preview(_unescape_unicode(text), cut, False)
