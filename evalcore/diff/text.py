"""Text diff of two values, bounded in time, with invisible characters made visible.

Most "why did this fail?" questions on string scorers are whitespace: a trailing space, a tab,
a Windows line ending, a non-breaking space. The diff compares lines first, then words
(word, punctuation and whitespace tokens) inside each changed block of lines. Inside changed
segments, whitespace that *differs* is replaced by a visible marker:

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

Spaces and line feeds are marked only in a segment that is whitespace alone or that differs from
the other side only in whitespace; the rarer invisible characters (tab, no-break space, carriage
return, zero-width) are marked in every changed segment. Unchanged segments keep their text as is,
so the eye goes to the markers only where it matters.

Text that is the same in another Unicode normal form looks identical, so a changed segment that
differs from the other side only in its form is marked too (:attr:`DiffSegment.form_differs`):

============================================  ======================================
difference                                    marker
============================================  ======================================
canonical (``é`` vs ``e`` + U+0301; NFC/NFD)  each combining mark on a dotted circle:
                                              ``e◌́`` (:data:`COMBINING_MARKER`)
compatibility (the ``ﬁ`` ligature, full-      each such character with its code point:
width letters; equal after NFKC)              ``⟨ﬁ U+FB01⟩``
============================================  ======================================

:attr:`TextDiff.normal_form_only` says when the whole difference is one of these.

The cost is bounded whatever the input (the page renders in well under 300 ms, see
``bench/bench_diff.py``): common prefix and suffix are cut off first, the rest goes to Myers'
O((N+M)·D) algorithm with a hard step budget; past :data:`WORD_DIFF_MAX_CHARS` the diff stays at
line level, past :data:`LINE_DIFF_MAX_CHARS` there is no diff at all, and :attr:`TextDiff.note`
says so. Values of different shapes (text vs JSON object vs JSON array) are never diffed.

Structures, prose and tool calls get their own diffs (:mod:`evalcore.diff.values` picks one).
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from evalcore.diff.myers import StepBudget, common_prefix, common_suffix, opcodes
from evalcore.valuetext import as_text, compact_head

__all__ = [
    "COMBINING_MARKER",
    "DISPLAY_MAX_CHARS",
    "LINE_DIFF_MAX_CHARS",
    "MARKERS",
    "STEP_BUDGET",
    "WORD_DIFF_MAX_CHARS",
    "DiffSegment",
    "TextDiff",
    "diff_texts",
    "line_ending",
    "make_visible",
    "normal_form_of",
    "shape_of",
    "shown_text",
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

COMBINING_MARKER = "\u25cc"
"""The dotted circle a combining mark is shown on, in a segment that differs only in normal form."""

WORD_DIFF_MAX_CHARS = 50_000
"""Above this many characters on either side, the diff is line-level only."""
LINE_DIFF_MAX_CHARS = 300_000
"""Above this many characters on either side, there is no diff: both texts are shown as they are."""
DISPLAY_MAX_CHARS = 200_000
"""Without a diff, each side shows at most this many characters (the rest is cut, and said so)."""
PRETTY_MAX_CHARS = 20_000
"""A structure is shown indented (:func:`as_text`) up to this many characters of compact JSON."""
STEP_BUDGET = 100_000
"""Myers steps (diagonal moves plus explored paths) one diff may spend, lines and words together.
Past it, the remaining changed region is shown as one replaced block."""

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
_INVISIBLE = re.compile("[" + "".join(MARKERS) + "]")
_RARE = re.compile("[\u00a0\t\r\u200b\ufeff]")
_HUNK_MAX_TOKENS = 20_000
"""A changed block of lines with more tokens than this on a side is not refined to words."""


def make_visible(text: str) -> str:
    """Replace whitespace and zero-width characters by their markers (see :data:`MARKERS`)."""
    return _INVISIBLE.sub(lambda m: MARKERS[m.group(0)], text)


def _make_rare_visible(text: str) -> str:
    return _RARE.sub(lambda m: MARKERS[m.group(0)], text)


def _same_form(a: str, b: str) -> str:
    """``"NFC"`` when ``a`` and ``b`` are the same text in another canonical form, ``"NFKC"`` when
    they are equal once compatibility characters are folded, ``""`` otherwise (or when equal)."""
    if a == b or (a.isascii() and b.isascii()):
        return ""
    if unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b):
        return "NFC"
    if unicodedata.normalize("NFKC", a) == unicodedata.normalize("NFKC", b):
        return "NFKC"
    return ""


def normal_form_of(text: str) -> str:
    """Which Unicode normal form ``text`` is in, as a page says it: ``"NFC (composed)"``, ``"NFD
    (decomposed)"``, or ``"neither NFC nor NFD"`` (text in both, e.g. ASCII, reads as NFC)."""
    if unicodedata.is_normalized("NFC", text):
        return "NFC (composed)"
    if unicodedata.is_normalized("NFD", text):
        return "NFD (decomposed)"
    return "neither NFC nor NFD"


def _mark_forms(text: str, form: str) -> str:
    """``text`` with what makes its normal form visible (see the module's table)."""
    if form == "NFC":
        return "".join(COMBINING_MARKER + c if unicodedata.combining(c) else c for c in text)
    out = []
    for c in text:
        if c not in MARKERS and not c.isascii() and unicodedata.normalize("NFKC", c) != c:
            out.append(f"⟨{c} U+{ord(c):04X}⟩")
        else:
            out.append(c)
    return "".join(out)


def shape_of(value: Any) -> str:
    """The shape a diff may compare: ``"object"`` (dict), ``"array"`` (list or tuple) or ``"text"``
    (a string, number, bool or null: anything shown as one piece of text)."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return "text"


def _is_blank(text: str) -> bool:
    return not _squeeze(text)


def _squeeze(text: str) -> str:
    return "".join(text.split()).replace("\u200b", "").replace("\ufeff", "")


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
    def whitespace_differs(self) -> bool:
        """A change in whitespace alone: a blank segment, or both sides equal once whitespace is
        removed. Then every space and line feed is marked; otherwise only the rare invisibles."""
        if not self.changed:
            return False
        if _is_blank(self.expected) and _is_blank(self.actual):
            return True
        return _squeeze(self.expected) == _squeeze(self.actual)

    @property
    def form_differs(self) -> str:
        """``"NFC"`` when this changed segment's two sides are the same text in another canonical
        normal form, ``"NFKC"`` when equal once compatibility characters are folded, else ``""``."""
        if not self.changed:
            return ""
        return _same_form(self.expected, self.actual)

    def _visible(self, text: str) -> str:
        if not self.changed:
            return text
        form = self.form_differs
        if form:
            text = _mark_forms(text, form)
        return make_visible(text) if self.whitespace_differs else _make_rare_visible(text)

    @property
    def expected_visible(self) -> str:
        """Expected text with markers where whitespace differs, as is when equal."""
        return self._visible(self.expected)

    @property
    def actual_visible(self) -> str:
        """Actual text with markers where whitespace differs, as is when equal."""
        return self._visible(self.actual)


@dataclass(frozen=True, slots=True)
class TextDiff:
    """The diff of two values.

    Attributes:
        segments: In order; concatenating ``expected`` (resp. ``actual``) gives back each text.
            Empty when ``mode`` is ``none`` or ``shapes`` (show ``expected_text``/``actual_text``).
        identical: The texts are equal.
        whitespace_only: They differ, but only in whitespace (the usual surprise).
        line_endings: ``(expected, actual)`` line-ending styles, see :func:`line_ending`.
        granularity: ``word``, ``line`` or ``none`` (no diff computed).
        mode: ``identical``, ``word`` (lines, then words inside changed lines), ``line`` (too long
            or too different for words), ``none`` (too long for any diff) or ``shapes`` (the
            values have different shapes, e.g. an object against a string: never diffed).
        note: One sentence for the page when the diff is coarser than words or absent; else ``""``.
        expected_text: The expected value as text (:func:`as_text`).
        actual_text: The actual value as text.
        shapes: ``(expected, actual)`` shapes, see :func:`shape_of`.
    """

    segments: list[DiffSegment] = field(default_factory=list)
    identical: bool = True
    whitespace_only: bool = False
    line_endings: tuple[str, str] = ("none", "none")
    granularity: str = "word"
    mode: str = "identical"
    note: str = ""
    expected_text: str = ""
    actual_text: str = ""
    shapes: tuple[str, str] = ("text", "text")

    @property
    def line_endings_differ(self) -> bool:
        return self.line_endings[0] != self.line_endings[1] and "none" not in self.line_endings

    @property
    def case_only(self) -> bool:
        """They differ only in letter case (not checked past :data:`LINE_DIFF_MAX_CHARS`)."""
        if self.identical or self.mode == "none":
            return False
        return self.expected_text.lower() == self.actual_text.lower()

    @property
    def normal_form_only(self) -> str:
        """``"NFC"`` when the two texts are the same text in another canonical normal form (they
        look identical: ``é`` composed vs ``e`` + U+0301), ``"NFKC"`` when they are equal once
        compatibility characters are folded (a ligature, a full-width letter; a no-break space
        alone is :attr:`whitespace_only`), ``""`` otherwise (not checked past
        :data:`LINE_DIFF_MAX_CHARS`)."""
        if self.identical or self.mode in ("none", "shapes") or self.whitespace_only:
            return ""
        return _same_form(self.expected_text, self.actual_text)

    @property
    def normal_forms(self) -> tuple[str, str]:
        """``(expected, actual)`` normal forms (:func:`normal_form_of`), for a page to name."""
        return normal_form_of(self.expected_text), normal_form_of(self.actual_text)

    @property
    def diffed(self) -> bool:
        """Segments are there to show (``word``, ``line`` or ``identical``)."""
        return self.mode in ("identical", "word", "line")

    @property
    def expected_shown(self) -> str:
        """The expected text as shown without a diff: cut at :data:`DISPLAY_MAX_CHARS`."""
        return _cut(self.expected_text)

    @property
    def actual_shown(self) -> str:
        """The actual text as shown without a diff: cut at :data:`DISPLAY_MAX_CHARS`."""
        return _cut(self.actual_text)


def _cut(text: str) -> str:
    if len(text) <= DISPLAY_MAX_CHARS:
        return text
    return text[:DISPLAY_MAX_CHARS] + f"\n… ({len(text) - DISPLAY_MAX_CHARS:,} more characters not shown)"


def shown_text(value: Any) -> str:
    """A value as a page shows it: :func:`as_text` (keys in their own order), cut after
    :data:`DISPLAY_MAX_CHARS` characters with a line saying so. A structure whose compact JSON
    is longer than :data:`PRETTY_MAX_CHARS` is written compactly (the indented form costs too
    much), and only its first :data:`DISPLAY_MAX_CHARS` characters are ever written."""
    if isinstance(value, str):
        return _cut(value)
    head, longer = compact_head(value, DISPLAY_MAX_CHARS)
    if longer:
        return head + "\n… (more characters not shown)"
    return as_text(value, sort_keys=False) if len(head) <= PRETTY_MAX_CHARS else head


def _hunk_segments(a: str, b: str, budget: StepBudget, words: bool) -> tuple[list[DiffSegment], bool]:
    """Segments of one changed block of lines; second item: refined to words."""
    if words:
        a_tokens, b_tokens = _TOKEN.findall(a), _TOKEN.findall(b)
        if max(len(a_tokens), len(b_tokens)) <= _HUNK_MAX_TOKENS:
            codes = opcodes(a_tokens, b_tokens, budget)
            if codes is not None:
                return [
                    DiffSegment(op, "".join(a_tokens[i1:i2]), "".join(b_tokens[j1:j2])) for op, i1, i2, j1, j2 in codes
                ], True
    op = "replace" if a and b else "delete" if a else "insert"
    return [DiffSegment(op, a, b)], False


def _segments(a: str, b: str) -> tuple[list[DiffSegment], str, str]:
    """(segments, mode, note) for two different texts under the size caps."""
    budget = StepBudget(STEP_BUDGET)
    words = max(len(a), len(b)) <= WORD_DIFF_MAX_CHARS
    # cut the common head and tail at whole lines first, at C speed: a long log with one changed
    # line costs a few string compares, whatever its length
    head = common_prefix(a, b)
    head = a.rfind("\n", 0, head) + 1
    tail = common_suffix(a, b, min(len(a), len(b)) - head)
    start_a, start_b = len(a) - tail, len(b) - tail
    if tail and not ((start_a == 0 or a[start_a - 1] == "\n") and (start_b == 0 or b[start_b - 1] == "\n")):
        newline = a.find("\n", start_a)  # the tail starts at the suffix's first whole line
        tail = len(a) - newline - 1 if newline >= 0 else 0
    a_mid, b_mid = a[head : len(a) - tail], b[head : len(b) - tail]
    a_lines, b_lines = a_mid.splitlines(keepends=True), b_mid.splitlines(keepends=True)
    codes = opcodes(a_lines, b_lines, budget)
    gave_up = codes is None
    if codes is None:
        codes = opcodes(a_lines, b_lines, None) or []
    segments: list[DiffSegment] = [DiffSegment("equal", a[:head], b[:head])] if head else []
    refined_all = True
    for op, i1, i2, j1, j2 in codes:
        left, right = "".join(a_lines[i1:i2]), "".join(b_lines[j1:j2])
        if op == "equal":
            segments.append(DiffSegment("equal", left, right))
            continue
        hunk, refined = _hunk_segments(left, right, budget, words and not gave_up)
        refined_all = refined_all and refined
        segments.extend(hunk)
    if tail:
        segments.append(DiffSegment("equal", a[len(a) - tail :], b[len(b) - tail :]))
    # merge neighbours of the same op (the head, word segments of adjacent hunks)
    merged: list[DiffSegment] = []
    for seg in segments:
        if merged and merged[-1].op == seg.op:
            last = merged.pop()
            seg = DiffSegment(seg.op, last.expected + seg.expected, last.actual + seg.actual)
        merged.append(seg)
    if not words:
        limit = f"{WORD_DIFF_MAX_CHARS:,}"
        return merged, "line", f"Line-level diff: a side is longer than {limit} characters, too long for a word diff."
    if gave_up:
        note = "Line-level diff: the texts differ in too many places for a finer diff; the changed middle is one block."
        return merged, "line", note
    if not refined_all:
        note = "Some changed blocks differ in too many places for a word diff: they are shown whole."
        return merged, "line", note
    return merged, "word", ""


def _text_for_diff(value: Any) -> str:
    """:func:`as_text`, except that a structure too large to diff is written as compact JSON by the
    C encoder (rendering it line by line in Python would cost more than the page may take)."""
    if isinstance(value, str):
        return value
    compact = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    return compact if len(compact) > LINE_DIFF_MAX_CHARS else as_text(value)


_SHAPE_WORDS = {"object": "a JSON object", "array": "a JSON array", "text": "text"}


def diff_texts(expected: Any, actual: Any) -> TextDiff:
    """Diff two values (strings, or JSON values rendered by :func:`as_text`), bounded in time.

    Lines first, then words inside changed lines; line-level only past
    :data:`WORD_DIFF_MAX_CHARS`; no diff past :data:`LINE_DIFF_MAX_CHARS` or when the values have
    different shapes (:func:`shape_of`). The chosen ``mode`` and a ``note`` saying why are on the
    result. Never raises on any JSON value.

    Args:
        expected: The case's expected value (or run A's output on the compare page).
        actual: The target's output (or run B's).

    Returns:
        The segments and a few flags describing the difference.
    """
    a, b = _text_for_diff(expected), _text_for_diff(actual)
    shapes = (shape_of(expected), shape_of(actual))
    whitespace_only, segments, note = False, [], ""
    if a == b and shapes[0] == shapes[1]:
        identical, mode = True, "identical"
        segments = [DiffSegment("equal", a, b)] if a else []
    elif shapes[0] != shapes[1]:
        identical, mode = False, "shapes"
        note = (
            f"Not diffed: the two values have different shapes ({_SHAPE_WORDS[shapes[0]]} and "
            f"{_SHAPE_WORDS[shapes[1]]}); both are shown as they are."
        )
    elif max(len(a), len(b)) > LINE_DIFF_MAX_CHARS:
        identical, mode = False, "none"
        note = f"No diff: a side is longer than {LINE_DIFF_MAX_CHARS:,} characters; both are shown as they are."
    else:
        identical = False
        whitespace_only = _squeeze(a) == _squeeze(b)
        segments, mode, note = _segments(a, b)
    return TextDiff(
        segments=segments,
        identical=identical,
        whitespace_only=whitespace_only,
        line_endings=(line_ending(a), line_ending(b)),
        granularity={"identical": "word", "shapes": "none"}.get(mode, mode),
        mode=mode,
        note=note,
        expected_text=a,
        actual_text=b,
        shapes=shapes,
    )
