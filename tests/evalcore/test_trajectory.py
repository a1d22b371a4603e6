"""The ``tool_calls`` scorer: call sources, modes, BFCL accepted values, type rules, partial credit."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from evalcore.jsonvalue import MISSING
from evalcore.runner import run_eval
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers.alignment import CallMatch, compare_calls, match_call
from evalcore.scorers.base import ScoreContext, ScorerSpecError
from evalcore.scorers.calls import ActualCall, ExpectedCall, calls_from_events, expected_calls
from evalcore.scorers.trajectory import ToolCalls
from evalcore.scorers.values import ValueRules, bfcl_standardize
from evalcore.serial import to_record
from evalcore.targets import RunContext
from evalcore.tracing import Tracer
from evalcore.types import Case, RunRecord, Score, TargetOutput


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def score(
    expected: Any,
    *,
    calls: list[Any] | None = None,
    output: Any = "ok",
    events: list[Any] | None = None,
    **options: Any,
) -> dict[str, Score]:
    case = Case("c1", "question", expected)
    metadata = {} if calls is None else {"tool_calls": calls}
    run = RunRecord(case_id="c1", run_id="r", trace_id="r", output=output, metadata=metadata)
    ctx = ScoreContext(case=case, output=output, run=run, events=events or [])
    return {s.name: s for s in await ToolCalls(**options).score(ctx)}


# --- modes and partial credit -------------------------------------------------------------

A, B, C = call("a", x=1), call("b", y="k"), call("c")


@pytest.mark.parametrize(
    ("actual", "mode", "passes"),
    [
        ([A, B], "exact", True),
        ([B, A], "exact", False),
        ([B, A], "any_order", True),
        ([B, A], "in_order", False),
        ([A, C, B], "in_order", True),
        ([A, C, B], "exact", False),
        ([A, C, B], "any_order", False),
        ([A], "in_order", False),
        ([A, B, B], "any_order", False),
    ],
)
async def test_modes(actual: list[dict[str, Any]], mode: str, passes: bool) -> None:
    scores = await score([A, B], calls=actual, mode=mode)
    assert scores["tool_calls"].value is passes
    assert scores["tool_calls"].passed is passes


async def test_precision_recall_f1_count_matched_calls() -> None:
    scores = await score([A, B], calls=[A, C, call("b", y="other")], mode="any_order")
    assert scores["tool_calls.precision"].value == pytest.approx(1 / 3)
    assert scores["tool_calls.recall"].value == pytest.approx(1 / 2)
    assert scores["tool_calls.f1"].value == pytest.approx(0.4)
    assert scores["tool_calls.f1"].passed is None


async def test_order_aware_modes_align_in_order() -> None:
    # LCS of [B, A] against [A, B] is 1 call; any_order matches both.
    ordered = await score([A, B], calls=[B, A], mode="exact")
    unordered = await score([A, B], calls=[B, A], mode="any_order")
    assert ordered["tool_calls.recall"].value == 0.5
    assert unordered["tool_calls.recall"].value == 1.0
    assert "out of order" in ordered["tool_calls"].explanation


async def test_any_order_uses_a_maximum_matching() -> None:
    # A greedy pass would give the loose actual call to the first expected one and lose a match.
    expected = [
        {"f": {"x": [1, 2]}},
        {"f": {"x": [1]}},
    ]
    scores = await score(expected, calls=[call("f", x=1), call("f", x=2)], mode="any_order")
    assert scores["tool_calls"].passed is True


@pytest.mark.parametrize("mode", ["exact", "in_order", "any_order"])
async def test_irrelevance_passes_only_without_calls(mode: str) -> None:
    quiet = await score([], calls=[], mode=mode)
    assert quiet["tool_calls"].passed is True
    assert quiet["tool_calls.f1"].value == 1.0
    chatty = await score([], calls=[A], mode=mode)
    assert chatty["tool_calls"].passed is False
    assert chatty["tool_calls"].explanation == "expected no tool call, got 1: a"
    assert chatty["tool_calls.precision"].value == 0.0


async def test_no_call_made_when_one_expected() -> None:
    scores = await score([A], calls=[])
    assert scores["tool_calls"].passed is False
    assert scores["tool_calls"].explanation == "expected call #1 'a' was not made (calls made: none)"
    assert scores["tool_calls.recall"].value == 0.0


# --- arguments ----------------------------------------------------------------------------

BFCL = [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]


async def test_bfcl_accepted_values_and_optional_marker() -> None:
    assert (await score(BFCL, calls=[call("calculate_triangle_area", base=10, height=5)]))["tool_calls"].passed
    with_unit = await score(BFCL, calls=[call("calculate_triangle_area", base=10, height=5, unit="units")])
    assert with_unit["tool_calls"].passed
    missing = await score(BFCL, calls=[call("calculate_triangle_area", base=10)])
    assert missing["tool_calls"].explanation == "expected call #1: calculate_triangle_area: missing argument 'height'"


async def test_wrong_value_explanation_and_argument_detail() -> None:
    scores = await score(BFCL, calls=[call("calculate_triangle_area", base=10, height=6, unit="cm")])
    verdict = scores["tool_calls"]
    assert verdict.explanation == "expected call #1: calculate_triangle_area: argument 'height' = 6, expected 5"
    arguments = verdict.metadata["calls"][0]["arguments"]
    assert arguments["base"]["status"] == "match"
    assert arguments["height"] == {"status": "mismatch", "actual": 6, "accepted": [5]}
    assert arguments["unit"]["status"] == "mismatch"
    assert verdict.metadata["calls"][0]["closest_actual"] == 0


async def test_several_accepted_values() -> None:
    expected = [{"f": {"city": ["Paris", "Paris, France"]}}]
    assert (await score(expected, calls=[call("f", city="Paris, France")]))["tool_calls"].passed
    wrong = await score(expected, calls=[call("f", city="Lyon")])
    assert "expected one of" in wrong["tool_calls"].explanation


async def test_unexpected_argument_is_a_mismatch() -> None:
    scores = await score([call("f", x=1)], calls=[call("f", x=1, y=2)])
    assert scores["tool_calls"].passed is False
    assert scores["tool_calls"].explanation == "expected call #1: f: unexpected argument 'y' = 2"
    assert scores["tool_calls"].metadata["calls"][0]["arguments"]["y"] == {"status": "unexpected", "actual": 2}


async def test_plain_expected_argument_cannot_be_omitted() -> None:
    scores = await score([call("f", x=1, y="")], calls=[call("f", x=1)])
    assert scores["tool_calls"].passed is False  # "" is a literal value in the plain shape


async def test_nested_bfcl_dict_and_list_of_dicts() -> None:
    expected = [
        {
            "f": {
                "conditions": [{"department": ["Science"], "school": ["Bluebird High School", "Bluebird HS"]}],
                "rows": [[{"name": ["Chester"], "age": [42]}, {"name": ["Jane"], "age": [43, ""]}]],
            }
        }
    ]
    good = call(
        "f",
        conditions={"department": "Science", "school": "Bluebird HS"},
        rows=[{"name": "Chester", "age": 42}, {"name": "Jane"}],
    )
    assert (await score(expected, calls=[good]))["tool_calls"].passed
    bad = call("f", conditions={"department": "Science"}, rows=[{"name": "Chester", "age": 42}, {"name": "Jane"}])
    assert (await score(expected, calls=[bad]))["tool_calls"].passed is False


async def test_empty_accepted_list_means_the_empty_list() -> None:
    expected = [{"record": {"acc_routing_start": [], "outofscope": [["what is the weather like"]]}}]
    ok = call("record", acc_routing_start=[], outofscope=["what is the weather like"])
    assert (await score(expected, calls=[ok]))["tool_calls"].passed
    omitted = call("record", outofscope=["what is the weather like"])
    assert (await score(expected, calls=[omitted]))["tool_calls"].passed is False


@pytest.mark.parametrize(
    ("actual", "expected", "rules", "equal"),
    [
        (6, 6.0, ValueRules(), True),
        (6.5, 6, ValueRules(), False),
        ("6", 6, ValueRules(), False),
        ("6", 6, ValueRules(coerce_types=True), True),
        ("6.0", 6, ValueRules(coerce_types=True), True),
        ("true", True, ValueRules(coerce_types=True), True),
        ("yes", True, ValueRules(coerce_types=True), False),
        (True, 1, ValueRules(coerce_types=True), False),
        (None, None, ValueRules(), True),
        (None, "", ValueRules(), False),
        ("Paris", "paris", ValueRules(), False),
        ("Paris", "paris", ValueRules(strings="casefold"), True),
        ("New York, NY", "new york ny", ValueRules(strings="casefold"), False),
        ("New York, NY", "new york ny", ValueRules(strings="bfcl"), True),
        ("April 1, 2024", "April 1,2024", ValueRules(strings="bfcl"), True),
        ([1, 2], (1.0, 2.0), ValueRules(), True),
        ([1, 2], [2, 1], ValueRules(), False),
        ({"a": 1}, {"a": 1, "b": 2}, ValueRules(), False),
    ],
)
def test_value_rules(actual: Any, expected: Any, rules: ValueRules, equal: bool) -> None:
    assert rules.value_matches(actual, expected, nested=False) is equal


def test_bfcl_standardize_follows_bfcl() -> None:
    assert bfcl_standardize("It's 9:00-10:00 A.M.") == 'it"s9:0010:00am'


async def test_loose_names_treat_dots_as_underscores() -> None:
    expected = [{"math.factorial": {"number": [5]}}]
    renamed = [call("math_factorial", number=5)]
    assert (await score(expected, calls=renamed))["tool_calls"].passed is False
    assert (await score(expected, calls=renamed, loose_names=True))["tool_calls"].passed is True


async def test_unparseable_arguments_are_a_mismatch() -> None:
    scores = await score([call("f", x=1)], calls=[{"name": "f", "arguments": "{not json"}])
    assert scores["tool_calls"].passed is False
    assert "not a JSON object" in scores["tool_calls"].explanation


# --- where actual calls come from ---------------------------------------------------------


async def test_metadata_wins_over_output() -> None:
    scores = await score([call("f", x=1)], calls=[call("f", x=1)], output=[{"g": {}}])
    assert scores["tool_calls"].passed and scores["tool_calls"].metadata["actual_source"] == "metadata"


async def test_openai_style_and_json_string_arguments() -> None:
    recorded = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]
    assert (await score([call("f", x=1)], calls=recorded))["tool_calls"].passed


async def test_bfcl_style_output_is_read_when_nothing_is_recorded() -> None:
    scores = await score(BFCL, output=[{"calculate_triangle_area": {"base": 10, "height": 5}}])
    assert scores["tool_calls"].passed and scores["tool_calls"].metadata["actual_source"] == "output"


async def test_execute_tool_spans_are_read_last() -> None:
    tracer = Tracer("t", "r")
    with tracer.span("invoke_agent", "agent"):
        with tracer.span("chat", "model"):
            pass
        with tracer.span("execute_tool", "f", arguments={"x": 1}):
            pass
        with tracer.span("execute_tool", "g") as span:
            span.set(arguments='{"y": "k"}')
    assert calls_from_events(tracer.events) == [ActualCall("f", {"x": 1}), ActualCall("g", {"y": "k"})]
    as_dicts = [{"type": e.type, "name": e.name, "payload": e.payload, "seq": e.seq} for e in tracer.events]
    scores = await score([call("f", x=1), call("g", y="k")], output="done", events=as_dicts)
    assert scores["tool_calls"].passed and scores["tool_calls"].metadata["actual_source"] == "events"


async def test_no_source_means_no_calls() -> None:
    scores = await score([], output="I cannot help with that.")
    assert scores["tool_calls"].passed and scores["tool_calls"].metadata["actual_source"] == "none"


# --- expected shapes ----------------------------------------------------------------------


def test_expected_shapes() -> None:
    adk_turn = {"final_response": "done", "tool_calls": [call("f", x=1)]}
    assert expected_calls(adk_turn) == expected_calls([call("f", x=1)])
    turns = [adk_turn, {"final_response": "hi", "tool_calls": []}, {"final_response": None, "tool_calls": [C]}]
    assert [c.name for c in expected_calls(turns)] == ["f", "c"]
    legacy = [{"tool_name": "f", "tool_input": {"x": 1}}]
    assert expected_calls(legacy) == expected_calls([call("f", x=1)])
    with pytest.raises(ValueError, match="no expected value"):
        expected_calls(MISSING)
    with pytest.raises(ValueError, match="without a 'tool_calls' list"):
        expected_calls({"final_response": "x"})
    with pytest.raises(ValueError, match="is not a call"):
        expected_calls(["f"])


def test_compare_calls_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="unknown mode"):
        compare_calls([], [], mode="sideways")


def test_spec_round_trip_and_bad_options() -> None:
    scorer = scorer_from_spec("tool_calls:mode=any_order,strings=bfcl,coerce_types=true")
    assert isinstance(scorer, ToolCalls)
    assert to_record(scorer.spec()) == {
        "name": "tool_calls",
        "args": {"mode": "any_order", "strings": "bfcl", "coerce_types": True, "loose_names": False},
        "version": "1",
    }
    assert scorer.score_names == ["tool_calls", "tool_calls.precision", "tool_calls.recall", "tool_calls.f1"]
    with pytest.raises(ScorerSpecError, match="mode must be one of"):
        scorer_from_spec("tool_calls:mode=sideways")
    with pytest.raises(ScorerSpecError, match="strings must be one of"):
        scorer_from_spec("tool_calls:strings=fuzzy")


async def test_in_a_run_a_case_without_expected_is_a_scorer_error_not_a_fail() -> None:
    async def agent(question: str, ctx: RunContext) -> TargetOutput:
        with ctx.tracer.span("execute_tool", "f", arguments={"x": 1}):
            pass
        return TargetOutput(output="done")

    cases = [Case("with", "q", [call("f", x=1)]), Case("without", "q")]
    report = await run_eval(cases, agent, ["tool_calls"])
    assert report.metrics["tool_calls"].passed == 1
    assert report.metrics["tool_calls"].errors == 1


def test_bad_options_raise_a_scorer_spec_error_like_every_scorer() -> None:
    with pytest.raises(ScorerSpecError, match="mode must be one of"):
        ToolCalls(mode="sideways")
    with pytest.raises(ScorerSpecError, match="strings must be one of"):
        ToolCalls(strings="fuzzy")


async def test_a_dict_output_that_holds_no_calls_leaves_the_trace_as_the_source() -> None:
    begin = {"type": "span_begin", "name": "f", "payload": {"kind": "execute_tool", "span_id": "s1", "arguments": {}}}
    scores = await score([call("f")], output={"answer": 42}, events=[begin])
    assert scores["tool_calls"].passed and scores["tool_calls"].metadata["actual_source"] == "events"


def test_a_tool_span_that_never_ended_is_a_call_without_arguments() -> None:
    events: list[Any] = [
        {"type": "span_begin", "name": "f", "payload": {"kind": "execute_tool", "span_id": "s1"}},
        {"type": "span_begin", "name": "g", "payload": {"kind": "execute_tool", "span_id": "s2"}},
        {"type": "span_end", "name": "g", "payload": {"kind": "execute_tool", "span_id": "s2", "arguments": '{"y":1}'}},
    ]
    assert calls_from_events(events) == [ActualCall("f", {}), ActualCall("g", {"y": 1})]


def lcs_length(a: str, b: str) -> int:
    """The longest common subsequence of two strings, by the textbook recursion (the reference)."""
    if not a or not b:
        return 0
    if a[0] == b[0]:
        return 1 + lcs_length(a[1:], b[1:])
    return max(lcs_length(a[1:], b), lcs_length(a, b[1:]))


def test_in_order_alignment_is_a_longest_order_preserving_one():
    rng = random.Random(7)
    for _ in range(300):
        made = "".join(rng.choice("abc") for _ in range(rng.randint(0, 6)))
        wanted = "".join(rng.choice("abc") for _ in range(rng.randint(0, 6)))
        got = compare_calls(
            [ActualCall(n, {}) for n in made], [ExpectedCall(n, {}) for n in wanted], mode="in_order"
        ).pairs
        assert len(got) == lcs_length(made, wanted), (made, wanted, got)
        assert all(made[i] == wanted[j] for i, j in got)
        assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in itertools.pairwise(got))


def test_in_order_alignment_ties_keep_the_earlier_expected_call():
    # "ab" against "ba": either call alone is a longest alignment; the earlier expected one wins
    result = compare_calls([ActualCall("a", {}), ActualCall("b", {})], [ExpectedCall("b", {}), ExpectedCall("a", {})])
    assert result.pairs == [(1, 0)]
    assert result.explanation == "expected call #2 'a' is out of order"


def test_match_call_reports_each_argument_and_the_first_problem() -> None:
    rules = ValueRules()
    wrong = match_call(ActualCall("search", {}), ExpectedCall("lookup", {}), rules)
    assert wrong == CallMatch(False, False, {}, "called 'search' instead of 'lookup'")
    unreadable = match_call(ActualCall("lookup", None), ExpectedCall("lookup", {}), rules)
    assert unreadable == CallMatch(False, True, {}, "lookup: arguments are not a JSON object")
    bfcl = ExpectedCall("lookup", {"city": ["Zürich", "Zurich"], "unit": ["", "C"], "day": ["mon"]}, nested=True)
    got = match_call(ActualCall("lookup", {"city": "Bern"}), bfcl, rules)
    assert got.arguments == {
        "city": {"status": "mismatch", "actual": "Bern", "accepted": ["Zürich", "Zurich"]},
        "unit": {"status": "omitted", "accepted": ["", "C"]},
        "day": {"status": "missing", "accepted": ["mon"]},
    }
    assert got.problem == 'lookup: argument \'city\' = "Bern", expected one of ["Zürich", "Zurich"]'
    one = ExpectedCall("lookup", {"unit": ["", "C"]}, nested=True)
    assert match_call(ActualCall("lookup", {"unit": "F"}), one, rules).problem == (
        'lookup: argument \'unit\' = "F", expected "C"'  # the omission marker is not an accepted value shown
    )
    long = "x" * 100
    assert match_call(ActualCall("lookup", {"q": long}), ExpectedCall("lookup", {"q": ["y"]}), rules).problem == (
        f'lookup: argument \'q\' = "{"x" * 78}…, expected "y"'
    )
