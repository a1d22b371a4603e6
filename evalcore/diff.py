"""Expected-vs-actual text diff, bounded in time, with invisible characters made visible.

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

The cost is bounded whatever the input (the page renders in well under 300 ms, see
``bench/bench_diff.py``): common prefix and suffix are cut off first, the rest goes to Myers'
O((N+M)·D) algorithm with a hard step budget; past :data:`WORD_DIFF_MAX_CHARS` the diff stays at
line level, past :data:`LINE_DIFF_MAX_CHARS` there is no diff at all, and :attr:`TextDiff.note`
says so. Values of different shapes (text vs JSON object vs JSON array) are never diffed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DISPLAY_MAX_CHARS",
    "LINE_DIFF_MAX_CHARS",
    "MARKERS",
    "STEP_BUDGET",
    "WORD_DIFF_MAX_CHARS",
    "DiffSegment",
    "TextDiff",
    "as_text",
    "diff_texts",
    "line_ending",
    "make_visible",
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

WORD_DIFF_MAX_CHARS = 50_000
"""Above this many characters on either side, the diff is line-level only."""
LINE_DIFF_MAX_CHARS = 300_000
"""Above this many characters on either side, there is no diff: both texts are shown as they are."""
DISPLAY_MAX_CHARS = 200_000
"""Without a diff, each side shows at most this many characters (the rest is cut, and said so)."""
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

    def _visible(self, text: str) -> str:
        if not self.changed:
            return text
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
    :data:`DISPLAY_MAX_CHARS` characters with a line saying how many more there are. A structure
    whose compact JSON is that long is written compactly (the indented form costs too much)."""
    if isinstance(value, str):
        return _cut(value)
    compact = json.dumps(value, ensure_ascii=False, default=str)
    return _cut(compact if len(compact) > DISPLAY_MAX_CHARS else as_text(value, sort_keys=False))


class _Budget:
    __slots__ = ("left",)

    def __init__(self, steps: int) -> None:
        self.left = steps


Opcode = tuple[str, int, int, int, int]


def _myers_matches(a: list[Any], b: list[Any], budget: _Budget) -> list[tuple[int, int]] | None:
    """Matched index pairs of a shortest edit script (Myers 1986), or None past the budget."""
    n, m = len(a), len(b)
    v: dict[int, int] = {1: 0}
    trace: list[dict[int, int]] = []
    for d in range(n + m + 1):
        trace.append(dict(v))
        budget.left -= d + 1
        if budget.left < 0:
            return None
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[k - 1] < v[k + 1]):
                x = v[k + 1]
            else:
                x = v[k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            budget.left -= x - start
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m)
        if budget.left < 0:
            return None
    return _backtrack(trace, n, m)  # pragma: no cover - the loop always ends at d <= n + m


def _backtrack(trace: list[dict[int, int]], n: int, m: int) -> list[tuple[int, int]]:
    x, y = n, m
    matches: list[tuple[int, int]] = []
    for d in range(len(trace) - 1, -1, -1):
        v = trace[d]
        k = x - y
        prev_k = k + 1 if k == -d or (k != d and v.get(k - 1, -1) < v.get(k + 1, -1)) else k - 1
        prev_x = v.get(prev_k, 0)
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            matches.append((x, y))
        x, y = prev_x, prev_y
    matches.reverse()
    return matches


def _common_prefix(a: Any, b: Any) -> int:
    """Length of the common prefix of two sequences (binary search over C-speed slice compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: Any, b: Any, limit: int) -> int:
    """Length of the common suffix of two sequences, at most ``limit``."""
    low, high = 0, limit
    n, m = len(a), len(b)
    while low < high:
        mid = (low + high + 1) // 2
        if a[n - mid :] == b[m - mid :]:
            low = mid
        else:
            high = mid - 1
    return low


def _opcodes(a: list[Any], b: list[Any], budget: _Budget | None) -> list[Opcode] | None:
    """difflib-style opcodes between two sequences, or None when the budget ran out.

    Without a budget, only the common prefix and suffix are found; the middle is one change."""
    n, m = len(a), len(b)
    head = _common_prefix(a, b)
    tail = _common_suffix(a, b, min(n, m) - head)
    middle: list[Opcode] = []
    a_mid, b_mid = a[head : n - tail], b[head : m - tail]
    found = _myers_matches(a_mid, b_mid, budget) if budget is not None else []
    if found is None:
        return None
    i = j = 0
    for x, y in [*found, (len(a_mid), len(b_mid))]:
        if x > i or y > j:
            tag = "replace" if x > i and y > j else "delete" if x > i else "insert"
            middle.append((tag, i + head, x + head, j + head, y + head))
        if x < len(a_mid):
            if middle and middle[-1][0] == "equal" and middle[-1][2] == x + head:
                _, i1, _, j1, _ = middle[-1]
                middle[-1] = ("equal", i1, x + head + 1, j1, y + head + 1)
            else:
                middle.append(("equal", x + head, x + head + 1, y + head, y + head + 1))
        i, j = x + 1, y + 1
    codes: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    codes.extend(middle)
    if tail:
        codes.append(("equal", n - tail, n, m - tail, m))
    return codes


def _hunk_segments(a: str, b: str, budget: _Budget, words: bool) -> tuple[list[DiffSegment], bool]:
    """Segments of one changed block of lines; second item: refined to words."""
    if words:
        a_tokens, b_tokens = _TOKEN.findall(a), _TOKEN.findall(b)
        if max(len(a_tokens), len(b_tokens)) <= _HUNK_MAX_TOKENS:
            codes = _opcodes(a_tokens, b_tokens, budget)
            if codes is not None:
                return [
                    DiffSegment(op, "".join(a_tokens[i1:i2]), "".join(b_tokens[j1:j2])) for op, i1, i2, j1, j2 in codes
                ], True
    op = "replace" if a and b else "delete" if a else "insert"
    return [DiffSegment(op, a, b)], False


def _segments(a: str, b: str) -> tuple[list[DiffSegment], str, str]:
    """(segments, mode, note) for two different texts under the size caps."""
    budget = _Budget(STEP_BUDGET)
    words = max(len(a), len(b)) <= WORD_DIFF_MAX_CHARS
    # cut the common head and tail at whole lines first, at C speed: a long log with one changed
    # line costs a few string compares, whatever its length
    head = _common_prefix(a, b)
    head = a.rfind("\n", 0, head) + 1
    tail = _common_suffix(a, b, min(len(a), len(b)) - head)
    start_a, start_b = len(a) - tail, len(b) - tail
    if tail and not ((start_a == 0 or a[start_a - 1] == "\n") and (start_b == 0 or b[start_b - 1] == "\n")):
        newline = a.find("\n", start_a)  # the tail starts at the suffix's first whole line
        tail = len(a) - newline - 1 if newline >= 0 else 0
    a_mid, b_mid = a[head : len(a) - tail], b[head : len(b) - tail]
    a_lines, b_lines = a_mid.splitlines(keepends=True), b_mid.splitlines(keepends=True)
    codes = _opcodes(a_lines, b_lines, budget)
    gave_up = codes is None
    if codes is None:
        codes = _opcodes(a_lines, b_lines, None) or []
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
