"""Whole verdicts of the built-in scorers, read back field by field.

A mutation run (``make mutation``) found that the scorer tests checked ``passed`` and a word of
the explanation, so a wrong name, value, metadata or explanation survived. These tests compare
the complete :class:`Score` (name, value, verdict, explanation, metadata) for each branch.
"""

from __future__ import annotations

import json
import math
import re
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from evalcore.gates import GateError, check_gates, parse_gate
from evalcore.jsonvalue import MISSING
from evalcore.report import EvalReport, MetricSummary, ReportBuilder, RunningMean
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers import Contains, JsonMatch, NumericMatch, Regex, ScoreContext, ScorerSpecError
from evalcore.scorers.builtin import import_callable
from evalcore.scorers.jsonmatch import JSONDiff, canonical_text, json_diff
from evalcore.scorers.numbers import extract_final_number, find_numbers
from evalcore.serial import to_record
from evalcore.stats import (
    ConfidenceInterval,
    PairedCounts,
    Verdict,
    bootstrap_mean_delta,
    bootstrap_pass_rate_delta,
    mcnemar_exact,
    wilson_interval,
)
from evalcore.stats import verdict as read_verdict
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord, Score


def ctx(output: Any, expected: Any = MISSING) -> ScoreContext:
    case = Case(id="c1", input="q", expected=expected)
    return ScoreContext(
        case=case, output=output, run=RunRecord(case_id="c1", run_id="r:c1", trace_id="r:c1", output=output)
    )


async def judged(scorer: Any, output: Any, expected: Any = MISSING) -> Score:
    return await scorer.score(ctx(output, expected))


# -- numeric_match -----------------------------------------------------------------------------


async def test_numeric_match_equal_within_tolerance() -> None:
    assert await judged(NumericMatch(), "so A: 18 eggs", "#### 18") == Score(
        "numeric_match",
        True,
        passed=True,
        explanation="extracted 18 (from '18', rule answer) == expected 18 (rule ####)",
        metadata={"expected": "18", "expected_rule": "####", "actual": "18", "actual_rule": "answer"},
    )


async def test_numeric_match_different_number() -> None:
    assert await judged(NumericMatch(), "it is $1,234.50 then 7", 7.25) == Score(
        "numeric_match",
        False,
        passed=False,
        explanation="extracted 7 (from '7', rule last) != expected 7.25 (rule value)",
        metadata={"expected": "7.25", "expected_rule": "value", "actual": "7", "actual_rule": "last"},
    )


async def test_numeric_match_tolerances_are_inclusive() -> None:
    assert (await judged(NumericMatch(tolerance=0.5), "10.5", "10")).passed is True
    assert (await judged(NumericMatch(tolerance=0.49), "10.5", "10")).passed is False
    assert (await judged(NumericMatch(tolerance=0, rel_tolerance=0.05), "105", "100")).passed is True
    assert (await judged(NumericMatch(tolerance=0, rel_tolerance=0.05), "95", "100")).passed is True
    assert (await judged(NumericMatch(tolerance=0, rel_tolerance=0.049), "105", "100")).passed is False
    assert (await judged(NumericMatch(tolerance=0, rel_tolerance=0.05), "-105", "-100")).passed is True


async def test_numeric_match_without_a_number_or_field() -> None:
    assert await judged(NumericMatch(), "no idea", "3") == Score(
        "numeric_match",
        False,
        passed=False,
        explanation="no number found in output (expected 3)",
        metadata={"expected": "3", "expected_rule": "last"},
    )
    assert await judged(NumericMatch(field="answer"), {"other": 3}, "3") == Score(
        "numeric_match", False, passed=False, explanation="output has no field 'answer'"
    )
    assert (await judged(NumericMatch(field="answer"), {"answer": "3"}, "3")).passed is True
    # a field named but the output is not an object: read the output itself
    assert (await judged(NumericMatch(field="answer"), "3", "3")).passed is True
    assert await judged(NumericMatch(), True, "1") == Score(
        "numeric_match",
        False,
        passed=False,
        explanation="output is not a usable number: True is a boolean, not a number",
    )
    assert (await judged(NumericMatch(), float("nan"), "1")).explanation == (
        "output is not a usable number: nan is not a finite number"
    )


async def test_numeric_match_case_faults_raise() -> None:
    with pytest.raises(ValueError, match=r"^case 'c1' has no expected value$"):
        await judged(NumericMatch(), "3")
    with pytest.raises(ValueError, match=r"^case 'c1': no number in expected value 'none'$"):
        await judged(NumericMatch(), "3", "none")


def test_numeric_match_options_are_checked() -> None:
    for bad in ({"tolerance": -1}, {"tolerance": True}, {"tolerance": float("inf")}, {"rel_tolerance": -0.1}):
        with pytest.raises(ScorerSpecError, match="must be a finite number >= 0"):
            NumericMatch(**bad)
    for label, bad_value in (("tolerance", -1), ("rel_tolerance", -0.1)):
        with pytest.raises(ScorerSpecError) as err:
            NumericMatch(**{label: bad_value})
        assert str(err.value) == f"numeric_match: {label} must be a finite number >= 0, got {bad_value!r}"
    assert NumericMatch(tolerance=0, rel_tolerance=0).rel_tolerance == 0


async def test_numbers_are_shown_plainly_and_run_away_ones_in_scientific_form() -> None:
    plain = await judged(NumericMatch(), "1.50", "15.00")
    assert plain.metadata == {"expected": "15", "expected_rule": "last", "actual": "1.5", "actual_rule": "last"}
    huge = "9" * 45
    shown = await judged(NumericMatch(), huge, huge)
    assert shown.metadata["actual"] == "1.0000000000e+45" and shown.passed is True
    twenty = "1" * 20
    assert (await judged(NumericMatch(), twenty, twenty)).metadata["actual"] == twenty


def test_extract_final_number_rules() -> None:
    assert extract_final_number("A: 3\nthen #### 4 and 5") == extract_final_number("#### 4 and 5")
    assert extract_final_number("#### 4 and 5").value == Decimal(4)
    hashed_empty = extract_final_number("7 #### none")
    assert hashed_empty is not None and (hashed_empty.value, hashed_empty.rule) == (Decimal(7), "last")
    answer = extract_final_number("Answer: 12 then 13, A: 5 cents + 9")
    assert answer is not None and (answer.value, answer.text, answer.rule) == (Decimal(5), "5", "answer")
    final = extract_final_number("Final answer:  −2.5%")
    assert final is not None and (final.value, final.text, final.rule) == (Decimal("-2.5"), "−2.5%", "answer")
    last = extract_final_number({"b": 2, "a": 10})
    assert last is not None and (last.value, last.rule) == (Decimal(2), "last")
    assert extract_final_number("nothing here") is None
    given = extract_final_number(Decimal("1.25"))
    assert given is not None and (given.value, given.text, given.rule) == (Decimal("1.25"), "1.25", "value")
    assert extract_final_number(3) is not None and extract_final_number(3).value == Decimal(3)
    with pytest.raises(ValueError, match="is not a finite number"):
        extract_final_number(Decimal("Infinity"))
    with pytest.raises(ValueError, match="boolean"):
        extract_final_number(False)


def test_find_numbers_signs_and_groups() -> None:
    assert find_numbers("-$5 and $-6, 16-3, 1,234,567.5 x.5 5.") == [
        (Decimal(-5), "-$5"),
        (Decimal(-6), "$-6"),
        (Decimal(16), "16"),
        (Decimal(3), "3"),
        (Decimal("1234567.5"), "1,234,567.5"),
        (Decimal(5), "5"),
    ]
    assert find_numbers(".5") == [(Decimal("0.5"), ".5")]


# -- contains / regex --------------------------------------------------------------------------


async def test_contains_all_and_any() -> None:
    assert await judged(Contains(), "Paris and Lyon", ["Paris", "Nice"]) == Score(
        "contains",
        False,
        passed=False,
        explanation="missing from output: ['Nice']",
        metadata={"found": ["Paris"], "missing": ["Nice"]},
    )
    assert await judged(Contains(mode="any"), "Paris and Lyon", ["Paris", "Nice"]) == Score(
        "contains", True, passed=True, metadata={"found": ["Paris"], "missing": ["Nice"]}
    )
    assert await judged(Contains(mode="any"), "Lyon", ["Paris", "Nice"]) == Score(
        "contains",
        False,
        passed=False,
        explanation="none of ['Paris', 'Nice'] in output",
        metadata={"found": [], "missing": ["Paris", "Nice"]},
    )
    assert await judged(Contains(value="paris", casefold=True), "PARIS!") == Score(
        "contains", True, passed=True, metadata={"found": ["paris"], "missing": []}
    )
    assert (await judged(Contains(value="paris"), "PARIS!")).passed is False
    assert (await judged(Contains(), {"city": "Paris"}, '"city": "Paris"')).passed is True
    for bad in ([], [1], 3):
        with pytest.raises(ValueError, match="contains needs a string or a non-empty list of strings"):
            await judged(Contains(), "x", bad)
    with pytest.raises(ScorerSpecError, match="mode must be 'all' or 'any'"):
        Contains(mode="some")


async def test_regex_search_fullmatch_flags_and_strip() -> None:
    assert await judged(Regex(pattern=r"\d+"), "  abc 42 \n") == Score(
        "regex", True, passed=True, metadata={"match": "42"}
    )
    assert await judged(Regex(pattern=r"\d+", fullmatch=True), "abc 42") == Score(
        "regex", False, passed=False, explanation=r"output does not fully match /\d+/"
    )
    assert await judged(Regex(pattern="x", flags="i"), "abc") == Score(
        "regex", False, passed=False, explanation="output has no match for /x/i"
    )
    assert (await judged(Regex(pattern="ABC", flags="i", fullmatch=True), " abc\n")).passed is True
    assert (await judged(Regex(pattern="abc", fullmatch=True, strip=False), " abc\n")).passed is False
    assert (await judged(Regex(), "order 66", r"\d\d")).metadata == {"match": "66"}
    with pytest.raises(ValueError, match="regex needs a string pattern, got int"):
        await judged(Regex(), "x", 5)
    with pytest.raises(ScorerSpecError, match=r"regex: unknown flag 'q' \(known: "):
        Regex(pattern="x", flags="q")
    with pytest.raises(ScorerSpecError, match=r"regex: invalid pattern '\(': missing \)"):
        await judged(Regex(), "x", "(")


def test_import_callable_forms() -> None:
    assert import_callable("evalcore.scorers.jsonmatch.canonical_text") is canonical_text
    assert import_callable("evalcore.scorers.jsonmatch:canonical_text") is canonical_text
    assert import_callable("evalcore.scorers.numbers.NumericMatch.score") is NumericMatch.score
    assert import_callable("evalcore.scorers.numbers:NumericMatch.score") is NumericMatch.score
    for bad, why in (
        ("tests.mod.<locals>.f", "is a local function or lambda"),
        ("evalcore.scorers.jsonmatch.nothing_here", "is not an importable function"),
        ("evalcore.scorers.numbers.NumericMatch.name", "is not an importable function"),  # not callable
        ("no_such_module.f", "is not an importable function"),
        ("no_such_module:f", "is not an importable function"),
    ):
        with pytest.raises(ScorerSpecError, match=why):
            import_callable(bad)


def test_import_callable_walks_every_module_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh package (submodules not yet imported, so not yet attributes of their parents):
    only importing the right module prefix finds the function; a name a package re-exports over
    its own submodule is found through the package."""
    pkg = f"callables_{uuid.uuid4().hex}"
    (tmp_path / pkg / "deep").mkdir(parents=True)
    (tmp_path / pkg / "__init__.py").write_text("from .shadow import shadow\n")
    (tmp_path / pkg / "shadow.py").write_text("class shadow:\n    @staticmethod\n    def f():\n        return 'f'\n")
    (tmp_path / pkg / "deep" / "__init__.py").write_text("")
    (tmp_path / pkg / "deep" / "mod.py").write_text("class Klass:\n    def method(self):\n        return 'm'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        method = import_callable(f"{pkg}.deep.mod.Klass.method")
        assert method.__qualname__ == "Klass.method" and method.__module__ == f"{pkg}.deep.mod"
        assert import_callable(f"{pkg}.shadow.f")() == "f"
    finally:
        for name in [m for m in sys.modules if m == pkg or m.startswith(f"{pkg}.")]:
            del sys.modules[name]


# -- json_match --------------------------------------------------------------------------------


async def test_json_match_verdicts() -> None:
    assert await judged(JsonMatch(), '```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}) == Score(
        "json_match", True, passed=True
    )
    assert await judged(JsonMatch(), {"a": [1, 3]}, '{"a": [1, 2]}') == Score(
        "json_match", False, passed=False, explanation="$.a[1]: expected 2, got 3", metadata={"path": "$.a[1]"}
    )
    assert await judged(JsonMatch(), "{'a': 1}", {"a": 1}) == Score(
        "json_match",
        False,
        passed=False,
        explanation=(await judged(JsonMatch(), "{'a': 1}", {"a": 1})).explanation,
    )
    broken = await judged(JsonMatch(), "{'a': 1}", {"a": 1})
    assert broken.explanation is not None and broken.explanation.startswith("output is not strict JSON: ")
    assert broken.metadata == {}
    assert (await judged(JsonMatch(mode="subset"), {"a": 1, "b": 2}, {"a": 1})).passed is True
    assert (await judged(JsonMatch(), {"a": 1, "b": 2}, {"a": 1})).passed is False
    with pytest.raises(ValueError, match=r"^case 'c1' has no expected value$"):
        await judged(JsonMatch(), "{}")
    with pytest.raises(ValueError, match=r"^case 'c1': expected value is not strict JSON: "):
        await judged(JsonMatch(), "{}", "{nope")
    with pytest.raises(ScorerSpecError, match="mode must be 'equal' or 'subset'"):
        JsonMatch(mode="loose")


def test_json_diff_list_subset_matches_each_expected_element_once() -> None:
    assert json_diff([{}, {"a": 1}], [{"a": 1}, {}], subset=True, list_subset=True) is None
    assert json_diff([1, 1], [1, 2], list_subset=True) == json_diff([1, 1], [1, 2], list_subset=True)
    twice = json_diff([1, 1], [1, 2], list_subset=True)
    assert twice is not None and (twice.path, twice.reason) == ("$[1]", "no matching element in output for expected 1")
    absent = json_diff([3], [1, 2], list_subset=True)
    assert absent is not None and (absent.path, absent.reason) == (
        "$[0]",
        "no element of the output matches for expected 3",
    )
    assert json_diff([2, 1], [1, 2, 3], list_subset=True) is None
    nested = json_diff({"xs": [{"k": 1}]}, {"xs": [{"k": 2}]}, list_subset=True)
    assert nested is not None and nested.path == "$.xs[0]"
    shorter = json_diff([1, 2, 3], [1, 2])
    assert shorter is not None and (shorter.path, shorter.reason) == ("$[2]", "expected 3 items, got 2")


def test_canonical_text() -> None:
    assert canonical_text("é x") == "é x"
    assert canonical_text({"b": "é", "a": 1}) == '{"a": 1, "b": "é"}'
    assert canonical_text({1, 2}) in ("{1, 2}", "{2, 1}")  # not JSON: str()
    assert canonical_text(float("nan")) == "NaN"


def test_specs_build_the_same_scorers() -> None:
    assert scorer_from_spec("numeric_match") == NumericMatch()


# -- report: the aggregate of a run, field by field ---------------------------------------------


def result(cid: str, split: str, scores: list[Score], *, error: ErrorInfo | None = None, **tokens: int) -> CaseResult:
    run = RunRecord(cid, f"r:{cid}", f"r:{cid}", output=None if error else "x", error=error, **tokens)
    return CaseResult(Case(cid, "q", "x", split=split), run, scores)


def summary(
    name: str, n: int, mean: float | None, *, stderr=None, passed=0, labels=None, cases: int, errors=0, **interval
):
    return MetricSummary(name, n, n + errors, errors, mean, stderr, passed, labels or {}, cases, **interval)


def wilson(k: int, n: int) -> dict:
    """The interval fields of a pass/fail metric of ``k`` true values in ``n``."""
    low, high = wilson_interval(k, n)
    return {"binary": True, "low": low, "high": high, "interval_method": "wilson"}


def too_few(n: int) -> dict:
    return {"interval_reason": f"too few cases (n={n}; an interval needs at least 10)"}


@pytest.fixture
def report() -> EvalReport:
    builder = ReportBuilder("run-1")
    builder.add(
        result(
            "c1",
            "train",
            [Score("exact_match", True), Score("sim", 0.5), Score("kind", "A")],
            tokens_in=10,
            tokens_out=5,
        )
    )
    builder.add(result("c2", "dev", [Score("exact_match", False), Score("sim", 1.0), Score("kind", "B")], tokens_in=3))
    builder.add(result("c3", "test", [], error=ErrorInfo("ValueError", "boom")))
    judge_errors = [Score("judge.acc", None, error="bad json"), Score("judge.cmp", None, error="bad json")]
    builder.add(result("c4", "", [*judge_errors, Score("sim", 0.25)]))
    builder.add(result("c5", "train", [Score("exact_match", True), Score("kind", "A")], tokens_out=1))
    builder.add(result("c6", "dev", [Score("sim", 0.0)]))  # measured, never judged: unscored
    return builder.build(2.5)


def test_report_totals_and_metrics(report: EvalReport) -> None:
    assert (report.eval_run_id, report.n, report.passed, report.failed, report.errored, report.unscored) == (
        "run-1",
        6,
        2,
        1,
        2,
        1,
    )
    assert report.pass_rate == pytest.approx(2 / 6)
    # one target error; the judge failing on two axes is one scorer error
    assert (report.target_errors, report.scorer_errors, report.tokens_in, report.tokens_out) == (1, 1, 13, 6)
    assert report.elapsed_s == 2.5
    # below 10 values no standard error (two equal values would claim 0); pass/fail scores: Wilson
    assert report.metrics == {
        "exact_match": summary("exact_match", 3, 2 / 3, passed=2, cases=6, **wilson(2, 3)),
        "judge.acc": summary("judge.acc", 0, None, errors=1, cases=6),
        "judge.cmp": summary("judge.cmp", 0, None, errors=1, cases=6),
        "kind": summary("kind", 3, None, labels={"A": 2, "B": 1}, cases=6),
        "sim": summary("sim", 4, pytest.approx(0.4375), cases=6, **too_few(4)),
    }
    assert list(report.metrics) == ["exact_match", "judge.acc", "judge.cmp", "kind", "sim"]
    assert report.metric_mean("sim") == pytest.approx(0.4375) and report.metric_mean("nope") is None
    assert report.metrics["kind"].coverage == "3/6" and report.metrics["kind"].complete is False
    assert summary("x", 2, 1.0, cases=2).complete is True


def test_report_splits_in_canonical_order(report: EvalReport) -> None:
    assert list(report.splits) == ["train", "dev", "test", "unsplit"]
    train, dev, test, unsplit = report.splits.values()
    assert (train.n, train.passed, train.failed, train.errored, train.unscored, train.pass_rate) == (2, 2, 0, 0, 0, 1.0)
    assert train.metrics["exact_match"] == summary("exact_match", 2, 1.0, passed=2, cases=2, **wilson(2, 2))
    assert train.metrics["sim"] == summary("sim", 1, 0.5, cases=2, **too_few(1))
    assert (dev.n, dev.passed, dev.failed, dev.unscored, dev.pass_rate) == (2, 0, 1, 1, 0.0)
    assert dev.metrics["sim"] == summary("sim", 2, 0.5, cases=2, **too_few(2))
    assert (test.n, test.errored, test.metrics, test.pass_rate) == (1, 1, {}, 0.0)
    assert (unsplit.n, unsplit.errored) == (1, 1)


def test_running_mean_standard_error_is_welfords() -> None:
    values = RunningMean()
    assert values.stderr is None
    for value in (0.5, 1.0, 0.25, 0.0):
        values.add(value)
    assert values.mean == pytest.approx(0.4375) and values.stderr == pytest.approx(0.21348, abs=1e-5)
    two = RunningMean()
    two.add(0.5)
    assert two.stderr is None
    two.add(1.0)
    assert two.stderr == pytest.approx(0.25)


def test_an_empty_report() -> None:
    empty = ReportBuilder("none").build()
    assert (empty.n, empty.pass_rate, empty.metrics, empty.splits, empty.elapsed_s) == (0, 0.0, {}, {}, 0.0)
    assert to_record(empty, json_mode=True)["pass_rate"] == 0.0


def test_the_report_record_is_strict_json(report: EvalReport) -> None:
    data = to_record(report, json_mode=True)
    assert data["metrics"]["kind"]["mean"] is None and data["metrics"]["kind"]["labels"] == {"A": 2, "B": 1}
    assert data["splits"]["train"]["pass_rate"] == 1.0 and data["n"] == 6
    json.dumps(data, allow_nan=False)


# -- gates -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("pass_rate>=0.8", ("pass_rate", ">=", 0.8)),
        ("  errors <= 0 ", ("errors", "<=", 0.0)),
        ("n==6", ("n", "==", 6.0)),
        ("failed!=1", ("failed", "!=", 1.0)),
        ("score:sim>0.25", ("score:sim", ">", 0.25)),
        ("coverage:sim<+1", ("coverage:sim", "<", 1.0)),
        ("unscored<-1.5", ("unscored", "<", -1.5)),
    ],
)
def test_parse_gate(text: str, parsed: tuple) -> None:
    gate = parse_gate(text)
    assert (gate.metric, gate.op, gate.threshold) == parsed and gate.text == text.strip()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("pass_rate=>0.8", "expected <metric><op><number>"),
        ("pass_rate>=", "expected <metric><op><number>"),
        ("pass_rate>=0.8x", "expected <metric><op><number>"),
        ("x pass_rate>=1", "expected <metric><op><number>"),
        ("accuracy>=0.8", "unknown metric 'accuracy'"),
        ("score:>=0.8", "unknown metric 'score:'"),
        ("coverage:>=1", "unknown metric 'coverage:'"),
    ],
)
def test_bad_gates_say_why(text: str, why: str) -> None:
    with pytest.raises(GateError, match=re.escape(f"bad gate {text!r}: {why}")):
        parse_gate(text)


def test_bad_gate_messages_give_the_syntax_and_every_metric() -> None:
    with pytest.raises(GateError) as syntax:
        parse_gate("pass_rate=>0.8")
    assert str(syntax.value) == (
        "bad gate 'pass_rate=>0.8': expected <metric><op><number>, e.g. 'pass_rate>=0.8', "
        "'score:numeric_match>=0.5', 'errors<=0'"
    )
    with pytest.raises(GateError) as unknown:
        parse_gate("accuracy>=0.8")
    assert str(unknown.value) == (
        "bad gate 'accuracy>=0.8': unknown metric 'accuracy' (use pass_rate, n, passed, failed, errors, "
        "errored, unscored, error_rate, score:<name>, coverage:<name>, cost_per_case, p50_latency_ms, "
        "p95_latency_ms, or with --baseline regressions, improvements, flips, worse_p, delta:pass_rate, delta:cost)"
    )


def test_gate_metrics_and_results(report: EvalReport) -> None:
    texts = [
        "pass_rate>=0.3",
        "n==6",
        "passed==2",
        "failed==1",
        "errors==2",
        "errored==2",
        "unscored==1",
        "error_rate<0.3",
        "score:sim>=0.4",
        "score:nope>=0",
        "coverage:sim>=1",
        "coverage:nope<=0",
    ]
    results = check_gates(report, [parse_gate(t) for t in texts])
    actual = {r.gate.text: r.actual for r in results}
    assert actual == {
        "pass_rate>=0.3": pytest.approx(1 / 3),
        "n==6": 6.0,
        "passed==2": 2.0,
        "failed==1": 1.0,
        "errors==2": 2.0,
        "errored==2": 2.0,
        "unscored==1": 1.0,
        "error_rate<0.3": pytest.approx(1 / 3),
        "score:sim>=0.4": pytest.approx(0.4375),
        "score:nope>=0": None,
        "coverage:sim>=1": pytest.approx(4 / 6),
        "coverage:nope<=0": 0.0,
    }
    held = {r.gate.text: r.held for r in results}
    assert [t for t in texts if held[t]] == [
        "pass_rate>=0.3",
        "n==6",
        "passed==2",
        "failed==1",
        "errors==2",
        "errored==2",
        "unscored==1",
        "score:sim>=0.4",
        "coverage:nope<=0",
    ]
    sim = results[texts.index("score:sim>=0.4")]
    assert (sim.covered, sim.cases, sim.partial) == (4, 6, True)
    assert sim.coverage_note == "on n=4/6 cases: 2 not covered"
    nope = results[texts.index("score:nope>=0")]
    assert (nope.covered, nope.cases, nope.held) == (0, 6, False)
    plain = results[texts.index("n==6")]
    assert (plain.covered, plain.cases, plain.partial, plain.coverage_note) == (None, None, False, None)


def test_gates_on_an_empty_run() -> None:
    empty = ReportBuilder("none").build()
    results = check_gates(empty, [parse_gate(t) for t in ("error_rate<=0", "coverage:sim>=0", "pass_rate>=0")])
    assert [(r.actual, r.held) for r in results] == [(0.0, True), (None, False), (0.0, True)]
    full = check_gates(_one_case_report(), [parse_gate("score:exact_match>=1")])[0]
    assert (full.covered, full.cases, full.partial, full.coverage_note) == (1, 1, False, None)


def _one_case_report() -> EvalReport:
    builder = ReportBuilder("one")
    builder.add(result("c1", "dev", [Score("exact_match", True)]))
    return builder.build()


# -- stats: exact readings ---------------------------------------------------------------------


def reading(both: int, a_only: int, b_only: int, neither: int, **options: float) -> Verdict:
    """The verdict's reading of an interval, whatever n (``min_n=1``; the default minimum of 10
    makes every table below 10 pairs ``too_few_cases``: tests/evalcore/test_small_n.py)."""
    counts = PairedCounts(both, a_only, b_only, neither)
    return read_verdict(counts, bootstrap_pass_rate_delta(counts, min_n=1), **options)


def test_verdict_texts_for_every_outcome() -> None:
    assert reading(1, 0, 3, 0) == Verdict(
        "inconclusive", "inconclusive: p=0.25 but CI of delta [+25.0, +100.0] points excludes 0", 0.25, False
    )
    # the other disagreement: p just under 0.05, the interval touching 0
    other = reading(5, 29, 15, 0)
    assert other.outcome == "inconclusive" and other.significant is False
    assert other.text == "inconclusive: p=0.0488 but CI of delta [-53.1, +0.0] points includes 0"
    # a looser alpha turns the first into a call
    assert reading(1, 0, 3, 0, alpha=0.3) == Verdict(
        "b_better", "B is better than A: p=0.25, CI of delta [+25.0, +100.0] points excludes 0", 0.25, True
    )
    worse = reading(10, 30, 0, 0)
    assert worse.outcome == "a_better" and worse.significant is True
    assert worse.text.startswith("B is worse than A: p<0.001, CI of delta [-") and worse.text.endswith(" excludes 0")
    assert reading(4, 0, 0, 3) == Verdict(
        "no_difference", "no significant difference in pass rate: no case flipped between A and B (7 cases)", 1.0, False
    )
    assert read_verdict(PairedCounts(0, 0, 0, 0), None) == Verdict(
        "no_pairs", "no cases in common: nothing to compare", 1.0, False
    )
    assert read_verdict(PairedCounts(2, 1, 0, 0), None) == Verdict(
        "too_few_cases",
        "too few cases to compare: 3 in common (1 pass → fail, 0 fail → pass); no interval or verdict below 10",
        1.0,
        False,
    )


def test_bootstrap_intervals_are_fixed_by_the_seed() -> None:
    counts = PairedCounts(3, 1, 4, 2)
    assert bootstrap_pass_rate_delta(counts) == ConfidenceInterval(0.3, -0.1, 0.7, 0.95, 2000, 10)
    assert bootstrap_pass_rate_delta(counts, resamples=10, confidence=0.5, seed=1) == ConfidenceInterval(
        0.3, 0.3, 0.5, 0.5, 10, 10
    )
    assert bootstrap_mean_delta(
        [0.5, -0.25, 0.0, 1.0], resamples=10, seed=2, confidence=0.8, min_n=1
    ) == ConfidenceInterval(0.3125, -0.0625, 0.5625, 0.8, 10, 4)
    # everything flipped one way: the resamples cannot vary, Newcombe's interval stands in
    up = bootstrap_pass_rate_delta(PairedCounts(0, 0, 4, 0), min_n=1)
    assert up == ConfidenceInterval(1.0, pytest.approx(0.30719, abs=1e-5), 1.0, 0.95, 0, 4, "newcombe")
    down = bootstrap_pass_rate_delta(PairedCounts(0, 4, 0, 0), min_n=1)
    assert down == ConfidenceInterval(-1.0, -1.0, pytest.approx(-0.30719, abs=1e-5), 0.95, 0, 4, "newcombe")
    # and at the default minimum n, 4 pairs get no interval at all
    assert bootstrap_pass_rate_delta(PairedCounts(0, 4, 0, 0)) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"resamples": 0}, r"^resamples must be >= 1$"),
        ({"confidence": 0.0}, r"^confidence must be in \(0, 1\)$"),
        ({"confidence": 1.0}, r"^confidence must be in \(0, 1\)$"),
    ],
)
def test_bootstrap_options_are_checked(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_pass_rate_delta(PairedCounts(1, 1, 1, 1), **options)
    with pytest.raises(ValueError, match=message):
        bootstrap_mean_delta([0.1], **options)
    assert bootstrap_mean_delta([0.25, 0.5], resamples=1, min_n=1).resamples == 1
    assert bootstrap_mean_delta([0.25], resamples=1) is None  # below the minimum n


def test_interval_edges_and_zero() -> None:
    assert ConfidenceInterval(0.1, 0.0, 0.2, 0.95, 10, 5).excludes_zero is False
    assert ConfidenceInterval(-0.1, -0.2, 0.0, 0.95, 10, 5).excludes_zero is False
    assert ConfidenceInterval(0.1, 0.01, 0.2, 0.95, 10, 5).excludes_zero is True
    assert ConfidenceInterval(-0.1, -0.2, -0.01, 0.95, 10, 5).excludes_zero is True
    none = PairedCounts(0, 0, 0, 0)
    assert (none.n, none.pass_rate_a, none.pass_rate_b, none.delta) == (0, None, None, None)


def test_mcnemar_at_the_exact_arithmetic_boundary() -> None:
    # n = 1000 is summed exactly, n = 1001 in log space: both agree with integer arithmetic
    for b, c in ((480, 520), (481, 520), (400, 601)):
        n, k = b + c, min(b, c)
        exact = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
        assert mcnemar_exact(b, c) == pytest.approx(exact, rel=1e-9)
    assert mcnemar_exact(0, 1) == 1.0 and mcnemar_exact(600, 600) == 1.0
    with pytest.raises(ValueError, match=r"^counts must be >= 0$"):
        mcnemar_exact(1, -1)


def test_many_distinct_differences_are_rounded_to_a_grid() -> None:
    diffs = [i / 1000 + 0.0001 for i in range(300)]  # 300 distinct values, each 0.0001 off the grid
    ci = bootstrap_mean_delta(diffs)
    assert ci is not None and ci.estimate == pytest.approx(sum(diffs) / 300)
    # the rounded values move the mean by 0.0001 exactly: bounds land on the grid / 300
    assert (ci.low * 300) == pytest.approx(round(ci.low * 300, 3), abs=1e-6)
    assert ci.low < ci.estimate < ci.high


# -- survivors of the first mutation run --------------------------------------------------------


async def test_contains_casefold_folds_the_needles_too() -> None:
    assert (await judged(Contains(value=["Paris", "LYON"], casefold=True), "paris and lyon")).passed is True


def test_import_callable_edge_paths() -> None:
    import json as json_module

    assert import_callable("json.dumps") is json_module.dumps  # a two-part path
    with pytest.raises(ScorerSpecError, match="is not an importable function"):
        import_callable("evalcore.scorers.numbers:NumericMatch:score")


def test_json_diff_list_subset_applies_inside_nested_lists() -> None:
    assert json_diff([[1]], [[2, 1]], list_subset=True) is None
    assert json_diff([{"xs": [1]}], [{"xs": [2, 1]}], list_subset=True) is None


async def test_numbers_of_forty_digits_are_shown_whole_and_longer_ones_in_scientific_form() -> None:
    forty = "1" + "0" * 39
    assert (await judged(NumericMatch(), forty, forty)).metadata["actual"] == forty
    forty_one = "1" + "0" * 40
    assert (await judged(NumericMatch(), forty_one, forty_one)).metadata["actual"] == "1.0000000000e+40"


def test_held_out_error_defaults_to_the_test_split() -> None:
    from evalcore.splits import HeldOutError

    assert HeldOutError("no").split == "test" and HeldOutError("no", split="all").split == "all"


def test_json_diff_messages_quote_values_and_paths_as_written() -> None:
    assert json_diff("é", "x") == JSONDiff("$", 'expected "é", got "x"')
    assert json_diff({"clé x": 1}, {"clé x": 2}) == JSONDiff('$["clé x"]', "expected 1, got 2")
    # 60 characters are shown whole, longer values cut to 57 and "..."
    sixty, sixty_one = "b" * 58, "c" * 59
    assert json_diff([1], [sixty]) == JSONDiff("$[0]", f'expected number 1, got string "{sixty}"')
    cut = json_diff([1], [sixty_one])
    assert cut == JSONDiff("$[0]", 'expected number 1, got string "' + "c" * 56 + "...")


async def test_json_match_refuses_nan_inside_a_list_naming_where() -> None:
    assert await judged(JsonMatch(), [1, float("nan")], [1, 2]) == Score(
        "json_match", False, passed=False, explanation="output is not strict JSON: nan at $[1] is not valid JSON"
    )


def test_no_flip_intervals_sit_at_zero() -> None:
    for counts in (PairedCounts(10, 0, 0, 5), PairedCounts(2, 1, 1, 0)):
        interval = bootstrap_pass_rate_delta(counts, min_n=1)
        assert interval is not None and interval.estimate == 0.0


def test_narrow_intervals_take_the_percentile_indices() -> None:
    # two resamples at 1% confidence: the low bound is the smaller draw, the high the larger
    interval = bootstrap_mean_delta([0.0, 1.0], resamples=2, confidence=0.01, seed=1, min_n=1)
    assert interval == ConfidenceInterval(0.5, 0.0, 0.5, 0.01, 2, 2)


@pytest.mark.parametrize(("distinct", "rounded"), [(256, False), (257, True)])
def test_more_than_256_distinct_differences_are_rounded(distinct: int, rounded: bool) -> None:
    diffs = [i / 1000 + 0.0001 for i in range(distinct)]
    on_grid = bootstrap_mean_delta([round(v, 3) for v in diffs])
    as_given = bootstrap_mean_delta(diffs)
    assert on_grid is not None and as_given is not None
    assert ((as_given.low, as_given.high) == (on_grid.low, on_grid.high)) is rounded


def test_guard_split_messages_and_split() -> None:
    from evalcore.splits import HeldOutError, guard_split

    with pytest.raises(HeldOutError) as test:
        guard_split("test", allow_test=False)
    assert str(test.value) == (
        "split 'test' is held out: pass --allow-test (allow_test=True) to run on it; "
        "every run on the test split is recorded, so tune on train and choose on dev"
    )
    assert test.value.split == "test"
    with pytest.raises(HeldOutError) as everything:
        guard_split("all", allow_test=False)
    assert str(everything.value) == (
        "split 'all' includes the held-out test split: pass --allow-test (allow_test=True) "
        "to run on it, or choose --split train or --split dev"
    )
    assert everything.value.split == "all"
    assert guard_split("all", allow_test=True) is None


def test_spec_names_callables_without_a_module_or_a_qualified_name() -> None:
    import operator

    from evalcore.scorers import Predicate

    assert Predicate(fn=operator.itemgetter(0)).spec().args["fn"] == "operator.operator.itemgetter(0)"
    assert Predicate(fn=(1).__add__).spec().args["fn"] == "?.int.__add__"


def test_verdict_edges() -> None:
    assert reading(5, 3, 3, 5) == Verdict(
        "no_difference",
        "no significant difference in pass rate: p=1, CI of delta [-31.2, +31.2] points includes 0",
        1.0,
        False,
    )
    assert reading(1, 0, 0, 0).outcome == "no_difference"  # one pair is still a pair
    # p equal to alpha is not significant
    assert reading(1, 0, 3, 0, alpha=0.25).outcome == "inconclusive"
