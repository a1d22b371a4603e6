"""The built-in deterministic scorers: exact_match, contains, regex, numeric_match, json_match,
citation_set, predicate; and their specs."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

import pytest

from evalcore.jsonvalue import MISSING
from evalcore.scorer_registry import BUILTIN_SCORERS, known_scorers, scorer_from_spec
from evalcore.scorers import (
    CitationSet,
    Contains,
    ExactMatch,
    JsonMatch,
    NumericMatch,
    Predicate,
    Regex,
    ScoreContext,
    Scorer,
    ScorerSpecError,
    parse_scorer_spec,
    register,
)
from evalcore.scorers.base import SCORERS
from evalcore.scorers.citations import ids_from_value, match_citations
from evalcore.scorers.jsonmatch import json_diff
from evalcore.scorers.numbers import extract_final_number, find_numbers
from evalcore.scoring import score_run
from evalcore.serial import to_record
from evalcore.strictjson import StrictJSONError, loads_strict
from evalcore.types import Case, RunRecord, Score


def make_ctx(output: Any, expected: Any = MISSING, case_id: str = "c1") -> ScoreContext:
    case = Case(id=case_id, input="q", expected=expected)
    run = RunRecord(case_id=case_id, run_id=f"r:{case_id}", trace_id=f"r:{case_id}", output=output)
    return ScoreContext(case=case, output=output, run=run)


async def one(scorer: Scorer, output: Any, expected: Any = MISSING) -> Score:
    result = await scorer.score(make_ctx(output, expected))
    assert isinstance(result, Score)
    return result


async def many(scorer: Scorer, output: Any, expected: Any = MISSING) -> dict[str, Score]:
    result = await scorer.score(make_ctx(output, expected))
    assert isinstance(result, list)
    return {s.name: s for s in result}


def is_even(output: Any, expected: Any) -> bool:
    """A module-level predicate, importable by its spec path."""
    return int(output) % 2 == 0


# --- exact_match -------------------------------------------------------------------------------


async def test_exact_match_strips_by_default_but_keeps_case() -> None:
    assert (await one(ExactMatch(), "  Paris\n", "Paris")).passed is True
    failed = await one(ExactMatch(), "paris", "Paris")
    assert failed.value is False and failed.passed is False
    assert "'paris'" in (failed.explanation or "")


async def test_exact_match_options() -> None:
    assert (await one(ExactMatch(casefold=True), "STRASSE", "Straße")).passed is True
    assert (await one(ExactMatch(strip=False), "Paris ", "Paris")).passed is False


async def test_exact_match_compares_values_as_canonical_json() -> None:
    assert (await one(ExactMatch(), {"b": 1, "a": [1, 2]}, {"a": [1, 2], "b": 1})).passed is True
    assert (await one(ExactMatch(), 42, "42")).passed is True
    assert (await one(ExactMatch(), {"a": 1}, {"a": 2})).passed is False


async def test_exact_match_without_expected_raises() -> None:
    with pytest.raises(ValueError, match="no expected value"):
        await one(ExactMatch(), "x")


async def test_expected_null_is_an_expected_value() -> None:
    assert (await one(ExactMatch(), None, None)).passed is True


# --- contains ----------------------------------------------------------------------------------


async def test_contains_single_string() -> None:
    assert (await one(Contains(), "The capital is Paris.", "Paris")).passed is True
    assert (await one(Contains(), "The capital is paris.", "Paris")).passed is False
    assert (await one(Contains(casefold=True), "The capital is PARIS.", "paris")).passed is True


async def test_contains_list_all_and_any() -> None:
    text = "apples and pears"
    all_missing = await one(Contains(), text, ["apples", "plums", "pears"])
    assert all_missing.passed is False
    assert all_missing.metadata == {"found": ["apples", "pears"], "missing": ["plums"]}
    assert "plums" in (all_missing.explanation or "")
    assert (await one(Contains(), text, ["apples", "pears"])).passed is True
    assert (await one(Contains(mode="any"), text, ["plums", "pears"])).passed is True
    none_found = await one(Contains(mode="any"), text, ["plums", "figs"])
    assert none_found.passed is False and "none of" in (none_found.explanation or "")


async def test_contains_value_option_overrides_expected_and_reads_json_output() -> None:
    assert (await one(Contains(value="ok"), {"status": "ok"})).passed is True
    assert (await one(Contains(value=["status", "ok"]), {"status": "ok"}, "ignored")).passed is True


async def test_contains_rejects_bad_needles_and_mode() -> None:
    with pytest.raises(ValueError, match="non-empty list"):
        await one(Contains(), "text", [])
    with pytest.raises(ValueError, match="non-empty list"):
        await one(Contains(), "text", ["a", 3])
    with pytest.raises(ValueError, match="no expected value"):
        await one(Contains(), "text")
    with pytest.raises(ScorerSpecError, match="mode"):
        Contains(mode="some")


# --- regex -------------------------------------------------------------------------------------


async def test_regex_search_by_default_fullmatch_on_request() -> None:
    assert (await one(Regex(pattern=r"\d{3}"), "code 123 here")).passed is True
    assert (await one(Regex(pattern=r"\d{3}", fullmatch=True), "code 123 here")).passed is False
    assert (await one(Regex(pattern=r"\d{3}", fullmatch=True), "123\n")).passed is True
    assert (await one(Regex(pattern=r"\d{3}", fullmatch=True, strip=False), "123\n")).passed is False


async def test_regex_flags() -> None:
    assert (await one(Regex(pattern="^yes"), "YES, sure")).passed is False
    assert (await one(Regex(pattern="^yes", flags="i"), "YES, sure")).passed is True
    assert (await one(Regex(pattern="^b$"), "a\nb\nc")).passed is False
    assert (await one(Regex(pattern="^b$", flags="m"), "a\nb\nc")).passed is True
    assert (await one(Regex(pattern="a.c", flags="s"), "a\nc")).passed is True
    assert (await one(Regex(pattern="a.c"), "a\nc")).passed is False


async def test_regex_pattern_from_expected_and_match_recorded() -> None:
    score = await one(Regex(), "order #A-1234 shipped", r"[A-Z]-\d+")
    assert score.passed is True
    assert score.metadata["match"] == "A-1234"
    failed = await one(Regex(), "nothing", r"\d+")
    assert failed.passed is False and r"/\d+/" in (failed.explanation or "")


async def test_regex_invalid_pattern_is_a_clear_error() -> None:
    with pytest.raises(ScorerSpecError, match="invalid pattern"):
        Regex(pattern="(unclosed")
    with pytest.raises(ScorerSpecError, match="unknown flag 'q'"):
        Regex(pattern="x", flags="iq")
    with pytest.raises(ValueError, match="invalid pattern"):
        await one(Regex(), "text", "[a-")
    with pytest.raises(ValueError, match="string pattern"):
        await one(Regex(), "text", 42)


async def test_regex_invalid_pattern_becomes_an_errored_score_in_the_runner() -> None:
    ctx = make_ctx("text", "(bad")
    scores = await score_run(ctx.case, ctx.run, [Regex()])
    assert len(scores) == 1
    assert scores[0].error is not None and "invalid pattern" in scores[0].error
    assert scores[0].value is None


# --- numeric_match: extraction -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,234.5", "1234.5"),
        ("$18", "18"),
        ("It costs $1,000,000 in total", "1000000"),
        ("a loss of -$5", "-5"),
        ("a loss of $-5", "-5"),
        ("the temperature is -3 degrees", "-3"),
        ("\u22124", "-4"),
        ("a rise of 50%", "50"),
        ("The answer is 5.", "5"),
        ("roughly .5 of it", "0.5"),
        ("0.25", "0.25"),
        ("16-3=13", "13"),
        ("<<9*2=18>>18", "18"),
        ("1,2345", "2345"),
    ],
)
def test_extract_final_number_reads_prose_numbers(text: str, expected: str) -> None:
    found = extract_final_number(text)
    assert found is not None
    assert found.value == Decimal(expected)
    assert found.rule == "last"


def test_find_numbers_treats_glued_minus_as_an_operator() -> None:
    assert [v for v, _ in find_numbers("16-3 = 13, then -2")] == [16, 3, 13, -2]
    assert [t for _, t in find_numbers("paid $1,200.50 for 3")] == ["$1,200.50", "3"]
    assert find_numbers("version v2.0 of abc123") == []


def test_extraction_precedence_hash_then_answer_then_last() -> None:
    gsm = "She makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18"
    assert extract_final_number(gsm).rule == "####"  # type: ignore[union-attr]
    assert extract_final_number("#### 1,000 (rounded from 999)").value == 1000  # type: ignore[union-attr]
    solution = "So 3 + 4 = 7 eggs\nA: 224"
    assert extract_final_number(solution).value == 224  # type: ignore[union-attr]
    # The first number after the answer marker, even if more numbers follow it.
    first_after = extract_final_number("Work: 5 * 3\nAnswer: 12 apples and 3 pears")
    assert first_after is not None and first_after.value == 12 and first_after.rule == "answer"
    # The last marker wins.
    assert extract_final_number("A: 1 was wrong\nA: 2").value == 2  # type: ignore[union-attr]
    # A marker with no number after it falls back to the last number.
    fallback = extract_final_number("it was 7 apples\nAnswer: unknown")
    assert fallback is not None and fallback.value == 7 and fallback.rule == "last"
    # "A:" glued to a word is not a marker.
    assert extract_final_number("DATA: 3 then 4").value == 4  # type: ignore[union-attr]


def test_extract_final_number_from_values() -> None:
    assert extract_final_number(72).value == 72  # type: ignore[union-attr]
    assert extract_final_number(0.1).value == Decimal("0.1")  # type: ignore[union-attr]
    assert extract_final_number("no digits here") is None
    with pytest.raises(ValueError, match="finite"):
        extract_final_number(math.nan)
    with pytest.raises(ValueError, match="finite"):
        extract_final_number(Decimal("-Infinity"))
    with pytest.raises(ValueError, match="boolean"):
        extract_final_number(True)


def test_huge_numbers_do_not_overflow() -> None:
    # A run-away generation (seen in the GSM8K model solutions) is read exactly, not as inf.
    found = extract_final_number("18" * 300)
    assert found is not None and found.value == Decimal("18" * 300)


# --- numeric_match: scoring --------------------------------------------------------------------


async def test_numeric_match_against_a_gsm8k_answer_field() -> None:
    answer = (
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18"
    )
    good = await one(NumericMatch(), "She makes $18 a day.\nA: 18", answer)
    assert good.passed is True and good.value is True
    assert "18" in (good.explanation or "") and "####" in (good.explanation or "")
    bad = await one(NumericMatch(), "She eats 7\nA: 224", answer)
    assert bad.passed is False
    assert "224" in (bad.explanation or "") and "18" in (bad.explanation or "")
    assert bad.metadata == {"expected": "18", "expected_rule": "####", "actual": "224", "actual_rule": "answer"}


async def test_numeric_match_number_forms() -> None:
    assert (await one(NumericMatch(), "Total: $1,234.50", 1234.5)).passed is True
    assert (await one(NumericMatch(), "The change was -12.", -12)).passed is True
    assert (await one(NumericMatch(), "The change was 12.", -12)).passed is False
    assert (await one(NumericMatch(), 18, "18")).passed is True
    assert (await one(NumericMatch(), "18.0", 18)).passed is True
    assert (await one(NumericMatch(), "It went up 25%", "25")).passed is True


async def test_numeric_match_tolerances() -> None:
    assert (await one(NumericMatch(), "0.1000001", 0.1)).passed is True  # within default 1e-6
    assert (await one(NumericMatch(), "0.10001", 0.1)).passed is False
    assert (await one(NumericMatch(tolerance=0.01), "3.14", math.pi)).passed is True
    assert (await one(NumericMatch(tolerance=0.0), "3.14", 3.14)).passed is True
    assert (await one(NumericMatch(rel_tolerance=0.01), "1005", 1000)).passed is True
    assert (await one(NumericMatch(rel_tolerance=0.01), "1011", 1000)).passed is False
    # Relative to the expected value, not the answer.
    assert (await one(NumericMatch(rel_tolerance=0.5), "30", 10)).passed is False


async def test_numeric_match_output_without_number_fails_expected_without_number_raises() -> None:
    no_number = await one(NumericMatch(), "I do not know", 5)
    assert no_number.passed is False and "no number" in (no_number.explanation or "")
    with pytest.raises(ValueError, match="no number in expected"):
        await one(NumericMatch(), "5", "five")
    with pytest.raises(ValueError, match="no expected value"):
        await one(NumericMatch(), "5")


async def test_numeric_match_nan_output_fails() -> None:
    score = await one(NumericMatch(), math.nan, 5)
    assert score.passed is False and "finite" in (score.explanation or "")


async def test_numeric_match_field_option() -> None:
    assert (await one(NumericMatch(field="answer"), {"answer": 42, "steps": 7}, 42)).passed is True
    missing = await one(NumericMatch(field="answer"), {"result": 42}, 42)
    assert missing.passed is False and "no field 'answer'" in (missing.explanation or "")


def test_numeric_match_rejects_bad_tolerance() -> None:
    with pytest.raises(ScorerSpecError, match="tolerance"):
        NumericMatch(tolerance=-1)
    with pytest.raises(ScorerSpecError, match="rel_tolerance"):
        NumericMatch(rel_tolerance=math.inf)


# --- json_match --------------------------------------------------------------------------------


async def test_json_match_equal_from_text_and_values() -> None:
    assert (await one(JsonMatch(), '{"b": [1, 2], "a": null}', {"a": None, "b": [1, 2]})).passed is True
    assert (await one(JsonMatch(), {"a": 1}, '{"a": 1}')).passed is True
    assert (await one(JsonMatch(), '```json\n{"a": 1}\n```', {"a": 1})).passed is True
    assert (await one(JsonMatch(), "[1, 2.0]", [1.0, 2])).passed is True


async def test_json_match_names_the_first_differing_path() -> None:
    expected = {"items": [{"price": 1}, {"price": 2}, {"price": 3}]}
    output = {"items": [{"price": 1}, {"price": 2}, {"price": 4}]}
    score = await one(JsonMatch(), output, expected)
    assert score.passed is False
    assert score.metadata == {"path": "$.items[2].price"}
    assert (score.explanation or "").startswith("$.items[2].price: expected 3, got 4")


async def test_json_match_equal_vs_subset() -> None:
    output = {"name": "Ada", "age": 36, "tags": ["x"]}
    extra = await one(JsonMatch(), output, {"name": "Ada", "tags": ["x"]})
    assert extra.passed is False and extra.metadata["path"] == "$.age"
    assert "unexpected key" in (extra.explanation or "")
    assert (await one(JsonMatch(mode="subset"), output, {"name": "Ada"})).passed is True
    missing = await one(JsonMatch(mode="subset"), output, {"name": "Ada", "email": "a@b"})
    assert missing.passed is False and missing.metadata["path"] == "$.email"


async def test_json_match_subset_lists_are_equal_length_unless_list_subset() -> None:
    output = {"rows": [{"id": 1, "x": 0}, {"id": 2, "x": 0}, {"id": 3}]}
    # Element-wise: dicts inside may have extra keys, but the list length must agree.
    assert (await one(JsonMatch(mode="subset"), output, {"rows": [{"id": 1}, {"id": 2}, {"id": 3}]})).passed is True
    short = await one(JsonMatch(mode="subset"), output, {"rows": [{"id": 1}, {"id": 2}]})
    assert short.passed is False and short.metadata["path"] == "$.rows[2]"
    listed = JsonMatch(mode="subset", list_subset=True)
    assert (await one(listed, output, {"rows": [{"id": 3}, {"id": 1}]})).passed is True
    absent = await one(listed, output, {"rows": [{"id": 9}]})
    assert absent.passed is False and absent.metadata["path"] == "$.rows[0]"


def test_list_subset_needs_a_distinct_element_for_each_expected_one() -> None:
    # A greedy first fit would give {} the {"a": 1} element and then fail; a matching exists.
    assert json_diff([{}, {"a": 1}], [{"a": 1}, {}], subset=True, list_subset=True) is None
    # Two expected elements cannot share one actual element.
    diff = json_diff([1, 1], [1, 2], list_subset=True)
    assert diff is not None and diff.path == "$[1]"


@pytest.mark.parametrize("text", ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}', "NaN"])
async def test_json_match_nan_and_infinity_never_pass(text: str) -> None:
    # Python's json.loads accepts these; strict JSON does not, even when both sides "agree".
    score = await one(JsonMatch(), text, {"x": 1})
    assert score.passed is False and "not strict JSON" in (score.explanation or "")
    with pytest.raises(ValueError, match="not strict JSON"):
        await one(JsonMatch(), {"x": 1}, text)


async def test_json_match_python_nan_values_never_pass() -> None:
    score = await one(JsonMatch(), {"x": math.nan}, {"x": 1})
    assert score.passed is False and "$.x" in (score.explanation or "")
    with pytest.raises(ValueError, match="not strict JSON"):
        await one(JsonMatch(), {"x": math.nan}, {"x": math.nan})


async def test_json_match_types_are_strict() -> None:
    bool_vs_int = await one(JsonMatch(), {"ok": 1}, {"ok": True})
    assert bool_vs_int.passed is False and "expected boolean true, got number 1" in (bool_vs_int.explanation or "")
    assert (await one(JsonMatch(), '"1"', 1)).passed is False
    assert (await one(JsonMatch(), "null", None)).passed is True


async def test_json_match_invalid_output_and_odd_keys() -> None:
    broken = await one(JsonMatch(), '{"a": 1,}', {"a": 1})
    assert broken.passed is False and "line 1" in (broken.explanation or "")
    dup = await one(JsonMatch(), '{"a": 1, "a": 2}', {"a": 2})
    assert dup.passed is False and "duplicate key" in (dup.explanation or "")
    odd = await one(JsonMatch(), {"a b": {"c": 1}}, {"a b": {"c": 2}})
    assert odd.metadata["path"] == '$["a b"].c'


def test_loads_strict_and_mode_validation() -> None:
    assert loads_strict(" [1, 2] ") == [1, 2]
    with pytest.raises(StrictJSONError, match="NaN"):
        loads_strict("[NaN]")
    with pytest.raises(ScorerSpecError, match="mode"):
        JsonMatch(mode="superset")


# --- citation_set ------------------------------------------------------------------------------

UUID_A = "3f2a9c1e-7b4d-4e8a-9c2f-1a2b3c4d5e6f"
UUID_B = "3f2a9c1e-0000-4e8a-9c2f-aaaaaaaaaaaa"  # shares its first 9 characters with UUID_A
UUID_C = "9b8c7d6e-5f4a-4b3c-8d2e-0f1e2d3c4b5a"


async def test_citation_set_emits_verdict_and_three_measures() -> None:
    scorer = CitationSet()
    scores = await many(scorer, ["d1", "d2", "d9"], ["d1", "d2", "d3", "d4"])
    assert list(scores) == scorer.score_names
    assert scores["citation_set.precision"].value == pytest.approx(2 / 3)
    assert scores["citation_set.recall"].value == pytest.approx(0.5)
    assert scores["citation_set.f1"].value == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert scores["citation_set.recall"].passed is None
    verdict = scores["citation_set"]
    assert verdict.value is False and verdict.passed is False  # recall 0.5 < 0.6
    assert verdict.metadata == {"matched": ["d1", "d2"], "missing": ["d3", "d4"], "extra": ["d9"]}
    assert "missing ['d3', 'd4']" in (verdict.explanation or "")


async def test_citation_set_thresholds() -> None:
    assert (await many(CitationSet(), ["a", "b", "x"], ["a", "b", "c"]))["citation_set"].passed is True
    loose = CitationSet(min_recall=0.5, min_precision=0.3)
    assert (await many(loose, ["d1", "d2", "d9"], ["d1", "d2", "d3", "d4"]))["citation_set"].passed is True
    # Precision 1/3 is below 0.4 even with full recall.
    assert (await many(CitationSet(), ["a", "x", "y"], ["a"]))["citation_set"].passed is False
    with pytest.raises(ScorerSpecError, match="min_recall"):
        CitationSet(min_recall=1.5)
    with pytest.raises(ScorerSpecError, match="min_prefix"):
        CitationSet(min_prefix=0)


async def test_citation_set_reads_dicts_text_and_fields() -> None:
    expected = ["doc-1", "doc-2"]
    assert (await many(CitationSet(), {"answer": "x", "citations": expected}, expected))["citation_set"].passed
    assert (await many(CitationSet(), {"cited": expected}, expected))["citation_set"].passed
    assert (await many(CitationSet(field="sources"), {"sources": [{"id": "doc-1"}, "doc-2"]}, expected))[
        "citation_set"
    ].passed
    text = "Paris is the capital [doc-1] and large [doc-2, doc-1]. See [the site](https://x.example)."
    scores = await many(CitationSet(), text, expected)
    assert scores["citation_set.precision"].value == 1.0 and scores["citation_set.recall"].value == 1.0
    assert (await many(CitationSet(), '{"citations": ["doc-1", "doc-2"]}', {"cited": expected}))["citation_set"].passed
    assert (await many(CitationSet(expected_field="gold"), expected, {"gold": expected}))["citation_set"].passed


def test_ids_from_value_shapes() -> None:
    fields = ("citations", "cited")
    assert ids_from_value("see [A] and [b,  C ]", fields=fields) == ["a", "b", "c"]
    assert ids_from_value([1, 2], fields=fields) == ["1", "2"]
    assert ids_from_value(None, fields=fields) == []
    # text holding a JSON list of records is read as JSON, not as bracketed ids
    assert ids_from_value('[{"id": "D1"}, {"id": "d2"}]', fields=fields) == ["d1", "d2"]
    with pytest.raises(ValueError, match="no citation key"):
        ids_from_value({"other": []}, fields=fields)


async def test_citation_set_normalises_and_counts_duplicates_once() -> None:
    scores = await many(CitationSet(), ["  Doc  One ", "doc one", "DOC\tONE", "doc two"], ["doc one", "Doc Two"])
    assert scores["citation_set.precision"].value == 1.0
    assert scores["citation_set.recall"].value == 1.0


def test_citation_prefix_rule() -> None:
    # 7 characters: too short to stand for a UUID, even though only UUID_C starts with it.
    seven = match_citations([UUID_C[:7]], [UUID_A, UUID_C])
    assert seven.matched == [] and seven.recall == 0.0
    # 8 characters shared by two expected UUIDs: ambiguous, no match.
    ambiguous = match_citations([UUID_A[:8]], [UUID_A, UUID_B, UUID_C])
    assert ambiguous.matched == [] and ambiguous.extra == [UUID_A[:8]]
    # 8 characters that start exactly one expected id: a match.
    unique = match_citations([UUID_C[:8]], [UUID_A, UUID_C])
    assert unique.matched == [UUID_C] and unique.precision == 1.0 and unique.recall == 0.5
    # 10 characters resolve the ambiguity between A and B.
    assert match_citations([UUID_A[:10]], [UUID_A, UUID_B]).matched == [UUID_A]
    # The full id and its prefix are one citation.
    both = match_citations([UUID_A, UUID_A[:12]], [UUID_A])
    assert both.precision == 1.0 and both.recall == 1.0
    # Comparison is whole-id: a longer cited id or a suffix does not match.
    assert match_citations([UUID_A + "x"], [UUID_A]).matched == []
    assert match_citations([UUID_A[4:]], [UUID_A]).matched == []
    # The minimum is an option.
    assert match_citations([UUID_C[:6]], [UUID_A, UUID_C], min_prefix=6).matched == [UUID_C]


async def test_citation_prefix_rule_through_the_scorer() -> None:
    expected = [UUID_A, UUID_B, UUID_C]
    seven = await many(CitationSet(), f"see [{UUID_C[:7]}]", expected)
    assert seven["citation_set.recall"].value == 0.0
    eight_ambiguous = await many(CitationSet(), [UUID_A[:8]], expected)
    assert eight_ambiguous["citation_set.precision"].value == 0.0
    eight_unique = await many(CitationSet(), [UUID_C[:8].upper()], expected)
    assert eight_unique["citation_set.precision"].value == 1.0
    assert eight_unique["citation_set.recall"].value == pytest.approx(1 / 3)


async def test_citation_set_empty_sets() -> None:
    both = await many(CitationSet(), [], [])
    assert both["citation_set"].passed is True
    assert [both[f"citation_set.{m}"].value for m in ("precision", "recall", "f1")] == [1.0, 1.0, 1.0]
    nothing_cited = await many(CitationSet(), "no brackets here", ["d1"])
    assert nothing_cited["citation_set"].passed is False
    assert nothing_cited["citation_set.precision"].value == 0.0
    nothing_expected = await many(CitationSet(), ["d1"], [])
    assert nothing_expected["citation_set"].passed is False
    assert nothing_expected["citation_set.recall"].value == 0.0


async def test_citation_set_unreadable_output_fails_missing_expected_raises() -> None:
    scores = await many(CitationSet(), {"answer": "no citations key"}, ["d1"])
    assert scores["citation_set"].passed is False
    assert "cannot read citations" in (scores["citation_set"].explanation or "")
    with pytest.raises(ValueError, match="no expected value"):
        await CitationSet().score(make_ctx(["d1"]))


# --- predicate ---------------------------------------------------------------------------------


async def test_predicate_return_types() -> None:
    assert (await one(Predicate(fn=is_even), "4")).passed is True
    assert (await one(Predicate(fn=lambda o, e: 0.25, label="quarter"), "x")).value == 0.25
    ctx_score = await one(Predicate(fn=lambda ctx: Score("custom", True, passed=True)), "x")
    assert ctx_score.name == "custom"

    async def async_check(output: Any, expected: Any) -> bool:
        return output == expected

    assert (await one(Predicate(fn=async_check), "a", "a")).name == "async_check"
    with pytest.raises(TypeError, match="expected bool, float or Score"):
        await one(Predicate(fn=lambda o, e: "yes"), "x")


def test_predicate_needs_a_function() -> None:
    with pytest.raises(TypeError):
        Predicate()  # type: ignore[call-arg]
    with pytest.raises(ScorerSpecError, match="local function or lambda"):
        scorer_from_spec(to_record(Predicate(fn=lambda o, e: True).spec()))
    with pytest.raises(ScorerSpecError, match="not an importable function"):
        Predicate(fn="tests.evalcore.test_scorers.no_such_function")
    with pytest.raises(ScorerSpecError, match="callable"):
        Predicate(fn=3)  # type: ignore[arg-type]


# --- specs -------------------------------------------------------------------------------------

EXAMPLES: list[Scorer] = [
    ExactMatch(strip=False, casefold=True),
    Contains(value=["a", "b"], mode="any", casefold=True),
    Regex(pattern=r"^\d+$", flags="im", fullmatch=True, strip=False),
    NumericMatch(tolerance=0.01, rel_tolerance=0.05, field="answer"),
    JsonMatch(mode="subset", list_subset=True),
    CitationSet(min_recall=0.5, min_precision=0.3, field="sources", expected_field="gold", min_prefix=10),
    Predicate(fn=is_even, label="even"),
]


def test_every_builtin_scorer_is_listed_and_has_an_example() -> None:
    names = {type(s).name for s in EXAMPLES}
    known = known_scorers()
    for scorer in EXAMPLES:
        assert known[scorer.name] is type(scorer) and type(scorer) in BUILTIN_SCORERS
    assert names == {
        "exact_match",
        "contains",
        "regex",
        "numeric_match",
        "json_match",
        "citation_set",
        "predicate",
    }
    assert {cls.name for cls in BUILTIN_SCORERS} == names | {
        "tool_calls",
        "rubric_judge",
        "rule_adherence",
        "case_scorers",  # tests/evalcore/test_case_scorers.py
        # conversation-level: tests/evalcore/test_conversation_scores.py, test_adk_metrics.py
        "final_state",
        "conversation_rubric",
        "goal_completion",
        "knowledge_retention",
        "tool_trajectory_avg_score",
        "response_match_score",
        # metric libraries: tests/evalcore/test_library_scorers.py
        "ragas",
        "deepeval",
        "autoevals",
    }


@pytest.mark.parametrize("scorer", EXAMPLES, ids=lambda s: type(s).name)
def test_spec_round_trips_through_json(scorer: Scorer) -> None:
    data = json.loads(json.dumps(to_record(scorer.spec())))
    assert data["name"] == scorer.name and data["version"] == scorer.version
    rebuilt = scorer_from_spec(data)
    assert type(rebuilt) is type(scorer)
    assert rebuilt.spec() == scorer.spec()
    assert rebuilt == scorer


@pytest.mark.parametrize("scorer_cls", [ExactMatch, Contains, Regex, NumericMatch, JsonMatch, CitationSet])
def test_default_spec_round_trips(scorer_cls: type[Scorer]) -> None:
    scorer = scorer_cls()
    assert scorer_from_spec(to_record(scorer.spec())) == scorer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("numeric_match:tolerance=0.01", NumericMatch(tolerance=0.01)),
        ("numeric_match:rel_tolerance=0.02,field=answer", NumericMatch(rel_tolerance=0.02, field="answer")),
        ("citation_set:min_recall=0.5,min_precision=0.3", CitationSet(min_recall=0.5, min_precision=0.3)),
        ("contains:value=Paris,casefold=true", Contains(value="Paris", casefold=True)),
        ("json_match:mode=subset", JsonMatch(mode="subset")),
        ("regex:pattern=^yes,flags=i", Regex(pattern="^yes", flags="i")),
        ('{"name": "regex", "args": {"pattern": "a,b", "fullmatch": true}}', Regex(pattern="a,b", fullmatch=True)),
        ("exact_match", ExactMatch()),
        ("predicate:fn=tests.evalcore.test_scorers.is_even", Predicate(fn=is_even)),
    ],
)
def test_cli_strings_parse(text: str, expected: Scorer) -> None:
    assert scorer_from_spec(text) == expected


def test_bad_specs_are_clear_errors() -> None:
    with pytest.raises(ScorerSpecError, match="unknown scorer 'numeric'"):
        scorer_from_spec("numeric")
    with pytest.raises(ScorerSpecError, match="tolerence"):
        scorer_from_spec("numeric_match:tolerence=0.1")
    with pytest.raises(ScorerSpecError, match="invalid pattern"):
        scorer_from_spec("regex:pattern=(")
    assert parse_scorer_spec("numeric_match: tolerance = 0.5").args == {"tolerance": 0.5}


async def test_a_registered_user_scorer_is_built_from_its_spec_name() -> None:
    @dataclass
    class Shouty(Scorer):
        name: ClassVar[str] = "shouty_test_scorer"
        version: ClassVar[str] = "1"
        min_len: int = 1

        async def score(self, ctx: ScoreContext) -> Score:
            return Score(self.name, str(ctx.output).isupper() and len(str(ctx.output)) >= self.min_len)

    assert register(Shouty) is Shouty
    try:
        scorer = scorer_from_spec("shouty_test_scorer:min_len=3")
        assert isinstance(scorer, Shouty) and scorer.min_len == 3
        assert known_scorers()["shouty_test_scorer"] is Shouty
    finally:
        SCORERS.pop("shouty_test_scorer")


def test_ids_from_lists_skip_empty_and_nested_items() -> None:
    fields = ("citations", "cited")
    assert ids_from_value(["a", None, ["nested"], {"id": {"x": 1}}, {"id": "B"}, ""], fields=fields) == ["a", "b"]
    # a dict under a citation key is read with the same keys
    assert ids_from_value({"citations": {"cited": ["X"]}}, fields=fields) == ["x"]


async def test_citation_set_bounds_prefix_and_unreadable_output() -> None:
    # precision exactly at its bound passes
    scores = await many(CitationSet(min_recall=1.0, min_precision=0.5), ["a", "z"], ["a"])
    assert scores["citation_set"].passed is True
    assert scores["citation_set"].explanation == "precision 0.50, recall 1.00; not expected ['z']"
    # the scorer's min_prefix reaches the matching: a 6-character prefix of a digest
    digest = "0123456789abcdef0123"
    assert (await many(CitationSet(min_prefix=6), ["012345"], [digest]))["citation_set"].passed is True
    assert (await many(CitationSet(), ["012345"], [digest]))["citation_set"].passed is False
    # an output it cannot read cites nothing, and the explanation says why
    unread = (await many(CitationSet(), 3.5, ["a"]))["citation_set"]
    assert unread.passed is False
    assert unread.explanation == (
        "precision 0.00, recall 0.00; cannot read citations from output "
        "(cannot read citation ids from float); missing ['a']"
    )


async def test_a_long_mismatch_is_shown_cut_at_80_characters():
    exact = (await ExactMatch().score(make_ctx("x" * 78, "y" * 78))).explanation
    assert exact == f"output {'x' * 78!r} != expected {'y' * 78!r}"  # 80 characters with the quotes: whole
    cut = (await ExactMatch().score(make_ctx("x" * 79, "y"))).explanation
    assert cut == f"output '{'x' * 78}… != expected 'y'"


async def test_regex_flags_combine_and_an_unknown_one_lists_the_known():
    for flags in ("im", "mi"):  # both apply, whichever comes first
        got = await Regex(pattern="^B$", flags=flags).score(make_ctx("a\nb\nc"))
        assert got.value is True, flags
    with pytest.raises(ScorerSpecError) as caught:
        Regex(pattern="a", flags="iq")
    assert str(caught.value) == "regex: unknown flag 'q' (known: imsxa)"


def tiny(output: Any, expected: Any) -> float:
    return float(output)


async def test_predicate_threshold_bounds_and_the_verdict_at_the_threshold():
    assert Predicate(tiny, threshold=0.0).threshold == 0.0 and Predicate(tiny, threshold=1.0).threshold == 1.0
    at = await Predicate(tiny, threshold=0.5).score(make_ctx(0.5))
    assert (at.name, at.value, at.passed, at.explanation) == ("tiny", 0.5, True, "0.500 >= threshold 0.5")
    below = await Predicate(tiny, threshold=0.5).score(make_ctx(0.4))
    assert (below.passed, below.explanation) == (False, "0.400 < threshold 0.5")
    measured = await Predicate(tiny).score(make_ctx(0.4))
    assert (measured.passed, measured.explanation) == (None, "measurement: no threshold, no verdict")


async def test_predicate_returning_something_else_names_the_type():
    def wordy(output: Any, expected: Any) -> Any:
        return "yes"

    with pytest.raises(TypeError) as caught:
        await Predicate(wordy).score(make_ctx("x"))
    assert str(caught.value) == "predicate 'wordy' returned str; expected bool, float or Score"


async def test_a_plain_predicate_returning_an_awaitable_is_awaited():
    async def check(output: Any) -> bool:
        return output == "ok"

    def deferred(output: Any, expected: Any) -> Any:
        return check(output)  # a coroutine from a plain function

    got = await Predicate(deferred).score(make_ctx("ok"))
    assert (got.name, got.value, got.passed) == ("deferred", True, True)
