"""Diffs that understand the value (issue 13 §2): JSON by path, tool calls by call, prose by word,
text by line then word, shapes never diffed; repros bh-20 and ho-09 through :func:`diff_values`.
Speed is measured by ``bench/bench_diff.py``; these tests assert what is found and its bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalcore.diff import ABSENT, as_calls, diff_json, diff_values, is_prose, shown_text
from evalcore.diff.structural import MAX_CHANGES
from evalcore.preview import PREVIEW_CHARS, preview_from_json
from evalcore.valuetext import compact_head

REPROS = Path(__file__).resolve().parents[1] / "fixtures" / "repros"


def changed(diff) -> list[tuple[str, str, str]]:
    return [(s.op, s.expected, s.actual) for s in diff.text.segments if s.changed]


# -- JSON, structurally -----------------------------------------------------------------------


def test_json_answer_lists_the_paths_that_changed():
    expected = {"answer": {"city": "Paris", "country": "France"}, "sources": ["wiki/Paris", "wiki/France"], "n": 2}
    actual = {"answer": {"city": "Rome", "country": "France"}, "sources": ["wiki/Paris", "wiki/France", "x"], "k": 1}
    diff = diff_values(expected, actual)
    assert (diff.kind, diff.mode, diff.identical) == ("json", "json", False)
    assert diff.structure.lines() == [
        '~ $.answer.city: "Paris" → "Rome"',
        '+ $.sources[2]: "x"',
        "- $.n: 2",
        "+ $.k: 1",
    ]
    assert (diff.structure.changed, diff.structure.added, diff.structure.removed) == (1, 2, 1)
    city = diff.structure.changes[0]
    assert city.words is not None and [(s.expected, s.actual) for s in city.words.segments if s.changed] == [
        ("Paris", "Rome")
    ]
    removed = diff.structure.changes[2]
    assert removed.after is ABSENT and removed.after_text == "" and removed.before_text == "2"


def test_json_arrays_are_aligned_not_shifted():
    rows = [{"id": i, "title": f"doc {i}"} for i in range(50)]
    inserted = [{"id": -1, "title": "new"}, *rows]
    assert diff_json(rows, inserted).lines() == ['+ $[0]: {"id": -1, "title": "new"}']
    dropped = rows[:10] + rows[11:]
    assert diff_json(rows, dropped).lines() == ['- $[10]: {"id": 10, "title": "doc 10"}']
    edited = [dict(r) for r in rows]
    edited[30]["title"] = "DOC 30"
    assert diff_json(rows, edited).lines() == ['~ $[30].title: "doc 30" → "DOC 30"']


def test_json_values_compare_as_json_not_as_python():
    assert diff_json({"ok": True}, {"ok": 1}).lines() == ["~ $.ok: true → 1"]
    assert diff_json({"a": [1, {"b": True}]}, {"a": [1, {"b": 1}]}).lines() == ["~ $.a[1].b: true → 1"]
    assert diff_json([1, 2.0], [1, 2]).lines() == ["~ $[1]: 2.0 → 2"]
    change = diff_json({"v": "3"}, {"v": 3}).changes[0]
    assert change.kind_changed and not diff_json({"v": 2}, {"v": 3}).changes[0].kind_changed
    assert diff_json({"odd key": 1, "é": 2}, {"odd key": 2, "é": 3}).lines() == [
        '~ $["odd key"]: 1 → 2',
        '~ $["é"]: 2 → 3',
    ]
    assert diff_values({"b": 1, "a": 2}, {"a": 2, "b": 1}).kind == "identical"  # key order is no change


def test_json_diff_is_bounded_and_says_when_it_stopped():
    a = {"rows": [{"v": i} for i in range(3000)]}
    b = {"rows": [{"v": -i - 1} for i in range(3000)]}
    found = diff_json(a, b)
    assert len(found.changes) == MAX_CHANGES and not found.complete
    assert "Not every difference is listed: the first 500 differences are listed" in found.note
    diff = diff_values(a, b)
    assert "the first 500 differences" in diff.note
    # a long value in a change is cut
    long = diff_json({"t": "x" * 1000}, {"t": 1}).changes[0]
    assert len(long.before_text) == 301 and long.before_text.endswith("…")


def test_json_text_is_read_as_the_structure_it_holds():
    diff = diff_values('{"city": "Paris", "pop": 2.1}', {"city": "Rome", "pop": 2.1})
    assert diff.kind == "json" and diff.parsed == "expected"
    assert diff.structure.lines() == ['~ $.city: "Paris" → "Rome"']
    assert "The expected value is JSON text, compared as the structure it holds." in diff.note
    both = diff_values("[1, 2]\n", "[1, 3]")
    assert both.kind == "json" and both.parsed == "both" and both.structure.lines() == ["~ $[1]: 2 → 3"]
    assert diff_values("[not json", [1]).kind == "shapes"


# -- tool calls -------------------------------------------------------------------------------


def test_tool_calls_are_compared_call_by_call():
    expected = [
        {"name": "search", "arguments": {"q": "capital of France", "k": 3}},
        {"name": "fetch", "arguments": {"url": "https://fr.wikipedia.org/wiki/Paris"}},
        {"name": "answer", "arguments": {"text": "Paris"}},
    ]
    actual = [
        {"type": "function", "function": {"name": "search", "arguments": '{"q": "capital of Italy", "k": 3}'}},
        {"name": "lookup", "arguments": {"url": "https://fr.wikipedia.org/wiki/Paris"}},
        {"name": "fetch", "arguments": {"url": "https://it.wikipedia.org/wiki/Roma", "lang": "it"}},
        {"name": "answer", "arguments": {"text": "Rome"}},
    ]
    diff = diff_values(expected, actual)
    assert diff.kind == "tool_calls" and diff.mode == "tool_calls"
    rows = [(c.status, c.expected_index, c.actual_index, [str(a) for a in c.arguments]) for c in diff.calls.calls]
    assert rows == [
        ("arguments", 0, 0, ['~ $.q: "capital of France" → "capital of Italy"']),
        ("extra", None, 1, []),
        (
            "arguments",
            1,
            2,
            ['~ $.url: "https://fr.wikipedia.org/wiki/Paris" → "https://it.wikipedia.org/wiki/Roma"', '+ $.lang: "it"'],
        ),
        ("arguments", 2, 3, ['~ $.text: "Paris" → "Rome"']),
    ]
    assert diff.calls.summary() == "3 expected calls, 4 made: 3 with other arguments, 1 extra."
    assert diff.calls.calls[1].position == "— → #2" and diff.calls.calls[2].position == "#2 → #3"


def test_tool_calls_missing_replaced_and_adk_cases():
    expected = {"final_response": "It is 18°C.", "tool_calls": [{"name": "weather", "args": {"city": "Oslo"}}]}
    actual = {"final_response": "It is 20°C.", "tool_calls": [{"name": "forecast", "args": {"city": "Oslo"}}]}
    diff = diff_values(expected, actual)
    assert diff.kind == "tool_calls"
    (call,) = diff.calls.calls
    assert (call.status, call.expected.name, call.actual.name, call.arguments) == (
        "replaced",
        "weather",
        "forecast",
        [],
    )
    assert diff.calls.rest is not None and diff.calls.rest.lines() == [
        '~ $.final_response: "It is 18°C." → "It is 20°C."'
    ]
    gone = diff_values(
        [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}], [{"name": "a", "arguments": {}}]
    )
    assert [c.status for c in gone.calls.calls] == ["same", "missing"]
    assert gone.calls.summary() == "2 expected calls, 1 made: 1 missing."


def test_what_is_not_a_list_of_calls():
    assert as_calls([{"name": "Ada", "age": 36}]) is None  # a record with a name
    assert as_calls([{"name": "Ada"}, {"name": "Bob"}]) is None  # names alone
    assert as_calls([]) is None and as_calls("search(q)") is None
    assert as_calls([{"tool_name": "t", "tool_input": {"x": 1}}]) is not None
    assert diff_values([{"name": "Ada", "age": 36}], [{"name": "Ada", "age": 37}]).kind == "json"
    calls = [{"name": "t", "arguments": {"i": i}} for i in range(300)]
    long = diff_values(calls, calls[:150] + calls[151:])
    assert long.kind == "tool_calls" and [c.status for c in long.calls.shown] == ["missing"]
    assert long.calls.not_shown == 299


# -- prose, word by word ----------------------------------------------------------------------


def test_prose_is_diffed_word_by_word_across_line_breaks():
    expected = "The capital of France is Paris. It lies on the Seine,\nin the north of the country."
    actual = "The capital of France is Paris. It lies on the river Seine, in the\nnorth of the country."
    diff = diff_values(expected, actual)
    assert diff.kind == "prose" and diff.mode == "prose"
    # the rewrapped line breaks are whitespace changes, marked; the words are not touched
    assert changed(diff) == [("insert", "", "river "), ("replace", "\n", " "), ("replace", " ", "\n")]
    assert [s.actual_visible for s in diff.text.segments if s.changed] == ["river ", "·", "↵\n"]
    assert "".join(s.expected for s in diff.text.segments) == expected
    assert "".join(s.actual for s in diff.text.segments) == actual


def test_prose_changed_words_read_as_one_change_and_whitespace_is_marked_only_where_it_differs():
    diff = diff_values("He saw the big red dog in the park.", "He saw a small blue cat in the park.")
    assert changed(diff) == [("replace", "the big red dog", "a small blue cat")]
    assert [s.actual_visible for s in diff.text.segments if s.changed] == ["a small blue cat"]  # no ·
    spaced = diff_values("It is in the north of the city.", "It is in the  north of the city.")
    assert spaced.kind == "prose" and spaced.text.whitespace_only
    assert [(s.expected_visible, s.actual_visible) for s in spaced.text.segments if s.changed] == [("·", "··")]


def test_what_is_prose():
    assert is_prose("The model answered with the wrong city.")
    assert not is_prose("ok\n" * 50)  # a log
    assert not is_prose("def f(x):\n    return max(x, 0)\n")  # code
    assert not is_prose('{"a": 1, "b": [1, 2, 3]}')
    assert not is_prose("Paris")
    assert diff_values("Paris", "Rome").kind == "text"


# -- repros: bh-20 (a quadratic diff) and ho-09 (code cases) ------------------------------------


def test_bh20_repeated_lines_stay_a_bounded_text_diff():
    case = json.loads((REPROS / "bh-20-repeated-lines.jsonl").read_text().splitlines()[0])
    n = int(case["input"])
    actual = "ok\n" * (n // 2) + "FAIL\n" + "ok\n" * (n // 2)  # what the log_lines target returns
    diff = diff_values(case["expected"], actual)
    assert (diff.kind, diff.mode) == ("text", "word")
    assert changed(diff) == [("insert", "", "FAIL\n")]


def test_ho09_code_case_values_of_different_shapes_are_shown_not_diffed():
    case = json.loads((REPROS / "ho-09-portal-code-case-page" / "cases.jsonl").read_text().splitlines()[0])
    diff = diff_values(case["expected"], "    pass\n")
    assert (diff.kind, diff.mode) == ("shapes", "shapes") and diff.text.segments == []
    assert "different shapes (a JSON object and text)" in diff.note
    assert "      def check(candidate):\n          assert candidate(5, 0, 3) == 3\n" in diff.expected_shown
    code = diff_values(case["metadata"]["canonical_solution"], "    pass\n")  # A's code vs B's
    assert code.kind == "text" and changed(code) == [("replace", "return max(low, min(value, high))", "pass")]
    edited = dict(case["expected"], entry_point="clamp2")
    assert diff_values(case["expected"], edited).structure.lines() == ['~ $.entry_point: "clamp" → "clamp2"']


# -- large values -----------------------------------------------------------------------------


def test_large_json_values_are_shown_cut_and_their_few_changes_found():
    records = [{"id": f"r{i:06d}", "where": {"city": "Paris", "n": i}} for i in range(30_000)]
    expected = {"answer": "Paris", "records": records}
    actual = json.loads(json.dumps(expected))
    actual["records"][25_000]["where"]["city"] = "Rome"
    diff = diff_values(expected, actual)
    assert diff.structure.lines() == ['~ $.records[25000].where.city: "Paris" → "Rome"'] and diff.structure.complete
    assert diff.expected_shown.startswith('{"answer": "Paris", "records": [{"id": "r000000"')
    assert diff.expected_shown.endswith("\n… (more characters not shown)") and len(diff.expected_shown) < 200_100
    small = shown_text({"a": [1, 2]})
    assert small == '{\n  "a": [\n    1,\n    2\n  ]\n}'


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, None, True, 'é\n"x'], "b": {}},
        [],
        "x",
        [[{"k": list(range(100))}] * 3] * 70,
        {"deep": {"x": [0] * 200}},
    ],
)
def test_compact_head_is_the_start_of_json_dumps(value):
    full = json.dumps(value, ensure_ascii=False)
    for limit in (1, 17, 1000, len(full), 10**6):
        head, longer = compact_head(value, limit)
        assert head == full[:limit] and longer == (len(full) > limit)


# -- previews (the tables' one-line input / expected / output) ---------------------------------


@pytest.mark.parametrize("ensure_ascii", [True, False])  # SQLite keeps \\uXXXX, PostgreSQL the characters
def test_previews_decode_a_cut_json_text(ensure_ascii):
    def stored(value):
        return json.dumps(value, ensure_ascii=ensure_ascii)[: PREVIEW_CHARS + 1]

    text = preview_from_json(stored("Où est\tParis ?\n😀 ligne deux"))
    assert (text.text, text.cut, text.empty) == ("Où est\tParis ?\n😀 ligne deux", False, False)
    assert text.summary == "Où est Paris ? 😀 ligne deux" and text.expands
    structure = preview_from_json(stored({"q": "café", "n": [1, 2]}))
    assert structure.text == '{"q": "café", "n": [1, 2]}' and not structure.expands
    long = preview_from_json(stored("é" * 5000))
    assert long.cut and set(long.text) == {"é"} and long.summary.endswith("…") and len(long.summary) == 90
    assert preview_from_json(None).empty and preview_from_json("null").empty
    assert preview_from_json('"ab\\u00').text == "ab"  # cut inside an escape
    assert preview_from_json('"\\ud83d\\ude00"').text == "😀"
