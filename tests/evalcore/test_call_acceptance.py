"""The tool-call diff and the ``tool_calls`` scorer use one acceptance rule (issue 23): a value
the scorer accepts is never shown as changed, and a value it refuses always is.

The case page once showed BFCL's expected ``[3]`` (the accepted values) against the actual
``3`` as "~ changed" on a case the scorer had passed.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalcore.diff import diff_values
from evalcore.jsonvalue import MISSING
from evalcore.scorers.base import ScoreContext
from evalcore.scorers.trajectory import ToolCalls
from evalcore.scorers.values import ValueRules, argument_verdict
from evalcore.types import Case, RunRecord


async def scorer_passes(expected: Any, output: Any, **options: Any) -> bool:
    case = Case("c1", "question", expected)
    run = RunRecord(case_id="c1", run_id="r", trace_id="r", output=output, metadata={})
    scores = await ToolCalls(**options).score(ScoreContext(case=case, output=output, run=run, events=[]))
    return next(s for s in scores if s.name == "tool_calls").passed is True


def diff_says_same(expected: Any, output: Any, **options: Any) -> bool:
    rules = ValueRules(options.get("strings", "exact"), options.get("coerce_types", False))
    diff = diff_values(expected, output, call_rules=rules)
    if diff.kind == "identical":
        return True
    assert diff.kind == "tool_calls", diff.kind
    assert diff.calls is not None
    return diff.calls.n_changed == 0


BFCL = [{"calc": {"x": [3], "unit": ["cm", ""], "mode": ["fast", "slow", ""]}}]

CASES = [
    # (expected, actual output, scorer options)
    (BFCL, [{"calc": {"x": 3}}], {}),  # the reported case: 3 is among [3], unit and mode may be omitted
    (BFCL, [{"calc": {"x": 3, "mode": "slow"}}], {}),
    (BFCL, [{"calc": {"x": 3.0, "unit": "cm"}}], {}),  # 3.0 == 3 by value
    (BFCL, [{"name": "calc", "arguments": {"x": 3}}], {}),  # calls made in the plain shape
    (BFCL, [{"name": "calc", "arguments": '{"x": 3}'}], {}),  # OpenAI-style JSON text arguments
    (BFCL, [{"calc": {"x": 4}}], {}),  # not an accepted value
    (BFCL, [{"calc": {"x": [3]}}], {}),  # the list itself is not one of the accepted values
    (BFCL, [{"calc": {"x": "3"}}], {}),  # a string is not a number...
    (BFCL, [{"calc": {"x": "3"}}], {"coerce_types": True}),  # ...unless the scorer coerces
    (BFCL, [{"calc": {"x": 3, "extra": 1}}], {}),  # an argument the answer does not list
    (BFCL, [{"calc": {"unit": "cm"}}], {}),  # x is not omittable
    (BFCL, [{"calc": {"x": 3, "mode": "FAST"}}], {}),
    (BFCL, [{"calc": {"x": 3, "mode": "FAST"}}], {"strings": "casefold"}),
    ([{"calc": {"city": ["New York"]}}], [{"calc": {"city": "new-york"}}], {"strings": "bfcl"}),
    ([{"name": "calc", "arguments": {"x": 3}}], [{"name": "calc", "arguments": {"x": 3}}], {}),
    ([{"name": "calc", "arguments": {"x": 3}}], [{"name": "calc", "arguments": {"x": 3.0}}], {}),
    ([{"name": "calc", "arguments": {"x": [3]}}], [{"name": "calc", "arguments": {"x": 3}}], {}),  # plain: a literal
    ([{"name": "calc", "arguments": {"s": "A"}}], [{"name": "calc", "arguments": {"s": "a"}}], {"strings": "casefold"}),
]


@pytest.mark.parametrize(("expected", "output", "options"), CASES)
async def test_the_diff_shows_a_change_exactly_where_the_scorer_refuses(expected, output, options):
    assert diff_says_same(expected, output, **options) == await scorer_passes(expected, output, **options)


def test_the_reported_case_is_the_same_call_with_nothing_changed():
    diff = diff_values([{"calc": {"x": [3]}}], [{"calc": {"x": 3}}])
    assert diff.kind == "tool_calls" and diff.calls is not None
    assert [c.status for c in diff.calls.calls] == ["same"]
    assert diff.calls.summary() == "1 expected call, 1 made: the same calls."


def test_a_refused_value_is_listed_against_the_accepted_ones():
    diff = diff_values(BFCL, [{"calc": {"x": 4, "mode": "other", "extra": True}}])
    assert diff.calls is not None
    (row,) = diff.calls.calls
    assert row.status == "arguments"
    shown = {(c.op, c.path, c.before_text, c.after_text) for c in row.arguments}
    assert shown == {
        ("changed", "$.x", "3", "4"),  # one accepted value: shown alone
        ("changed", "$.mode", '["fast", "slow"]', '"other"'),  # several: the list
        ("added", "$.extra", "", "true"),
    }
    missing = diff_values(BFCL, [{"calc": {"unit": "cm"}}]).calls
    assert missing is not None
    assert [(c.op, c.path) for c in missing.calls[0].arguments] == [("removed", "$.x")]


def test_a_plain_list_of_one_key_records_is_still_json():
    # Only an expected value whose every argument is a list of accepted values is read as
    # BFCL's possible answers; other one-key records stay a JSON diff.
    assert diff_values([{"a": {"b": 1}}], [{"a": {"b": 2}}]).kind == "json"


def test_the_verdict_function_is_the_rule():
    rules = ValueRules()
    assert argument_verdict(3, [3], nested=True, rules=rules) == "match"
    assert argument_verdict([3], [3], nested=True, rules=rules) == "mismatch"
    assert argument_verdict(MISSING, ["cm", ""], nested=True, rules=rules) == "omitted"
    assert argument_verdict(MISSING, ["cm", ""], nested=False, rules=rules) == "missing"
    assert argument_verdict(MISSING, [3], nested=True, rules=rules) == "missing"
