"""Per-case scorer specs (CaseScorers): a case's metadata.scorers scored as that case's checks."""

from __future__ import annotations

import asyncio

from evalcore.scorer_registry import CaseScorers, scorer_from_spec
from evalcore.scoring import score_run
from evalcore.types import Case, CaseStatus, RunRecord, case_outcome


def scored(case: Case, output: object, scorer: CaseScorers | None = None) -> list:
    run = RunRecord(run_id="r", case_id=case.id, trace_id="t", output=output)
    return asyncio.run(score_run(case, run, [scorer or CaseScorers()]))


def contains(value: str, **args: object) -> dict:
    return {"name": "contains", "args": {"value": value, **args}}


def test_each_spec_of_the_case_gives_a_verdict_named_under_case():
    case = Case(id="a", input="q", metadata={"scorers": [contains("bonjour", casefold=True), contains("monde")]})
    scores = scored(case, "Bonjour le monde")
    assert [(s.name, s.passed) for s in scores] == [("case.contains", True), ("case.contains_2", True)]
    failing = scored(case, "Bonjour tout le reste")
    assert [(s.name, s.passed) for s in failing] == [("case.contains", True), ("case.contains_2", False)]
    assert case_outcome(target_errored=False, scores=failing).status is CaseStatus.FAILED


def test_a_case_without_specs_gets_no_score_and_one_spec_is_built_once():
    scorer = CaseScorers()
    assert scored(Case(id="plain", input="q"), "x", scorer) == []
    spec = contains("x")
    for name in ("a", "b"):
        scored(Case(id=name, input="q", metadata={"scorers": [spec]}), "x", scorer)
    assert len(scorer._built) == 1


def test_a_bad_spec_is_an_error_on_its_score_and_the_others_still_run():
    case = Case(
        id="a",
        input="q",
        metadata={"scorers": [{"name": "no_such_scorer"}, contains("x"), {"name": "regex", "args": {"bogus": 1}}]},
    )
    scores = {s.name: s for s in scored(case, "x")}
    assert scores["case.contains"].passed is True
    assert "unknown scorer 'no_such_scorer'" in scores["case.no_such_scorer"].error
    assert "ScorerSpecError" in scores["case.regex"].error
    assert case_outcome(target_errored=False, scores=list(scores.values())).status is CaseStatus.ERRORED


def test_case_data_cannot_name_code_to_run():
    """A predicate spec from a case bank (an upload) may only name the engine's own checks."""
    evil = {"name": "predicate", "args": {"fn": "os.system"}}
    nested = {"name": "case_scorers"}
    safe = {"name": "predicate", "args": {"fn": "evalcore.loaders.promptfoo_asserts.is_json", "label": "is_json"}}
    scores = {s.name: s for s in scored(Case(id="a", input="q", metadata={"scorers": [evil, nested, safe]}), "{}")}
    assert "may only name one of" in scores["case.predicate"].error
    assert "cannot name case_scorers" in scores["case.case_scorers"].error
    assert scores["case.is_json"].passed is True
    # the same spec given as the run's own scorer (the operator's choice) still imports the function
    assert scorer_from_spec(safe).name == "predicate"


def test_unchecked_assertions_are_reported_as_a_label_that_is_no_verdict():
    case = Case(id="a", input="q", metadata={"unscored_assertions": ["javascript", "python", "javascript"]})
    (score,) = scored(case, "x")
    assert (score.name, score.value, score.passed) == ("case.unchecked", "javascript, python", None)
    assert case_outcome(target_errored=False, scores=[score]).status is CaseStatus.UNSCORED


def test_the_spec_round_trip():
    spec = CaseScorers().spec()
    assert (spec.name, spec.args) == ("case_scorers", {})
    assert isinstance(scorer_from_spec({"name": "case_scorers"}), CaseScorers)
    assert CaseScorers().score_names == ["case"]
