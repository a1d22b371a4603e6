"""Expected-vs-actual diff: whitespace and line endings made visible."""

from __future__ import annotations

import random

import pytest

from evalcore.diff import (
    _TOKEN,
    DISPLAY_MAX_CHARS,
    LINE_DIFF_MAX_CHARS,
    WORD_DIFF_MAX_CHARS,
    diff_texts,
    line_ending,
    make_visible,
    shape_of,
    shown_text,
)
from evalcore.valuetext import as_text


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


# --- bounded diff: repro bh-20 (tests/fixtures/repros/bh-20-diff-time.py); speed is in bench/bench_diff.py


def _rebuilds(diff, a, b):
    assert "".join(s.expected for s in diff.segments) == a
    assert "".join(s.actual for s in diff.segments) == b
    assert all(s.expected == s.actual for s in diff.segments if s.op == "equal")


@pytest.mark.parametrize("n", [2000, 5000, 10000])
def test_bh20_repeated_lines_one_changed_line_is_one_insert(n):
    expected = "ok\n" * n
    actual = "ok\n" * (n // 2) + "FAIL\n" + "ok\n" * (n // 2)
    diff = diff_texts(expected, actual)
    assert diff.mode == ("word" if len(actual) <= WORD_DIFF_MAX_CHARS else "line")
    assert [(s.op, s.expected, s.actual) for s in diff.segments if s.changed] == [("insert", "", "FAIL\n")]
    _rebuilds(diff, expected, actual)


def test_word_then_line_then_no_diff_by_size_with_a_note():
    small = diff_texts("alpha beta\n" * 10, "alpha beta\n" * 5 + "alpha BETA\n" + "alpha beta\n" * 4)
    assert (small.mode, small.granularity, small.note) == ("word", "word", "")
    assert [(s.expected, s.actual) for s in small.segments if s.changed] == [("beta", "BETA")]

    n = WORD_DIFF_MAX_CHARS // 11 + 1
    line = diff_texts("alpha beta\n" * n, "alpha beta\n" * (n - 1) + "alpha BETA\n")
    assert line.mode == "line" and "too long for a word diff" in line.note
    assert [(s.expected, s.actual) for s in line.segments if s.changed] == [("alpha beta\n", "alpha BETA\n")]

    n = LINE_DIFF_MAX_CHARS // 3 + 1
    big = diff_texts("ok\n" * n, "ok\n" * n + "FAIL\n")
    assert big.mode == "none" and big.granularity == "none" and not big.diffed
    assert big.segments == [] and "No diff" in big.note and "300,000" in big.note
    assert big.expected_shown.startswith("ok\n") and big.expected_shown.endswith("more characters not shown)")
    assert len(big.expected_shown) < DISPLAY_MAX_CHARS + 100


def test_past_the_step_budget_the_changed_middle_is_one_block():
    a = "".join(f"a{i}\nsame\n" for i in range(3000))
    b = "".join(f"b{i}\nsame\n" for i in range(3000))
    diff = diff_texts("head\n" + a + "tail\n", "head\n" + b + "tail\n")
    assert diff.mode == "line" and "too many places" in diff.note
    assert [s.op for s in diff.segments] == ["equal", "replace", "equal"]
    assert diff.segments[0].expected == "head\n" and diff.segments[-1].expected == "same\ntail\n"
    _rebuilds(diff, "head\n" + a + "tail\n", "head\n" + b + "tail\n")


def test_a_long_line_too_different_for_words_is_shown_whole():
    rng = random.Random(3)
    a = " ".join(rng.choice(("x", "y", "z")) for _ in range(3000))
    b = " ".join(rng.choice(("x", "y", "z")) for _ in range(3000))
    diff = diff_texts(a, b)
    assert diff.mode == "line" and "shown whole" in diff.note
    _rebuilds(diff, a, b)


def test_random_texts_rebuild_and_the_diff_is_minimal():
    rng = random.Random(7)
    pieces = ["ok\n", "x y\n", "a\tb\r\n", " ", "z", "ok"]
    for _ in range(400):
        a = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 15)))
        b = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 15)))
        _rebuilds(diff_texts(a, b), a, b)
    # the tokens kept equal are a longest common subsequence of the two token lists
    for _ in range(300):
        a = " ".join(rng.choice("abc") for _ in range(rng.randint(0, 12)))
        b = " ".join(rng.choice("abc") for _ in range(rng.randint(0, 12)))
        tokens_a, tokens_b = _TOKEN.findall(a), _TOKEN.findall(b)
        lcs = [[0] * (len(tokens_b) + 1) for _ in range(len(tokens_a) + 1)]
        for i in range(len(tokens_a) - 1, -1, -1):
            for j in range(len(tokens_b) - 1, -1, -1):
                same = tokens_a[i] == tokens_b[j]
                lcs[i][j] = lcs[i + 1][j + 1] + 1 if same else max(lcs[i + 1][j], lcs[i][j + 1])
        diff = diff_texts(a, b)
        kept = sum(len(_TOKEN.findall(s.expected)) for s in diff.segments if s.op == "equal")
        assert kept == lcs[0][0], (a, b)


# --- shapes and text: repro ho-09


def test_values_of_different_shapes_are_not_diffed():
    code = "def f(x):\n    return x\n"
    diff = diff_texts({"test": code, "entry_point": "f"}, code)
    assert diff.mode == "shapes" and diff.shapes == ("object", "text") and not diff.diffed
    assert diff.segments == [] and not diff.identical
    assert "different shapes (a JSON object and text)" in diff.note
    assert diff.actual_shown == code
    assert diff_texts([1, 2], {"a": 1}).mode == "shapes"
    assert diff_texts([1, 2], [1, 3]).mode == "word"  # same-kind structures are diffed
    assert diff_texts(42, "42 ").mode == "word"  # scalars are text
    assert shape_of(None) == shape_of(1.5) == shape_of("x") == "text"


def test_multiline_strings_inside_structures_are_text_blocks():
    text = as_text({"test": "\n\ndef check(c):\n    assert c(1) == 1\n", "entry_point": "f", "n": [1, "a\nb"]})
    assert "\\n" not in text
    assert text == (
        "{\n"
        '  "entry_point": "f",\n'
        '  "n": [\n'
        "    1,\n"
        "    |\n"
        "        a\n"
        "        b\n"
        "  ],\n"
        '  "test": |\n'
        "\n"
        "\n"
        "      def check(c):\n"
        "          assert c(1) == 1\n"
        "}"
    )
    assert as_text({"b": 1, "a": 2}, sort_keys=False) == '{\n  "b": 1,\n  "a": 2\n}'
    assert as_text({}) == "{}" and as_text([]) == "[]" and as_text("a\nb") == "a\nb"


def test_markers_only_where_whitespace_differs():
    # an inserted line of code: its spaces and line feed are not marked
    diff = diff_texts("def f():\n    pass\n", "def f():\n    x = 1\n    pass\n")
    (inserted,) = [s for s in diff.segments if s.changed]
    assert "·" not in inserted.actual_visible and "↵" not in inserted.actual_visible
    # a replaced word keeps its neighbours' spaces unmarked
    diff = diff_texts("return max(a, b)", "return min(a, b)")
    assert [s.actual_visible for s in diff.segments if s.changed] == ["min"]
    # indentation changed: marked
    diff = diff_texts("if x:\n    y\n", "if x:\n  y\n")
    assert [(s.expected_visible, s.actual_visible) for s in diff.segments if s.changed] == [("····", "··")]
    # a tab or a no-break space inside a changed stretch is always marked (they look like spaces)
    diff = diff_texts("a b c", "a\tb\u00a0d")
    assert "→" in "".join(s.actual_visible for s in diff.segments if s.changed)
    assert "⍽" in "".join(s.actual_visible for s in diff.segments if s.changed)


def test_shown_text_cuts_long_values_and_says_so():
    assert shown_text({"b": "x\n  y", "a": 1}) == '{\n  "b": |\n      x\n        y\n  ,\n  "a": 1\n}'
    long = shown_text("z" * (DISPLAY_MAX_CHARS + 5))
    assert long == "z" * DISPLAY_MAX_CHARS + "\n… (5 more characters not shown)"
    big = shown_text({"items": list(range(DISPLAY_MAX_CHARS // 2))})
    assert big.startswith('{"items": [0, 1, 2') and big.endswith("more characters not shown)")
