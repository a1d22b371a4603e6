"""Conversation cases (evalcore.conversations): read from JSON Lines and ADK files, played turn by
turn on one session, each turn scored against its own expectation (repro bh-43)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evalcore.conversations import Session, conversation_of
from evalcore.loaders import load_cases
from evalcore.loaders.errors import CaseBankError
from evalcore.runner import rescore, run_eval
from evalcore.runtime.agent import Agent
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.runtime.tools import tool
from evalcore.store import NullSink
from evalcore.targets import RunContext
from evalcore.types import Case, CaseResult, CaseStatus
from tests.support.stand_in_llm import StandInLLM

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BH43 = FIXTURES / "repros" / "bh-43-turns.evalset.json"


def _targets() -> Any:
    spec = importlib.util.spec_from_file_location("bh43_targets", FIXTURES / "repros" / "bh-43-agents" / "targets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Collect(NullSink):
    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)


def play(cases: list[Case], target: Any, scorers: list[Any], **options: Any) -> list[CaseResult]:
    sink = Collect()
    asyncio.run(run_eval(cases, target, scorers, sink=sink, **options))
    return sink.results


def turn_verdicts(result: CaseResult, name: str = "tool_calls") -> list[bool | None]:
    score = next(s for s in result.scores if s.name == name)
    return [None if t is None else t["passed"] for t in score.metadata["turns"]]


# --- bh-43: a call made in the wrong turn -----------------------------------------------------


@pytest.mark.parametrize(
    ("target_id", "status", "turns"),
    [
        ("late-caller", CaseStatus.FAILED, [False, False]),
        ("bh3-turns", CaseStatus.FAILED, [False, False]),
        ("on-time", CaseStatus.PASSED, [True, True]),
        ("bh3-turns-ok", CaseStatus.PASSED, [True, True]),
    ],
)
def test_bh43_a_call_in_the_wrong_turn_fails_both_turns(target_id: str, status: CaseStatus, turns: list) -> None:
    cases = load_cases(BH43).cases
    assert conversation_of(cases[0]) is not None
    spec = next(v for v in vars(_targets()).values() if getattr(v, "id", None) == target_id)
    (result,) = play(cases, spec.target, spec.scorers)
    assert result.status is status
    assert turn_verdicts(result) == turns
    verdict = result.scores[0]
    if status is CaseStatus.FAILED:
        assert verdict.explanation.startswith("turn 1 fails: expected call #1 'set_device' was not made")
        assert verdict.value == 0.0
    # the transcript is kept turn by turn
    assert [t["turn"] for t in result.run.metadata["turns"]] == [1, 2]
    assert len(result.run.output) == 2


def test_rescore_scores_the_stored_transcript_turn_by_turn() -> None:
    cases = load_cases(BH43).cases
    (result,) = play(cases, _targets().late_caller.target, ["tool_calls"])
    sink = Collect()
    asyncio.run(rescore([(cases[0], result.run)], ["tool_calls"], sink=sink))
    assert turn_verdicts(sink.results[0]) == [False, False]


# --- reading conversations: JSON Lines ----------------------------------------------------------


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


LAMP = {"name": "set_device", "arguments": {"room": "kitchen", "device": "lamp", "state": "off"}}


def test_a_jsonl_record_written_turn_by_turn_is_a_conversation_case(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {
                "id": "c1",
                "split": "dev",
                "turns": [
                    {"user": "Lamp off, please.", "tool_calls": [LAMP], "rubric": "Confirms briefly."},
                    {"user": "Thanks!", "final_response": "You're welcome."},
                ],
                "initial_state": {"lamp": "on"},
                "final_state": {"lamp": "off"},
            },
            {"id": "plain", "input": "2+2", "expected": "4", "split": "dev"},
        ],
    )
    conv_case, plain = load_cases(path).cases
    assert conv_case.input == {"turns": ["Lamp off, please.", "Thanks!"], "initial_state": {"lamp": "on"}}
    assert conv_case.expected == {
        "turns": [{"tool_calls": [LAMP], "rubric": "Confirms briefly."}, {"final_response": "You're welcome."}],
        "final_state": {"lamp": "off"},
    }
    conversation = conversation_of(conv_case)
    assert conversation is not None and [t.user for t in conversation.turns] == ["Lamp off, please.", "Thanks!"]
    assert conversation.turns[0].tool_calls == [LAMP] and conversation.turns[1].tool_calls is None
    assert conversation.initial_state == {"lamp": "on"} and conversation.final_state == {"lamp": "off"}
    # single-turn cases are exactly as they were
    assert (plain.input, plain.expected, conversation_of(plain)) == ("2+2", "4", None)


@pytest.mark.parametrize(
    ("bad", "field", "says"),
    [
        ({"turns": [{"user": "hi"}, {"final_response": "x"}]}, "turns[1].user", "user's message"),
        (
            {"turns": [{"user": "hi", "tool_calls": [{"name": "f", "arguments": [1]}]}]},
            "turns[0].tool_calls[0].arguments",
            "object",
        ),
        ({"turns": [{"user": "hi", "tool_calls": {"name": "f"}}]}, "turns[0].tool_calls", "list"),
        ({"turns": [{"user": "hi", "final_response": {"a": 1}}]}, "turns[0].final_response", "text"),
        ({"turns": [{"user": "hi", "expected": "x"}]}, "turns[0].expected", "unknown field 'expected'"),
        ({"turns": [{"user": "hi"}], "input": "x"}, "input", "not in input / expected"),
        ({"turns": []}, "turns", "non-empty"),
        ({"input": {"turns": ["a", "b"]}, "expected": [{}]}, "expected", "1 expected turn(s) for 2"),
        ({"input": {"turns": ["a", ""]}}, "input.turns[1]", "user's message"),
        ({"input": {"turns": ["a"]}, "expected": [{"final_answer": "x"}]}, "expected[0].final_answer", "unknown field"),
        ({"input": {"turns": ["a"], "initial_state": []}}, "input.initial_state", "object"),
    ],
)
def test_bad_conversations_are_refused_with_file_line_and_field(
    tmp_path: Path, bad: dict, field: str, says: str
) -> None:
    good = {"id": "ok", "turns": [{"user": "hello", "final_response": "hi"}]}
    path = write_jsonl(tmp_path / "bad.jsonl", [good, {"id": "bad", **bad}])
    with pytest.raises(CaseBankError) as caught:
        load_cases(path)  # nothing half-imported: the whole load is refused
    error = caught.value
    assert (error.line, error.field) == (2, field), str(error)
    assert says in error.reason
    assert str(error).startswith(f"{path}:2: field {field!r}: ")


# --- reading conversations: ADK, every shape ----------------------------------------------------


def _adk_content(text: str, role: str) -> dict:
    return {"role": role, "parts": [{"text": text}]}


ADK_SHAPES: dict[str, Any] = {
    "legacy_turns.test.json": [
        {
            "query": "Lamp off.",
            "expected_tool_use": [{"tool_name": "set_device", "tool_input": LAMP["arguments"]}],
            "reference": "Off.",
        },
        {"query": "Thanks.", "expected_tool_use": [], "reference": "Welcome."},
    ],
    "legacy_set.test.json": [
        {
            "name": "legacy_turns",
            "initial_session": {"state": {"lamp": "on"}},
            "data": [
                {
                    "query": "Lamp off.",
                    "expected_tool_use": [{"tool_name": "set_device", "tool_input": LAMP["arguments"]}],
                    "reference": "Off.",
                },
                {"query": "Thanks.", "expected_tool_use": [], "reference": "Welcome."},
            ],
        }
    ],
    "tool_uses.evalset.json": {
        "eval_set_id": "s",
        "eval_cases": [
            {
                "eval_id": "legacy_turns",
                "session_input": {"app_name": "home", "user_id": "u", "state": {"lamp": "on"}},
                "conversation": [
                    {
                        "invocation_id": "i1",
                        "user_content": _adk_content("Lamp off.", "user"),
                        "final_response": _adk_content("Off.", "model"),
                        "intermediate_data": {
                            "tool_uses": [{"id": "x", "name": "set_device", "args": LAMP["arguments"]}]
                        },
                    },
                    {
                        "invocation_id": "i2",
                        "user_content": _adk_content("Thanks.", "user"),
                        "final_response": _adk_content("Welcome.", "model"),
                        "intermediate_data": {"tool_uses": []},
                    },
                ],
            }
        ],
    },
    "events.evalset.json": {
        "evalSetId": "s",
        "evalCases": [
            {
                "evalId": "legacy_turns",
                "conversation": [
                    {
                        "userContent": _adk_content("Lamp off.", "user"),
                        "finalResponse": _adk_content("Off.", "model"),
                        "intermediateData": {
                            "invocationEvents": [
                                {
                                    "author": "agent",
                                    "content": {
                                        "parts": [{"functionCall": {"name": "set_device", "args": LAMP["arguments"]}}]
                                    },
                                }
                            ]
                        },
                    },
                    {
                        "userContent": _adk_content("Thanks.", "user"),
                        "finalResponse": _adk_content("Welcome.", "model"),
                    },
                ],
            }
        ],
    },
}


@pytest.mark.parametrize("name", sorted(ADK_SHAPES))
def test_every_adk_shape_gives_the_same_conversation_case(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(ADK_SHAPES[name]))
    (case,) = load_cases(path).cases
    conversation = conversation_of(case)
    assert conversation is not None
    assert [t.user for t in conversation.turns] == ["Lamp off.", "Thanks."]
    assert [t.tool_calls for t in conversation.turns] == [[LAMP], []]
    assert [t.final_response for t in conversation.turns] == ["Off.", "Welcome."]
    if name in ("legacy_set.test.json", "tool_uses.evalset.json"):
        assert conversation.initial_state == {"lamp": "on"}

    def agent(message: str, session: Session) -> dict:
        return {"final_response": "ok", "tool_calls": [LAMP] if session.turn == 1 else []}  # one turn late

    (result,) = play([case], agent, ["tool_calls"])
    assert turn_verdicts(result) == [False, False] and result.status is CaseStatus.FAILED


# --- playing a session --------------------------------------------------------------------------


def test_a_session_target_keeps_history_and_state_across_turns() -> None:
    case = Case(
        "s1",
        {"turns": ["My name is Ada.", "What is my name?"], "initial_state": {"visits": 0}},
        [{}, {"final_response": "Ada"}],
    )
    seen: list[tuple[int, list, dict]] = []

    def remembers(message: str, ctx: Any, session: Session) -> str:
        seen.append((session.turn, [dict(m) for m in session.history], dict(session.state)))
        assert ctx.session is session and session.case is case
        session.state["visits"] += 1
        if session.turn == 0:
            session.state["name"] = message.removeprefix("My name is ").rstrip(".")
            return "Nice to meet you."
        return session.state["name"]

    (result,) = play([case], remembers, ["exact_match"])
    assert result.status is CaseStatus.PASSED, result.scores
    assert seen == [
        (0, [], {"visits": 0}),
        (
            1,
            [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": "Nice to meet you."}],
            {"visits": 1, "name": "Ada"},
        ),
    ]
    assert result.run.metadata["session_state"] == {"visits": 2, "name": "Ada"}
    assert case.input["initial_state"] == {"visits": 0}  # the case itself is never changed
    # turn 1 states nothing: only turn 2 is scored, and the case passes on it
    assert turn_verdicts(result, "exact_match") == [None, True]


def test_an_expected_final_state_is_a_verdict() -> None:
    case = Case("s2", {"turns": ["on"]}, {"turns": [{}], "final_state": {"lamp": "on"}})

    def switch(message: str, session: Session) -> str:
        session.state["lamp"] = "off"
        return "done"

    (result,) = play([case], switch, [])
    assert result.status is CaseStatus.FAILED
    assert [(s.name, s.passed) for s in result.scores] == [("final_state", False)]


def test_each_turn_is_a_span_of_the_case_trace() -> None:
    cases = load_cases(BH43).cases
    events: list[Any] = []

    class Events(Collect):
        def on_event(self, event: Any) -> None:
            events.append(event)

    sink = Events()
    asyncio.run(run_eval(cases, _targets().on_time.target, ["tool_calls"], sink=sink))
    begins = [e for e in events if e.type == "span_begin"]
    turns = [e for e in begins if e.payload["kind"] == "turn"]
    assert [e.name for e in turns] == ["turn 1", "turn 2"]
    assert len({e.trace_id for e in events}) == 1
    # the target's own span sits under its turn
    node_spans = [e for e in begins if e.name == "on_time"]
    assert [e.payload["parent_span_id"] for e in node_spans] == [t.payload["span_id"] for t in turns]


def test_a_turn_that_raises_ends_the_case_errored_at_that_turn_earlier_turns_kept() -> None:
    case = Case("e1", {"turns": ["one", "two", "three"]}, [{"final_response": "ONE"}, {}, {}])

    def shaky(message: str, session: Session) -> str:
        if session.turn == 1:
            raise RuntimeError("lost the thread")
        return message.upper()

    (result,) = play([case], shaky, ["exact_match"])
    assert result.status is CaseStatus.ERRORED
    assert result.run.error is not None and result.run.error.message == "turn 2: lost the thread"
    played = result.run.metadata["turns"]
    assert [t["turn"] for t in played] == [1, 2] and played[0]["final_response"] == "ONE"
    assert played[1]["error"] == {"type": "RuntimeError", "message": "turn 2: lost the thread"}
    assert result.run.metadata["errored_turn"] == 2


def test_a_turn_timeout_and_a_conversation_timeout_error_the_case_at_that_turn() -> None:
    case = Case("t1", {"turns": ["fast", "slow"]})

    async def sleepy(message: str, session: Session) -> str:
        if message == "slow":
            await asyncio.sleep(30)
        return "ok"

    (result,) = play([case], sleepy, [], timeout_s=0.2)
    assert result.status is CaseStatus.ERRORED
    assert result.run.error.type == "Timeout"
    assert result.run.error.message == "turn 2: target exceeded the 0.2 s turn timeout"
    assert result.run.metadata["turns"][0]["final_response"] == "ok"

    (result,) = play([case], sleepy, [], timeout_s=60, conversation_timeout_s=0.3)
    assert result.run.error.message == "turn 2: the conversation exceeded the 0.3 s conversation timeout"


def test_a_single_call_target_that_returns_no_transcript_is_an_error_saying_what_is_needed() -> None:
    cases = load_cases(BH43).cases
    (result,) = play(cases, lambda text: "one answer for everything", ["tool_calls"])
    assert result.status is CaseStatus.ERRORED
    assert "needs a conversational target" in result.run.error.message


# --- the runtime's Agent on a conversation, against a local stand-in model endpoint -------------

KEY_ENV = "EVALSITE_TEST_STANDIN_KEY"


def test_the_agent_keeps_its_history_and_makes_each_turns_call_in_that_turn(monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setenv(KEY_ENV, "sk-standin-1")

    @tool
    def set_device(room: str, device: str, state: str, ctx: RunContext) -> str:
        """Switch a device.

        Args:
            room: The room.
            device: The device.
            state: on or off.
        """
        ctx.session.state[f"{room}/{device}"] = state
        return "ok"

    cases = load_cases(BH43).cases
    with StandInLLM() as server:
        server.reply(tool_calls=[{"id": "c1", "name": "set_device", "arguments": LAMP["arguments"]}])
        server.reply("The kitchen lamp is off.")
        heater = {"room": "hall", "device": "heater", "state": "on"}
        server.reply(tool_calls=[{"id": "c2", "name": "set_device", "arguments": heater}])
        server.reply("The hall heater is on.")
        model = OpenAIChatModel("stand-in-model", base_url=server.base_url, api_key_env=KEY_ENV, timeout_s=5.0)
        agent = Agent(model, [set_device], instructions="You run the house.")
        (result,) = play(cases, agent, ["tool_calls", "exact_match"], concurrency=1)
        requests = [r.body for r in server.chat_requests]

    assert result.status is CaseStatus.PASSED, [(s.name, s.explanation) for s in result.scores]
    assert turn_verdicts(result) == [True, True]
    assert turn_verdicts(result, "exact_match") == [True, True]
    assert [t["tool_calls"] for t in result.run.metadata["turns"]] == [
        [LAMP],
        [{"name": "set_device", "arguments": heater}],
    ]
    assert result.run.metadata["session_state"] == {"kitchen/lamp": "off", "hall/heater": "on"}
    assert result.run.tokens_in == 40  # four model calls, 10 prompt tokens each
    # turn 2's first request carries turn 1 whole (its call and the tool's answer) before the new message
    turn2 = requests[2]["messages"]
    assert [m["role"] for m in turn2] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert turn2[1]["content"] == "Switch off the lamp in the kitchen."
    assert turn2[-1]["content"] == "And switch on the heater in the hall."
    assert "tool_calls" not in result.run.metadata  # each turn's calls are the turn's, never the case's


# --- ADK's own evaluator as the oracle ----------------------------------------------------------

ORACLE = FIXTURES / "adk_oracle"


def _replaying(transcript: list[dict]) -> Any:
    def replay(text: Any) -> list[dict]:
        return transcript

    return replay


def _our_trajectory_scores() -> dict[str, dict[str, Any]]:
    (case,) = load_cases(BH43).cases
    transcripts = json.loads((ORACLE / "bh-43-transcripts.json").read_text())
    ours = {}
    for name, transcript in transcripts.items():
        (result,) = play([case], _replaying(transcript), ["tool_calls"])
        score = result.scores[0]
        ours[name] = {
            "per_invocation": [1.0 if t["passed"] else 0.0 for t in score.metadata["turns"]],
            "overall": score.value,
        }
    return ours


def test_per_turn_tool_calls_match_adks_tool_trajectory_avg_score() -> None:
    """Recorded from google-adk 2.13.0's TrajectoryEvaluator (tests/fixtures/adk_oracle/trajectory_oracle.py)."""
    recorded = json.loads((ORACLE / "bh-43-adk-scores.json").read_text())["results"]
    assert _our_trajectory_scores() == recorded


@pytest.mark.skipif(not os.environ.get("EVALSITE_ADK_PYTHON"), reason="EVALSITE_ADK_PYTHON: a Python with google-adk")
def test_per_turn_tool_calls_match_adk_live() -> None:
    """The same comparison against ADK itself, run in the Python EVALSITE_ADK_PYTHON names."""
    done = subprocess.run(
        [
            os.environ["EVALSITE_ADK_PYTHON"],
            str(ORACLE / "trajectory_oracle.py"),
            str(BH43),
            str(ORACLE / "bh-43-transcripts.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert _our_trajectory_scores() == json.loads(done.stdout)


def test_the_rubric_judge_grades_a_turn_with_its_rubric_and_only_the_turns_that_have_one_or_a_response() -> None:
    from evalcore.judge import AXES, RubricJudge
    from evalcore.runtime.models import ChatResponse
    from evalcore.scorers import ScorerServices

    prompts: list[str] = []

    class Judge:
        name = "fake-judge"

        async def complete(self, messages: list[dict[str, Any]], **options: Any) -> ChatResponse:
            text = "\n".join(str(m.get("content")) for m in messages)
            prompts.append(text)
            score = 1 if "Never mention prices." in text and "costs" in text else 5
            body = {axis: {"score": score, "reason": "r"} for axis in AXES}
            return ChatResponse(content=json.dumps(body), model=self.name, tokens_in=1, tokens_out=1)

    case = Case(
        "j1",
        {"turns": ["Hi", "Any news?", "How much is it?"]},
        [{"final_response": "Hello"}, {}, {"rubric": "Never mention prices."}],
    )

    def talker(message: str, session: Session) -> str:
        return ["Hello", "Nothing new.", "It costs 5 euros."][session.turn]

    (result,) = play([case], talker, [RubricJudge(use_cache=False)], services=ScorerServices(judge=Judge()))
    verdict = next(s for s in result.scores if s.name == "rubric_judge")
    assert [None if t is None else t["passed"] for t in verdict.metadata["turns"]] == [True, None, False]
    assert result.status is CaseStatus.FAILED
    assert len(prompts) == 2 and "Never mention prices." in prompts[1] and "Never mention prices." not in prompts[0]


def test_an_adk_final_session_state_is_the_expected_final_state_and_exports_back(tmp_path: Path) -> None:
    from evalcore.loaders.adk_export import adk_eval_set_chunks

    data = json.loads(json.dumps(ADK_SHAPES["tool_uses.evalset.json"]))
    data["eval_cases"][0]["final_session_state"] = {"lamp": "off"}
    path = tmp_path / "state.evalset.json"
    path.write_text(json.dumps(data))
    (case,) = load_cases(path).cases
    conversation = conversation_of(case)
    assert conversation is not None and conversation.final_state == {"lamp": "off"}
    assert conversation.initial_state == {"lamp": "on"}

    again = tmp_path / "again.evalset.json"
    again.write_bytes(b"".join(adk_eval_set_chunks([case], eval_set_id="s")))
    (back,) = load_cases(again).cases
    assert (back.input, back.expected) == (case.input, case.expected)


def test_a_turns_field_that_is_no_list_beside_an_input_stays_metadata(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", [{"id": "a", "input": "q", "turns": 3}])
    (case,) = load_cases(path).cases
    assert (case.input, case.metadata, conversation_of(case)) == ("q", {"turns": 3}, None)


def test_calls_a_turn_records_on_ctx_metadata_are_that_turns() -> None:
    cases = load_cases(BH43).cases
    heater = {"name": "set_device", "arguments": {"room": "hall", "device": "heater", "state": "on"}}

    def recorder(message: str, ctx: RunContext, session: Session) -> str:
        ctx.metadata["tool_calls"] = [LAMP] if session.turn == 0 else [heater]
        return "Done."

    (result,) = play(cases, recorder, ["tool_calls"])
    assert result.status is CaseStatus.PASSED, result.scores
    assert "tool_calls" not in result.run.metadata


def test_adk_per_invocation_rubrics_are_the_turns_rubrics_and_export_back(tmp_path: Path) -> None:
    from evalcore.loaders.adk_export import adk_eval_set_chunks

    data = json.loads(json.dumps(ADK_SHAPES["tool_uses.evalset.json"]))
    turn = data["eval_cases"][0]["conversation"][1]
    turn["rubrics"] = [
        {"rubric_id": "polite", "rubric_content": {"text_property": "Answers politely."}},
        {"rubric_id": "short", "rubric_content": {"text_property": "One sentence."}},
    ]
    del turn["final_response"], turn["intermediate_data"]
    path = tmp_path / "rubrics.evalset.json"
    path.write_text(json.dumps(data))
    (case,) = load_cases(path).cases
    conversation = conversation_of(case)
    assert conversation is not None
    assert [t.rubric for t in conversation.turns] == [None, "Answers politely.\nOne sentence."]
    again = tmp_path / "again.evalset.json"
    again.write_bytes(b"".join(adk_eval_set_chunks([case], eval_set_id="s")))
    (back,) = load_cases(again).cases
    assert (back.input, back.expected) == (case.input, case.expected)

    turn["rubrics"] = [{"rubric_id": "x", "rubric_content": {}}]
    path.write_text(json.dumps(data))
    with pytest.raises(CaseBankError) as caught:
        load_cases(path)
    assert caught.value.field == "eval_cases[0].conversation[1].rubrics[0]"


def test_a_whole_conversation_target_without_per_turn_expectations_is_scored_on_its_one_answer() -> None:
    """``{"turns": [...]}`` inputs with nothing stated per turn (the rules demo's cases) keep working
    with a target that plays the turns itself and answers once: its answer is the case's output
    and scorers read it whole, as before conversations were played turn by turn. A case that states
    per-turn expectations still needs a transcript or a conversational target."""
    whole = Case("w1", {"turns": ["hi", "and the price?"]})
    stated = Case("w2", {"turns": ["hi", "and the price?"]}, [{}, {"final_response": "EUR 20"}])

    def plays_the_turns_itself(conversation: dict) -> str:
        return "EUR 20" if len(conversation["turns"]) == 2 else "?"

    first, second = play([whole, stated], plays_the_turns_itself, ["contains:value=EUR"])
    assert first.status is CaseStatus.PASSED and first.run.output == "EUR 20", first.scores
    assert second.status is CaseStatus.ERRORED and "needs a conversational target" in second.run.error.message
