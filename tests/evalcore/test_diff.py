"""Expected-vs-actual diff: whitespace and line endings made visible."""

from __future__ import annotations

from evalcore.diff import as_text, diff_texts, line_ending, make_visible


def _changed(diff, side):
    return [getattr(s, f"{side}_visible") for s in diff.segments if s.changed]


def test_identical_texts():
    diff = diff_texts("Paris", "Paris")
    assert diff.identical and not diff.whitespace_only
    assert [s.op for s in diff.segments] == ["equal"]


def test_trailing_space_is_whitespace_only_and_marked():
    diff = diff_texts("42", "42 ")
    assert not diff.identical and diff.whitespace_only
    assert _changed(diff, "actual") == ["·"]


def test_crlf_vs_lf_is_visible_and_reported():
    diff = diff_texts("a\nb\n", "a\r\nb\r\n")
    assert diff.whitespace_only
    assert diff.line_endings == ("LF", "CRLF") and diff.line_endings_differ
    assert "␍↵\n" in _changed(diff, "actual")
    assert "↵\n" in _changed(diff, "expected")


def test_tab_and_nbsp_markers():
    assert make_visible("a\tb\u00a0c d\u200b") == "a→b⍽c·d␣"
    diff = diff_texts("a b", "a\tb")
    assert _changed(diff, "expected") == ["·"] and _changed(diff, "actual") == ["→"]


def test_word_level_replacement_keeps_equal_parts_plain():
    diff = diff_texts("The capital is Paris.", "The capital is Lyon.")
    ops = [(s.op, s.expected, s.actual) for s in diff.segments]
    assert ("replace", "Paris", "Lyon") in ops
    assert ops[0] == ("equal", "The capital is ", "The capital is ")
    assert diff.segments[0].expected_visible == "The capital is "  # unchanged text has no markers
    assert not diff.whitespace_only


def test_segments_rebuild_both_texts():
    a, b = "one two  three\nfour", "one 2 three\r\nfour five"
    diff = diff_texts(a, b)
    assert "".join(s.expected for s in diff.segments) == a
    assert "".join(s.actual for s in diff.segments) == b


def test_case_only_and_json_values():
    assert diff_texts("Paris", "paris").case_only
    diff = diff_texts({"b": 1, "a": [1, 2]}, {"a": [1, 2], "b": 2})
    assert as_text({"b": 1}) == '{\n  "b": 1\n}'
    assert ("replace", "1", "2") in [(s.op, s.expected, s.actual) for s in diff.segments]


def test_line_ending_styles():
    assert line_ending("x") == "none"
    assert line_ending("a\nb") == "LF"
    assert line_ending("a\r\nb") == "CRLF"
    assert line_ending("a\rb") == "CR"
    assert line_ending("a\r\nb\nc") == "mixed"


def test_long_texts_fall_back_to_lines():
    a = "\n".join(f"line {i} word" for i in range(8000))
    b = a.replace("line 4000 word", "line 4000 WORD")
    diff = diff_texts(a, b)
    assert diff.granularity == "line"
    assert [s.expected for s in diff.segments if s.changed] == ["line 4000 word\n"]
