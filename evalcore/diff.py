"""Expected-vs-actual text diff with invisible characters made visible.

Most "why did this fail?" questions on string scorers are whitespace: a trailing space, a tab,
a Windows line ending, a non-breaking space. The diff is word-level (``difflib.SequenceMatcher``
over word, punctuation and whitespace tokens), and inside changed segments every whitespace
character is replaced by a visible marker:

====================  ======
character              marker
====================  ======
space                  ``·``
no-break space         ``⍽``
tab                    ``→``
carriage return        ``␍``
line feed              ``↵`` (followed by a real line break)
zero-width / BOM       ``␣``
====================  ======

Unchanged segments keep their text as is, so the eye goes to the markers only where it matters.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MARKERS",
    "DiffSegment",
    "TextDiff",
    "as_text",
    "diff_texts",
    "line_ending",
    "make_visible",
]

MARKERS: dict[str, str] = {
    " ": "·",
    "\u00a0": "⍽",
    "\t": "→",
    "\r": "␍",
    "\n": "↵\n",
    "\u200b": "␣",
    "\ufeff": "␣",
}
"""Character -> visible marker used inside changed segments."""

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
_INVISIBLE = re.compile("[" + "".join(MARKERS) + "]")
_MAX_TOKENS = 20000
"""Above this many tokens per side the diff is line-level (SequenceMatcher is quadratic in the worst case)."""


def make_visible(text: str) -> str:
    """Replace whitespace and zero-width characters by their markers (see :data:`MARKERS`)."""
    return _INVISIBLE.sub(lambda m: MARKERS[m.group(0)], text)


def as_text(value: Any) -> str:
    """A JSON value as diffable text: strings as they are, anything else as indented sorted JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def line_ending(text: str) -> str:
    """``"CRLF"``, ``"LF"``, ``"CR"``, ``"mixed"`` or ``"none"`` (no line break at all)."""
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    kinds = [name for name, count in (("CRLF", crlf), ("LF", lf), ("CR", cr)) if count]
    if not kinds:
        return "none"
    return kinds[0] if len(kinds) == 1 else "mixed"


@dataclass(frozen=True, slots=True)
class DiffSegment:
    """One stretch of the diff.

    Attributes:
        op: ``equal``, ``delete`` (only in expected), ``insert`` (only in actual) or ``replace``.
        expected: The expected side's text (empty for ``insert``).
        actual: The actual side's text (empty for ``delete``).
    """

    op: str
    expected: str
    actual: str

    @property
    def changed(self) -> bool:
        return self.op != "equal"

    @property
    def expected_visible(self) -> str:
        """Expected text with markers when changed, as is when equal."""
        return make_visible(self.expected) if self.changed else self.expected

    @property
    def actual_visible(self) -> str:
        """Actual text with markers when changed, as is when equal."""
        return make_visible(self.actual) if self.changed else self.actual


@dataclass(frozen=True, slots=True)
class TextDiff:
    """The diff of two texts.

    Attributes:
        segments: In order; concatenating ``expected`` (resp. ``actual``) gives back each text.
        identical: The texts are equal.
        whitespace_only: They differ, but only in whitespace (the usual surprise).
        line_endings: ``(expected, actual)`` line-ending styles, see :func:`line_ending`.
        granularity: ``word`` or ``line`` (long texts).
    """

    segments: list[DiffSegment] = field(default_factory=list)
    identical: bool = True
    whitespace_only: bool = False
    line_endings: tuple[str, str] = ("none", "none")
    granularity: str = "word"

    @property
    def line_endings_differ(self) -> bool:
        return self.line_endings[0] != self.line_endings[1] and "none" not in self.line_endings

    @property
    def case_only(self) -> bool:
        """They differ only in letter case."""
        expected = "".join(s.expected for s in self.segments)
        actual = "".join(s.actual for s in self.segments)
        return not self.identical and expected.lower() == actual.lower()


def _tokens(text: str, granularity: str) -> list[str]:
    if granularity == "line":
        return text.splitlines(keepends=True)
    return _TOKEN.findall(text)


def diff_texts(expected: Any, actual: Any) -> TextDiff:
    """Diff two values (strings, or JSON values rendered by :func:`as_text`) word by word.

    Args:
        expected: The case's expected value.
        actual: The target's output.

    Returns:
        The segments and a few flags describing the difference.
    """
    a, b = as_text(expected), as_text(actual)
    endings = (line_ending(a), line_ending(b))
    if a == b:
        return TextDiff([DiffSegment("equal", a, b)] if a else [], True, False, endings)
    granularity = "word"
    a_tokens, b_tokens = _tokens(a, granularity), _tokens(b, granularity)
    if max(len(a_tokens), len(b_tokens)) > _MAX_TOKENS:
        granularity = "line"
        a_tokens, b_tokens = _tokens(a, granularity), _tokens(b, granularity)
    matcher = difflib.SequenceMatcher(None, a_tokens, b_tokens, autojunk=False)
    segments = [
        DiffSegment(op, "".join(a_tokens[i1:i2]), "".join(b_tokens[j1:j2]))
        for op, i1, i2, j1, j2 in matcher.get_opcodes()
    ]
    whitespace_only = "".join(a.split()) == "".join(b.split())
    return TextDiff(segments, False, whitespace_only, endings, granularity)
