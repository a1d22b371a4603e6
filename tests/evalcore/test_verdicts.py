"""A verdict is never invented: statuses, thresholds, coverage, and the verdict repros
(ho-01, bh-23, ho-05, ho-03) through the engine."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import numpy as np
import pytest

from evalcore import Case, run_eval
from evalcore.discovery import discover_targets
from evalcore.gates import check_gates, parse_gate
from evalcore.loaders.adk import load_adk_file
from evalcore.report_files import write_junit
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers import Predicate, ScorerSpecError
from evalcore.scorers.calls import actual_calls
from evalcore.scorers.citations import is_opaque_id, match_citations
from evalcore.serial import from_record, to_record
from evalcore.types import CaseResult, CaseStatus, Score, StatusReason, case_outcome

REPROS = Path(__file__).resolve().parents[1] / "fixtures" / "repros"


def ratio(output: Any, expected: Any) -> float:
    """Module level, so a spec can name it by import path."""
    return 1.0 if output == expected else 0.25


class Collect:
    """A sink keeping every case result, in arrival order."""

    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def on_event(self, event: Any) -> None:
        return None

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)

    def flush(self) -> None:
        return None


def run(cases: list[Case], target: Any, scorers: list[Any]) -> tuple[Any, Collect]:
    store = Collect()
    report = asyncio.run(run_eval(cases, target, scorers, sink=store, concurrency=2))
    return report, store


def ok(name: str) -> Score:
    return Score(name, True, passed=True)


def bad(name: str) -> Score:
    return Score(name, False, passed=False)


def measure(name: str) -> Score:
    return Score(name, 0.5)


def broken(name: str) -> Score:
    return Score.failure(name, "ZeroDivisionError: division by zero")


# -- the verdict rule -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target_errored", "scores", "status", "reason"),
    [
        (False, [ok("a")], CaseStatus.PASSED, StatusReason.VERDICTS_PASS),
        (False, [ok("a"), measure("a.recall")], CaseStatus.PASSED, StatusReason.VERDICTS_PASS),
        (False, [ok("a"), bad("b")], CaseStatus.FAILED, StatusReason.VERDICT_FAILED),
        # a definite fail decides the case even though another scorer errored
        (False, [bad("a"), broken("judge")], CaseStatus.FAILED, StatusReason.FAILED_SCORER_ERRORED),
        # a pass with a missing verdict could still turn into a fail: errored
        (False, [ok("a"), broken("judge")], CaseStatus.ERRORED, StatusReason.SCORER_ERROR),
        (False, [broken("judge")], CaseStatus.ERRORED, StatusReason.SCORER_ERROR),
        (True, [], CaseStatus.ERRORED, StatusReason.TARGET_ERROR),
        (False, [], CaseStatus.UNSCORED, StatusReason.NO_SCORER),
        (False, [measure("ratio"), Score("label", "blue")], CaseStatus.UNSCORED, StatusReason.NO_VERDICT),
    ],
)
def test_case_outcome_rule(target_errored, scores, status, reason):
    outcome = case_outcome(target_errored=target_errored, scores=scores)
    assert (outcome.status, outcome.reason) == (status, reason)
    # the stored (dict) form of the scores gives the same outcome
    stored = case_outcome(target_errored=target_errored, scores=[to_record(s) for s in scores])
    assert stored == outcome


def test_a_bool_score_value_is_its_own_verdict():
    """A custom scorer's ``Score("ok", False)`` fails the case; it is never read as "no verdict"."""
    assert Score("ok", False).passed is False and Score("ok", True).passed is True
    assert from_record(Score, {"name": "ok", "value": False}).passed is False
    assert case_outcome(target_errored=False, scores=[{"name": "ok", "value": False}]).status is CaseStatus.FAILED
    report, _ = run([Case("a", 1, 2)], lambda x: x, [Predicate(fn=lambda ctx: Score("same", ctx.output == 2))])
    assert (report.failed, report.unscored) == (1, 0)


def test_failed_with_scorer_error_is_worded_for_the_case_page():
    outcome = case_outcome(target_errored=False, scores=[bad("a"), broken("judge")])
    assert outcome.text == "failed (another scorer errored, outcome already known)"
    open_case = case_outcome(target_errored=False, scores=[ok("a"), broken("judge")])
    assert "missing verdict could change" in open_case.text


# -- ho-01: no verdict never passes ---------------------------------------------------------------


@pytest.mark.parametrize("target_id", ["float-predicate", "no-scorer"])
def test_ho01_a_case_nothing_judged_is_unscored_and_never_meets_a_pass_rate_gate(target_id):
    folder = REPROS / "ho-01-no-verdict-counts-as-pass"
    spec = discover_targets(folder).targets[target_id]
    from evalcore.loaders import load_cases

    cases = load_cases(folder / "cases.jsonl").cases
    report, store = run(cases, spec.target, list(spec.scorers))
    assert (report.n, report.passed, report.failed, report.errored, report.unscored) == (2, 0, 0, 0, 2)
    assert report.pass_rate == 0.0
    assert all(not r.passed and r.status is CaseStatus.UNSCORED for r in store.results)
    (gate,) = check_gates(report, [parse_gate("pass_rate>=0.5")])
    assert not gate.held
    (unscored,) = check_gates(report, [parse_gate("unscored<=0")])
    assert unscored.actual == 2.0 and not unscored.held


def test_pass_rate_counts_unscored_cases_against_it():
    cases = [Case(f"c{i}", i, i) for i in range(4)]
    scorers = [Predicate(fn=lambda o, e: True if o < 2 else 0.5, label="mixed")]
    report, _ = run(cases, lambda x: x, scorers)
    assert (report.passed, report.unscored, report.n) == (2, 2, 4)
    assert report.pass_rate == 0.5


# -- thresholds -----------------------------------------------------------------------------------


def test_a_float_predicate_gives_a_verdict_only_through_its_threshold():
    cases = [Case("right", "a", "a"), Case("wrong", "b", "a")]
    measured, store = run(cases, lambda x: x, [Predicate(fn=ratio)])
    assert measured.unscored == 2
    assert all(s.passed is None for r in store.results for s in r.scores)

    judged, store = run(cases, lambda x: x, [Predicate(fn=ratio, threshold=0.5)])
    by_id = {r.case_id: r for r in store.results}
    assert by_id["right"].status is CaseStatus.PASSED and by_id["wrong"].status is CaseStatus.FAILED
    assert by_id["wrong"].scores[0].value == 0.25 and "< threshold 0.5" in by_id["wrong"].scores[0].explanation
    assert (judged.passed, judged.failed, judged.unscored) == (1, 1, 0)


def test_threshold_named_in_the_spec_string_round_trips():
    scorer = scorer_from_spec(f"predicate:fn={__name__}.ratio,threshold=0.5")
    assert isinstance(scorer, Predicate) and scorer.threshold == 0.5
    assert scorer.spec().args["threshold"] == 0.5
    rebuilt = scorer_from_spec(to_record(scorer.spec()))
    assert rebuilt.threshold == 0.5 and rebuilt.score_names == ["ratio"]


@pytest.mark.parametrize("threshold", [1.5, -0.1, True, "high"])
def test_a_bad_threshold_is_refused(threshold):
    with pytest.raises(ScorerSpecError, match=r"threshold must be a number in 0\.\.1"):
        Predicate(fn=ratio, threshold=threshold)


def test_bool_predicates_give_verdicts_numpy_ones_too():
    cases = [Case("a", 1, 1), Case("b", 2, 1)]
    report, store = run(cases, lambda x: x, [Predicate(fn=lambda o, e: np.bool_(o == e), label="same")])
    assert (report.passed, report.failed) == (1, 1)
    assert {type(s.value) for r in store.results for s in r.scores} == {bool}


# -- coverage -------------------------------------------------------------------------------------


def test_coverage_counts_cases_whose_target_errored():
    def target(x: int) -> int:
        if x == 3:
            raise RuntimeError("target down")
        return x

    cases = [Case(f"c{i}", i, i, split="dev" if i < 2 else "test") for i in range(4)]
    report, _ = run(cases, target, [Predicate(fn=lambda o, e: 1 / (o - 2) > -2, label="check")])
    metric = report.metrics["check"]
    # c2 divides by zero (scorer error), c3's target errored: 2 of 4 cases have a value
    assert (metric.n, metric.errors, metric.total, metric.cases) == (2, 1, 3, 4)
    assert metric.coverage == "2/4" and not metric.complete
    assert report.splits["test"].metrics["check"].coverage == "0/2"
    assert report.splits["dev"].metrics["check"].complete


def test_a_score_gate_on_part_of_the_run_says_so_and_coverage_can_be_gated():
    cases = [Case("a", "x", "x"), Case("b", "", "x")]
    report, _ = run(cases, lambda x: x, [Predicate(fn=lambda o, e: len(o) / len(o), label="nonempty")])
    score_gate, coverage_gate = check_gates(
        report, [parse_gate("score:nonempty>=1"), parse_gate("coverage:nonempty>=1")]
    )
    assert score_gate.held and (score_gate.covered, score_gate.cases) == (1, 2)
    assert score_gate.coverage_note == "on n=1/2 cases: 1 not covered"
    assert coverage_gate.actual == 0.5 and not coverage_gate.held


# -- bh-23: a plain-function scorer goes by the name the user sees --------------------------------


def test_bh23_plain_function_score_errors_and_gate_share_its_name():
    from evalcore.loaders import load_cases

    spec = discover_targets(REPROS / "agents").targets["claims"]
    cases = load_cases(REPROS / "bh-23-predicate-errors.jsonl").cases
    report, store = run(cases, spec.target, list(spec.scorers))
    assert list(report.metrics) == ["claims_ratio"]
    metric = report.metrics["claims_ratio"]
    assert (metric.mean, metric.n, metric.cases, metric.errors) == (0.5, 1, 2, 1)
    n1 = next(r for r in store.results if r.case_id == "n1")
    assert [s.name for s in n1.scores] == ["claims_ratio"] and "ZeroDivisionError" in n1.scores[0].error
    assert n1.status is CaseStatus.ERRORED
    (gate,) = check_gates(report, [parse_gate("score:claims_ratio>=0.5")])
    assert gate.held and gate.actual == 0.5 and gate.partial


# -- ho-05: prefixes only for opaque ids ----------------------------------------------------------


def test_ho05_a_title_never_prefix_matches():
    folder = REPROS / "ho-05-citation-prefix-title"
    spec = discover_targets(folder).targets["title-cites"]
    from evalcore.loaders import load_cases

    report, _ = run(load_cases(folder / "cases.jsonl").cases, spec.target, list(spec.scorers))
    assert report.failed == 1
    assert report.metrics["citation_set.precision"].mean == 0.0
    assert report.metrics["citation_set.recall"].mean == 0.0


def test_shortened_ids_match_only_opaque_ids():
    digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    uuid = "123e4567-e89b-12d3-a456-426614174000"
    assert is_opaque_id(digest) and is_opaque_id(uuid)
    assert not is_opaque_id("manchester united f.c.") and not is_opaque_id("12345678901234567890")
    assert not is_opaque_id("deadbeef")  # too short to be a hash rather than a word
    assert match_citations(["9f86d081"], [digest]).recall == 1.0
    assert match_citations(["123e4567-e89b"], [uuid]).recall == 1.0
    assert match_citations(["Manchester"], ["Manchester United F.C."]).recall == 0.0
    assert match_citations(["deadbeef"], ["deadbeefcafe"]).recall == 0.0
    assert match_citations(["12345678"], ["12345678901234567890"]).recall == 0.0
    # ambiguous among opaque ids: no match
    assert match_citations(["9f86d081"], [digest, "9f86d081" + "0" * 56]).precision == 0.0


# -- ho-03: actual calls in every shape expected calls are read from ------------------------------


def test_ho03_replaying_the_imported_adk_expected_value_scores_one():
    folder = REPROS / "ho-03-adk-replay-tool-calls-zero"
    spec = discover_targets(folder).targets["adk-replay"]
    cases = load_adk_file(folder / "one_turn.test.json")
    report, store = run(cases, spec.target, list(spec.scorers))
    assert report.passed == 1
    assert report.metrics["tool_calls.f1"].mean == 1.0
    (result,) = store.results
    assert result.scores[0].metadata["actual_source"] == "output"


@pytest.mark.parametrize(
    "shape",
    [
        [{"name": "lookup", "arguments": {"q": "x"}}],
        {"final_response": "done", "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]},
        [
            {"final_response": None, "tool_calls": []},
            {"final_response": "ok", "tool_calls": [{"name": "lookup", "args": {"q": "x"}}]},
        ],
        [{"tool_name": "lookup", "tool_input": {"q": "x"}}],
    ],
)
def test_every_expected_shape_is_read_as_actual_calls_from_output_and_metadata(shape):
    from evalcore.scorers.base import ScoreContext
    from evalcore.types import RunRecord

    case = Case("c", "q", shape)
    from_output = ScoreContext(case=case, output=shape, run=RunRecord("c", "r", "r"))
    calls, source = actual_calls(from_output)
    assert source == "output" and [(c.name, c.arguments) for c in calls] == [("lookup", {"q": "x"})]
    recorded = ScoreContext(case=case, output="text", run=RunRecord("c", "r", "r", metadata={"tool_calls": shape}))
    calls, source = actual_calls(recorded)
    assert source == "metadata" and [c.name for c in calls] == ["lookup"]
    report, _ = run([case], lambda q: shape, ["tool_calls"])
    assert report.passed == 1


# -- report files ---------------------------------------------------------------------------------


def test_junit_reports_unscored_cases_as_skipped(tmp_path):
    report, _ = run([Case("a", 1, 1)], lambda x: x, [])
    path = tmp_path / "r.xml"
    write_junit(path, report, suite_name="s", cases=[{"case_id": "a", "status": "unscored", "scores": []}])
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite.get("skipped") == "1"
    assert suite.find("testcase/skipped") is not None
