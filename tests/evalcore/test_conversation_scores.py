"""Conversation-level scores: the judge over a whole transcript, final_state's per-key diff, the
rule lens once per conversation, and how they join the per-turn scores in the case's verdict.

The judge is a local OpenAI-compatible stand-in (tests/support/stand_in_llm.py) behind the real
OpenAI client.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from evalcore.conversations import Session
from evalcore.judge import AXES
from evalcore.judge.conversation import (
    GOAL_GUIDE,
    RETENTION_GUIDE,
    ConversationRubric,
    GoalCompletion,
    KnowledgeRetention,
)
from evalcore.rules.scorer import RuleAdherence
from evalcore.runner import run_eval
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers import ScorerServices
from evalcore.scorers.builtin import ExactMatch
from evalcore.scorers.conversation import FinalState, state_diff
from evalcore.store import NullSink
from evalcore.types import Case, CaseResult, CaseStatus
from tests.support.stand_in_llm import StandInLLM, completion_body

TRIP = Case(
    "trip",
    {"turns": ["My name is Ana and I live in Porto.", "I want a weekend trip by train.", "Where should I go?"]},
    [{"final_response": "Hello Ana."}, {}, {}],
)
ANSWERS = ["Hello Ana.", "Noted: by train.", "From Porto, Lisbon is 3 hours by train."]


def talker(message: str, session: Session) -> str:
    return ANSWERS[session.turn]


class Collect(NullSink):
    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)


def verdict(score: int) -> dict[str, Any]:
    return completion_body(json.dumps({axis: {"score": score, "reason": f"r{score}"} for axis in AXES}))


@pytest.fixture
def judge() -> Iterator[Callable[[Callable[[str], dict[str, Any]]], tuple[StandInLLM, OpenAIChatModel]]]:
    servers: list[StandInLLM] = []

    def start(answer: Callable[[str], dict[str, Any]]) -> tuple[StandInLLM, OpenAIChatModel]:
        def respond(body: dict[str, Any]) -> dict[str, Any]:
            return answer("\n".join(str(m.get("content")) for m in body["messages"]))

        server = StandInLLM(responder=respond).start()
        servers.append(server)
        return server, OpenAIChatModel("stand-in-model", base_url=server.base_url, max_retries=0, timeout_s=10.0)

    yield start
    for server in servers:
        server.stop()


def play(case: Case, target: Any, scorers: list[Any], model: Any = None) -> CaseResult:
    sink = Collect()
    asyncio.run(run_eval([case], target, scorers, sink=sink, services=ScorerServices(judge=model)))
    (result,) = sink.results
    return result


def by_name(result: CaseResult) -> dict[str, Any]:
    return {score.name: score for score in result.scores}


def test_goal_completion_is_asked_once_about_the_whole_transcript(judge: Any) -> None:
    server, model = judge(lambda prompt: verdict(5 if "Lisbon" in prompt else 1))
    result = play(TRIP, talker, [ExactMatch(), GoalCompletion(use_cache=False)], model)
    scores = by_name(result)
    assert len(server.requests) == 1  # once per conversation, not per turn
    prompt = "\n".join(str(m["content"]) for m in server.requests[0].body["messages"])
    assert GOAL_GUIDE in prompt
    for text in (*TRIP.input["turns"], *ANSWERS):
        assert json.dumps(text)[1:-1] in prompt
    assert scores["goal_completion"].passed is True and "turns" not in scores["goal_completion"].metadata
    assert {f"goal_completion.{axis}" for axis in AXES} <= scores.keys()
    assert scores["exact_match"].metadata["turns"][0]["passed"] is True  # per-turn, folded
    assert result.status is CaseStatus.PASSED


def test_a_failing_conversation_score_fails_a_case_whose_every_turn_passes(judge: Any) -> None:
    server, model = judge(lambda prompt: verdict(2))
    result = play(TRIP, talker, [ExactMatch(), KnowledgeRetention(use_cache=False)], model)
    scores = by_name(result)
    assert RETENTION_GUIDE in str(server.requests[0].body["messages"])
    assert scores["exact_match"].passed is True
    assert scores["knowledge_retention"].passed is False
    assert result.status is CaseStatus.FAILED


def test_samples_that_disagree_are_flagged_unstable(judge: Any) -> None:
    marks = itertools.cycle([5, 5, 1])
    _, model = judge(lambda prompt: verdict(next(marks)))
    result = play(TRIP, talker, [ConversationRubric(samples=3, use_cache=False, rubric="Be helpful.")], model)
    score = by_name(result)["conversation_rubric"]
    assert score.metadata["unstable"] is True and len(score.metadata["samples"]) == 3
    assert score.passed is True  # per-axis majority: 5, 5, 1 -> 5


def test_a_judge_failure_is_an_error_never_a_zero_and_the_case_is_errored(judge: Any) -> None:
    server, model = judge(lambda prompt: completion_body("I think it went well."))
    result = play(TRIP, talker, [ExactMatch(), GoalCompletion(use_cache=False, retries=1)], model)
    scores = by_name(result)
    assert len(server.requests) == 2  # first attempt and one retry
    for name in ("goal_completion", *(f"goal_completion.{axis}" for axis in AXES)):
        assert scores[name].error is not None and scores[name].value is None
    assert scores["exact_match"].passed is True
    assert result.status is CaseStatus.ERRORED


def test_no_judge_model_is_an_error_too() -> None:
    result = play(TRIP, talker, [GoalCompletion(use_cache=False)])
    assert by_name(result)["goal_completion"].error is not None
    assert result.status is CaseStatus.ERRORED


def test_a_single_turn_case_is_judged_as_a_one_turn_conversation(judge: Any) -> None:
    server, model = judge(lambda prompt: verdict(4))
    result = play(Case("q", "What is 2+2?", "4"), lambda question: "4", [GoalCompletion(use_cache=False)], model)
    assert by_name(result)["goal_completion"].passed is True
    assert "What is 2+2?" in str(server.requests[0].body["messages"])


# --- final_state -------------------------------------------------------------------------------

SHOP = Case(
    "shop",
    {"turns": ["Add two apples.", "And a pear."], "initial_state": {"cart": [], "user": "ana"}},
    {"turns": [{}, {}], "final_state": {"cart": ["apple", "apple", "pear"], "user": "ana", "paid": False}},
)


def shopper(extra: bool) -> Callable[[str, Session], str]:
    def shop(message: str, session: Session) -> str:
        if session.turn == 0:
            session.state["cart"] = ["apple", "apple"]
        else:
            session.state["cart"].append("pear" if not extra else "plum")
            if extra:
                session.state["coupon"] = "X1"
            else:
                session.state["paid"] = False
        return "ok"

    return shop


def test_final_state_passes_when_every_key_is_equal() -> None:
    result = play(SHOP, shopper(False), [FinalState()])
    (score,) = [s for s in result.scores if s.name == "final_state"]  # named once: not added again
    assert score.passed is True and score.metadata == {"diff": [], "keys": 3, "matching": 3}
    assert result.status is CaseStatus.PASSED


def test_final_state_fails_with_a_per_key_diff() -> None:
    result = play(SHOP, shopper(True), [])  # expected final state: scored without being named
    score = by_name(result)["final_state"]
    assert score.passed is False
    assert score.metadata["diff"] == [
        {
            "key": "cart",
            "change": "changed",
            "expected": ["apple", "apple", "pear"],
            "actual": ["apple", "apple", "plum"],
        },
        {"key": "coupon", "change": "unexpected", "actual": "X1"},
        {"key": "paid", "change": "missing", "expected": False},
    ]
    assert score.metadata["keys"] == 4 and score.metadata["matching"] == 1
    assert "'cart' changed" in (score.explanation or "")
    assert result.status is CaseStatus.FAILED


def test_state_diff_compares_json_values() -> None:
    assert state_diff({"n": 1, "o": {"a": 1, "b": 2}}, {"n": 1.0, "o": {"b": 2, "a": 1}}) == []


def test_a_conversation_with_nothing_to_check_is_unscored_not_passed() -> None:
    case = Case("bare", {"turns": ["hi", "bye"]})
    result = play(case, talker, [FinalState()])
    assert result.scores == [] and result.status is CaseStatus.UNSCORED


# --- the rule lens and the registry ------------------------------------------------------------


def test_the_rule_lens_is_applied_once_over_the_whole_conversation(judge: Any) -> None:
    from evalcore.runtime.agent import Agent

    rule = "Always greet the user by name."
    rule_judge, judge_model = judge(lambda prompt: completion_body('{"verdict": "honoured", "reason": "greets Ana"}'))
    with StandInLLM() as server:
        for answer in ANSWERS:
            server.reply(answer)
        agent = Agent(OpenAIChatModel("stand-in-model", base_url=server.base_url, max_retries=0), [], instructions=rule)
        scorer = RuleAdherence(rules=[{"id": "r1", "text": rule}], model=judge_model)
        result = play(TRIP, agent, [ExactMatch(), scorer])
    score = by_name(result)["rule_adherence"]
    assert len(rule_judge.requests) == 1  # one judgement of the conversation, not one per turn
    asked = str(rule_judge.requests[0].body["messages"])
    assert all(json.dumps(answer)[1:-1] in asked for answer in ANSWERS)  # every turn's answer is judged
    assert "turns" not in score.metadata and score.metadata["n_requests"] == 3  # the rule reached all 3 calls
    assert score.passed is True and [r["outcome"] for r in score.metadata["rules"]] == ["honoured"]
    assert result.status is CaseStatus.PASSED


@pytest.mark.parametrize("name", ["final_state", "conversation_rubric", "goal_completion", "knowledge_retention"])
def test_the_conversation_scorers_are_registered_and_round_trip(name: str) -> None:
    scorer = scorer_from_spec(name)
    assert scorer.name == name and getattr(scorer, "scope", None) == "conversation"
    spec = scorer.spec()
    again = scorer_from_spec(json.loads(json.dumps({"name": spec.name, "args": spec.args, "version": spec.version})))
    assert type(again) is type(scorer) and again.spec() == spec
