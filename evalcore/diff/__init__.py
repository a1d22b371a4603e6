"""Diffs that understand the value: JSON by structure, prose by words, tool calls by call, text
by lines then words, bounded in time whatever the size.

:func:`diff_values` picks the diff for two values (:mod:`evalcore.diff.values`); the kinds live
in :mod:`~evalcore.diff.text` (lines then words, whitespace markers, size caps),
:mod:`~evalcore.diff.prose` (word by word), :mod:`~evalcore.diff.structural` (JSON paths) and
:mod:`~evalcore.diff.calls` (tool calls). Django-free: the pages render what these return.
"""

from evalcore.diff.calls import Call, CallChange, CallsDiff, as_calls, diff_calls
from evalcore.diff.prose import diff_prose, is_prose
from evalcore.diff.structural import ABSENT, PathChange, StructuralDiff, canonical, diff_json, same_json
from evalcore.diff.text import (
    _TOKEN,
    DISPLAY_MAX_CHARS,
    LINE_DIFF_MAX_CHARS,
    MARKERS,
    STEP_BUDGET,
    WORD_DIFF_MAX_CHARS,
    DiffSegment,
    TextDiff,
    diff_texts,
    line_ending,
    make_visible,
    shape_of,
    shown_text,
)
from evalcore.diff.values import ValueDiff, diff_values

__all__ = [
    "ABSENT",
    "DISPLAY_MAX_CHARS",
    "LINE_DIFF_MAX_CHARS",
    "MARKERS",
    "STEP_BUDGET",
    "WORD_DIFF_MAX_CHARS",
    "_TOKEN",
    "Call",
    "CallChange",
    "CallsDiff",
    "DiffSegment",
    "PathChange",
    "StructuralDiff",
    "TextDiff",
    "ValueDiff",
    "as_calls",
    "canonical",
    "diff_calls",
    "diff_json",
    "diff_prose",
    "diff_texts",
    "diff_values",
    "is_prose",
    "line_ending",
    "make_visible",
    "same_json",
    "shape_of",
    "shown_text",
]
