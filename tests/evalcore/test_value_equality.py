"""Scorers that compare values give the verdict JSON values call for, not a text coincidence.

exact_match used to compare ``json.dumps`` text: ``1.0`` failed against ``1``, ``{"a": 1}``
failed against ``{"a": 1.0}``, yet ``True`` passed against ``"true"``. The siblings that compare
values (json_match, tool_calls arguments, citation ids) are held to the same rules here.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers import CitationSet, ExactMatch, JsonMatch, ScoreContext, Scorer, ScorerSpecError
from evalcore.scorers.jsonmatch import number_from_text
from evalcore.scorers.trajectory import ToolCalls
from evalcore.scorers.values import ValueRules
from evalcore.types import Case, RunRecord, Score

BIG = 2**53 + 1  # not representable as a float: float(BIG) == float(BIG - 1)


async def verdict(scorer: Scorer, output: Any, expected: Any) -> Score:
    case = Case(id="c", input="q", expected=expected)
    run = RunRecord(case_id="c", run_id="r:c", trace_id="r:c", output=output)
    result = await scorer.score(ScoreContext(case=case, output=output, run=run))
    first = result[0] if isinstance(result, list) else result
    assert isinstance(first, Score)
    return first


@pytest.mark.parametrize(
    ("output", "expected", "equal"),
    [
        (1.0, 1, True),
        ({"a": 1}, {"a": 1.0}, True),
        ({"b": [1, 2.0], "a": {"x": None}}, {"a": {"x": None}, "b": [1.0, 2]}, True),
        ([1, 2], [2, 1], False),  # lists are ordered
        (BIG, BIG - 1, False),
        (BIG, float(BIG), False),  # exact value, never rounded through float
        (True, 1, False),  # a bool is not a number
        (1, True, False),
        ({"a": True}, {"a": 1}, False),
        (False, 0, False),
        (True, "true", False),  # the old text coincidence
        ("true", True, False),
        (None, "null", False),
        ({"a": 1}, '{"a": 1}', False),
        ([1], "[1]", False),
        ({"a": "4"}, {"a": 4}, False),  # the text-vs-number rule is top level only
        (float("nan"), float("nan"), False),
        ({"a": float("nan")}, {"a": float("nan")}, False),
        (None, None, True),
        # the documented, deliberate leniency: a text answer spelling the expected number
        ("4", 4, True),
        (" 4.0\n", 4, True),
        (42, "42", True),
        ("4", 4.5, False),
        ("+4", 4, False),
        ("04", 4, False),
        ("NaN", float("nan"), False),
        ("1_000", 1000, False),
        (str(BIG), BIG, True),
        (str(BIG), BIG - 1, False),
    ],
)
async def test_exact_match_is_structural(output: Any, expected: Any, equal: bool) -> None:
    score = await verdict(ExactMatch(), output, expected)
    assert score.passed is equal, score.explanation


async def test_exact_match_options_reach_nested_strings_and_explain_types() -> None:
    assert (await verdict(ExactMatch(casefold=True), {"k": [" Paris "]}, {"k": ["paris"]})).passed is True
    assert (await verdict(ExactMatch(casefold=True), {"K": 1}, {"k": 1})).passed is False  # keys exact
    failed = await verdict(ExactMatch(), True, "true")
    # the explanation must show the two are of different types, not 'true' != 'true'
    assert failed.explanation == "output true != expected 'true'"
    nested = await verdict(ExactMatch(), {"a": [1, 2]}, {"a": [1, 3]})
    assert "$.a[1]" in (nested.explanation or "")


def test_exact_match_spec_version_records_the_new_semantics() -> None:
    assert ExactMatch().spec().version == "3"  # 2: structural equality; 3: the normalize option


def test_number_from_text_reads_only_json_number_literals() -> None:
    assert number_from_text(" 12 ") == 12 and isinstance(number_from_text("12"), int)
    assert number_from_text("-1.5e2") == -150.0
    for text in ("", "+1", "01", ".5", "5.", "0x10", "1_000", "nan", "NaN", "Infinity", "inf", "1e999", "true"):
        assert number_from_text(text) is None, text


@pytest.mark.parametrize(
    ("output", "expected", "equal"),
    [(1.0, 1, True), ({"a": 1}, {"a": 1.0}, True), (True, 1, False), (BIG, float(BIG), False), ('"1"', "1", False)],
)
async def test_json_match_follows_the_same_rules(output: Any, expected: Any, equal: bool) -> None:
    assert (await verdict(JsonMatch(), output, expected)).passed is equal


@pytest.mark.parametrize(
    ("actual", "expected", "rules", "equal"),
    [
        (BIG, BIG - 1, ValueRules(), False),  # float() used to round these together
        (BIG, float(BIG), ValueRules(), False),
        (6, 6.0, ValueRules(), True),
        (True, 1, ValueRules(), False),
        (float("nan"), float("nan"), ValueRules(), False),
        (str(BIG), BIG - 1, ValueRules(coerce_types=True), False),
        (str(BIG), BIG, ValueRules(coerce_types=True), True),
        ("1_000", 1000, ValueRules(coerce_types=True), False),  # float() accepted this
        ("0x10", 16, ValueRules(coerce_types=True), False),
        ("1", True, ValueRules(coerce_types=True), False),
        ("true", True, ValueRules(coerce_types=True), True),
        (" FALSE ", False, ValueRules(coerce_types=True), True),
        ("abc", "abd", ValueRules(coerce_types=True), False),  # non-numbers stay (different) strings
        ("abc", None, ValueRules(coerce_types=True), False),  # a word is not read as "no value"
    ],
)
def test_tool_call_argument_values(actual: Any, expected: Any, rules: ValueRules, equal: bool) -> None:
    assert rules.value_matches(actual, expected, nested=False) is equal


async def test_tool_calls_scorer_compares_big_int_arguments_exactly() -> None:
    expected = [{"name": "pay", "arguments": {"cents": BIG - 1}}]
    actual = [{"name": "pay", "arguments": {"cents": BIG}}]
    assert (await verdict(ToolCalls(), actual, expected)).passed is False
    assert (
        await verdict(
            ToolCalls(), [{"name": "pay", "arguments": {"cents": 1.0}}], [{"name": "pay", "arguments": {"cents": 1}}]
        )
    ).passed is True


async def test_citation_ids_compare_numbers_by_value_and_ignore_bools() -> None:
    score = await verdict(CitationSet(), {"citations": [1.0, 2]}, [1, 2])
    assert score.passed is True, score.explanation
    score = await verdict(CitationSet(), {"citations": [True]}, ["true"])
    assert score.passed is False


@pytest.mark.parametrize(
    "spec",
    [
        "rubric_judge:temperature=NaN",
        "rubric_judge:timeout_s=Infinity",
        '{"name": "rubric_judge", "args": {"retry_backoff_s": -Infinity}}',
        {"name": "rubric_judge", "args": {"temperature": float("nan")}},
        "rubric_judge:temperature=nan",  # not JSON: kept as text, refused by the scorer's own check
        "rubric_judge:timeout_s=0",
        "numeric_match:tolerance=NaN",
    ],
)
def test_scorer_specs_never_hold_non_finite_numbers(spec: Any) -> None:
    # a spec is stored as JSON on the eval run: NaN there used to fail as a database CHECK error
    with pytest.raises(ScorerSpecError, match="finite number"):
        scorer_from_spec(spec)


async def test_tool_call_arguments_with_nan_text_are_a_mismatch_not_an_unstorable_score() -> None:
    expected = [{"name": "pay", "arguments": {"cents": 1}}]
    actual = [{"name": "pay", "arguments": '{"cents": NaN}'}]
    score = await verdict(ToolCalls(), actual, expected)
    assert score.passed is False
    assert "arguments are not a JSON object" in (score.explanation or "")


def test_value_rules_compare_dicts_lists_and_scalars_by_shape() -> None:
    rules = ValueRules()
    assert rules.value_matches({"a": 1, "b": [2]}, {"a": 1, "b": [2]}, False)
    assert not rules.value_matches([1], {"a": 1}, False)  # not a dict
    assert not rules.value_matches({"a": 1, "b": 2}, {"a": 1}, False)  # other keys
    assert not rules.value_matches({"a": 2}, {"a": 1}, False)
    assert rules.value_matches([1, "x"], (1, "x"), False)
    assert not rules.value_matches([2, 1], [1, 2], False)
    assert not rules.value_matches([1], [1, 2], False) and not rules.value_matches("12", [1, 2], False)
    assert not rules.value_matches([1], 1, False) and not rules.value_matches({"a": 1}, "a", False)
    assert rules.scalar_equal(None, None) and not rules.scalar_equal(None, 0) and not rules.scalar_equal("", None)


def test_nested_expected_dicts_map_keys_to_accepted_values_at_every_level() -> None:
    rules = ValueRules()
    accepted = {"unit": ["cm", "mm"], "size": [{"w": [1, 2], "h": [3]}], "note": ["", "x"]}
    assert rules.value_matches({"unit": "mm", "size": {"w": 2, "h": 3}}, accepted, True)
    assert not rules.value_matches({"unit": "mm", "size": {"w": 2, "h": 3}, "extra": 1}, accepted, True)
    assert not rules.value_matches({"unit": "in", "size": {"w": 2, "h": 3}}, accepted, True)
    assert not rules.value_matches({"unit": "mm"}, accepted, True)  # "size" may not be omitted
