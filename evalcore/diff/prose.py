"""Prose diff: two multi-word texts compared word by word, whatever their line breaks.

A line-first diff suits code and logs; on prose it fails as soon as a paragraph is rewrapped or
one sentence grows: every later line "changes". :func:`diff_prose` tokenises both texts into
words, punctuation and whitespace (the tokens of :mod:`evalcore.diff.text`) and runs Myers'
shortest edit script over the tokens, bounded by a step budget; past it, or past
:data:`PROSE_MAX_TOKENS`, it hands over to :func:`~evalcore.diff.text.diff_texts` (lines, then
words). Whitespace markers follow the text diff's rule: only where whitespace differs.

:func:`is_prose` tells prose from code, logs and data: several words, mostly letters, no
indented lines.
"""

from __future__ import annotations

import re

from evalcore.diff.myers import StepBudget, opcodes
from evalcore.diff.text import _TOKEN, WORD_DIFF_MAX_CHARS, DiffSegment, TextDiff, _squeeze, diff_texts, line_ending

__all__ = ["PROSE_MAX_TOKENS", "diff_prose", "is_prose"]

PROSE_MAX_TOKENS = 20_000
"""A side with more tokens than this is diffed as text (lines, then words)."""
_STEP_BUDGET = 100_000

_WORD = re.compile(r"[^\W\d_]{2,}")
_INDENTED = re.compile(r"^(?: {2,}|\t)\S", re.MULTILINE)
_LETTERS_SHARE = 0.75


def is_prose(text: str) -> bool:
    """Multi-word running text: at least three words, letters and spaces making most of it
    (:data:`_LETTERS_SHARE`), no indented line (code), at most :data:`~evalcore.diff.text.
    WORD_DIFF_MAX_CHARS` characters. ``"ok\\nok\\n"`` (a log), ``def f():\\n    pass`` (code)
    and ``{"a": 1}`` are not prose; a sentence or a few paragraphs are."""
    if len(text) > WORD_DIFF_MAX_CHARS or len(_WORD.findall(text, 0, 2000)) < 3:
        return False
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 2 and sum(len(_WORD.findall(line)) for line in lines) < 3 * len(lines):
        return False  # short lines of one or two words: a list or a log, read line by line
    if _INDENTED.search(text):
        return False
    letters = sum(1 for ch in text if ch.isalpha() or ch.isspace())
    return letters >= _LETTERS_SHARE * len(text)


def diff_prose(a: str, b: str) -> TextDiff:
    """Word-by-word diff of two texts (``mode`` ``prose``), or the text diff when too long or
    too different for it (its ``mode`` and ``note`` then say which). Never raises."""
    a_tokens, b_tokens = _TOKEN.findall(a), _TOKEN.findall(b)
    codes = None
    if max(len(a_tokens), len(b_tokens)) <= PROSE_MAX_TOKENS:
        codes = opcodes(a_tokens, b_tokens, StepBudget(_STEP_BUDGET))
    if codes is None:
        return diff_texts(a, b)
    segments = [DiffSegment(op, "".join(a_tokens[i1:i2]), "".join(b_tokens[j1:j2])) for op, i1, i2, j1, j2 in codes]
    return _prose_diff(a, b, _readable(segments))


def _op(expected: str, actual: str) -> str:
    return "replace" if expected and actual else "delete" if expected else "insert"


def _readable(segments: list[DiffSegment]) -> list[DiffSegment]:
    """Changed words separated only by a space read as one change (``the big dog`` → ``a small
    cat``, not three one-word swaps); then neighbours of the same op are merged."""
    out: list[DiffSegment] = []
    for index, seg in enumerate(segments):
        glue = (
            seg.op == "equal"
            and not seg.expected.strip()
            and "\n" not in seg.expected
            and 0 < index < len(segments) - 1
            and out
            and out[-1].changed
            and segments[index + 1].changed
        )
        if glue or (out and seg.changed and out[-1].changed):
            last = out.pop()
            expected, actual = last.expected + seg.expected, last.actual + seg.actual
            seg = DiffSegment(_op(expected, actual), expected, actual)
        elif out and out[-1].op == seg.op:
            last = out.pop()
            seg = DiffSegment(seg.op, last.expected + seg.expected, last.actual + seg.actual)
        out.append(seg)
    return out


def _prose_diff(a: str, b: str, merged: list[DiffSegment]) -> TextDiff:
    squeezed = _squeeze(a) == _squeeze(b)
    return TextDiff(
        segments=merged,
        identical=False,
        whitespace_only=squeezed,
        line_endings=(line_ending(a), line_ending(b)),
        granularity="word",
        mode="prose",
        note="",
        expected_text=a,
        actual_text=b,
        shapes=("text", "text"),
    )
