"""Simulated users (evalcore.simulator): scenario cases played by a scripted or an LLM-backed user,
seeded and cached so two variants meet the same user until their answers differ (issue 25)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalcore.conversations import ConversationError, Session, parse_scenario, played_scenario
from evalcore.judge.cache import SqliteJudgeCache
from evalcore.loaders import load_cases
from evalcore.loaders.errors import CaseBankError
from evalcore.runner import run_eval
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.simulator import STOP_SIGNAL, LLMUser, conversation_variance, first_divergence
from evalcore.store import NullSink
from evalcore.types import Case, CaseResult, TargetOutput
from tests.support.stand_in_llm import StandInLLM, completion_body

KEY_ENV = "EVALSITE_TEST_SIM_KEY"


class Collect(NullSink):
    def __init__(self) -> None:
        self.results: list[CaseResult] = []
        self.events: list[Any] = []

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)

    def on_event(self, event: Any) -> None:
        self.events.append(event)


def play(cases: list[Case], target: Any, **options: Any) -> tuple[list[CaseResult], Collect]:
    sink = Collect()
    asyncio.run(run_eval(cases, target, [], sink=sink, **options))
    return sorted(sink.results, key=lambda r: (r.case.id, r.run.repeat_index)), sink


def shop_agent(diverge_at: int | None) -> Any:
    """A conversational target: answers 'answer N', or 'other N' from turn ``diverge_at`` (1-based)
    on; each answer reports 7 + 3 tokens, the agent's own."""

    def agent(message: str, session: Session) -> TargetOutput:
        number = session.turn + 1
        word = "other" if diverge_at is not None and number >= diverge_at else "answer"
        return TargetOutput(f"{word} {number} to {message}", tokens_in=7, tokens_out=3, model="shop-agent")

    return agent


SCRIPTED = Case(
    id="scripted-5",
    input={
        "scenario": {
            "opening": "I want a refund",
            "persona": "a polite customer",
            "script": ["order 42", "it arrived broken", "yes, refund to my card", "thanks", "one more"],
            "max_turns": 5,
        }
    },
)


def users(result: CaseResult) -> list[str]:
    return [turn["user"] for turn in result.run.metadata["turns"]]


# --- scripted user -----------------------------------------------------------------------------


def test_a_scripted_user_drives_five_turns_and_the_divergence_turn_is_found() -> None:
    [a], _ = play([SCRIPTED], shop_agent(None), variant="A")
    [b], _ = play([SCRIPTED], shop_agent(3), variant="B")
    assert users(a) == ["I want a refund", "order 42", "it arrived broken", "yes, refund to my card", "thanks"]
    assert users(b) == users(a)  # a scripted user says the same whatever the agent answers
    assert a.run.output == [
        {"final_response": f"answer {n} to {u}", "tool_calls": []} for n, u in enumerate(users(a), 1)
    ]
    assert first_divergence(a.run.metadata["turns"], b.run.metadata["turns"]) == 3  # 1-based, as "turn"
    assert first_divergence(a.run.metadata["turns"], a.run.metadata["turns"]) is None
    simulator = a.run.metadata["simulator"]
    assert simulator["kind"] == "scripted" and simulator["calls"] == 0
    assert simulator["stopped"] == {"reason": "max_turns", "turn": 5}
    assert [t.get("user_from") for t in a.run.metadata["turns"]] == ["opening"] + ["scripted"] * 4


def test_a_scripted_user_stops_when_the_script_ends_or_the_stop_phrase_matches() -> None:
    short = Case(id="short", input={"scenario": {"opening": "hi", "script": ["bye now"], "max_turns": 9}})
    [result], _ = play([short], shop_agent(None))
    assert users(result) == ["hi", "bye now"]
    assert result.run.metadata["simulator"]["stopped"] == {"reason": "script_ended", "turn": 2}

    said = Case(
        id="said", input={"scenario": {"opening": "hi", "script": ["more", "thanks, goodbye"], "stop": "goodbye"}}
    )
    [result], _ = play([said], shop_agent(None))
    assert users(result) == ["hi", "more"]  # the closing message is recorded, not sent to the agent
    assert result.run.metadata["simulator"]["stopped"] == {
        "reason": "user_matched_stop",
        "turn": 2,
        "message": "thanks, goodbye",
    }

    answered = Case(id="answered", input={"scenario": {"opening": "hi", "script": ["a", "b"], "stop": r"ANSWER 2\b"}})
    [result], _ = play([answered], shop_agent(None))
    assert users(result) == ["hi", "a"]
    assert result.run.metadata["simulator"]["stopped"] == {"reason": "agent_matched_stop", "turn": 2}


def test_first_divergence_on_lengths_tool_calls_and_user_messages() -> None:
    base: list[dict[str, Any]] = [
        {"user": "a", "final_response": "x", "tool_calls": []},
        {"user": "b", "final_response": "y"},
    ]
    assert first_divergence(base, base[:1]) == 2
    assert first_divergence(base, [base[0], {**base[1], "tool_calls": [{"name": "t", "arguments": {}}]}]) == 2
    assert first_divergence(base, [{**base[0], "user": "A"}, base[1]]) == 1
    assert first_divergence(base, [base[0], {**base[1], "error": {"type": "Timeout"}}]) == 2
    assert first_divergence([], None) is None and first_divergence(base, None) == 1


# --- LLM-backed user ---------------------------------------------------------------------------


class ScriptedUserServer:
    """A stand-in endpoint playing the user: its reply depends only on the last agent answer it is
    shown (so the same conversation gets the same reply); counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        agent_turns = [m for m in body["messages"] if m["role"] == "user"]
        if len(agent_turns) >= 5:
            return completion_body(STOP_SIGNAL, usage=(100, 2))
        return completion_body(f"follow-up {len(agent_turns)} after '{agent_turns[-1]['content']}'", usage=(100, 20))


LLM_CASE = Case(
    id="llm-5",
    input={
        "scenario": {
            "starting_prompt": "Book me a table",
            "conversation_plan": "A table for two at 8pm on Friday; confirm once booked.",
            "user_persona": {"id": "brief", "description": "terse", "behaviors": [{"description": "short replies"}]},
            "max_turns": 6,
        },
        "initial_state": {"bookings": 0},
    },
)


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv(KEY_ENV, "sk-standin-sim")
    server = ScriptedUserServer()
    with StandInLLM(responder=server) as llm:
        yield server, llm


def llm_user(llm: StandInLLM, cache: SqliteJudgeCache, seed: int = 7) -> LLMUser:
    model = OpenAIChatModel("user-model", base_url=llm.base_url, api_key_env=KEY_ENV, timeout_s=5.0, max_retries=0)
    return LLMUser(model, cache=cache, seed=seed)


def test_a_seeded_llm_user_is_cached_so_variant_b_meets_the_same_user_until_divergence(
    endpoint: Any, tmp_path: Path
) -> None:
    server, llm = endpoint
    cache = SqliteJudgeCache(tmp_path / "cache.sqlite3")
    [a], sink = play([LLM_CASE], shop_agent(None), variant="A", user_simulator=llm_user(llm, cache))
    # 5 turns played; the 5th reply was the stop signal: 5 simulator calls, 0 from the cache
    assert len(a.run.metadata["turns"]) == 5 and server.calls == 5
    assert a.run.metadata["simulator"]["stopped"] == {"reason": "stop_signal", "turn": 5}
    assert users(a)[0] == "Book me a table" and users(a)[1] == "follow-up 1 after 'answer 1 to Book me a table'"
    # the endpoint got temperature 0 and the seed, and the persona and goal in the prompt
    sent = llm.requests[0].body
    assert sent["temperature"] == 0 and sent["seed"] == 7 and sent["model"] == "user-model"
    assert (
        "terse\n- short replies" in sent["messages"][0]["content"] and "8pm on Friday" in sent["messages"][0]["content"]
    )

    # the simulator's tokens are its own, never the agent's
    assert (a.run.tokens_in, a.run.tokens_out) == (5 * 7, 5 * 3)
    usage = a.run.metadata["simulator"]
    assert (usage["calls"], usage["cached"], usage["tokens_in"], usage["tokens_out"]) == (5, 0, 500, 82)
    assert usage["kind"] == "llm" and usage["model"] == "user-model"
    spans = [e for e in sink.events if e.type == "span_end" and e.payload.get("kind") == "user_simulator"]
    assert [s.payload["tokens_in"] for s in spans] == [100] * 5

    # the same agent again: every user turn from the cache, no call
    [again], _ = play([LLM_CASE], shop_agent(None), variant="A", user_simulator=llm_user(llm, cache))
    assert server.calls == 5 and users(again) == users(a)
    assert again.run.metadata["simulator"]["cached"] == 5 and again.run.metadata["simulator"]["tokens_in"] == 0
    assert first_divergence(a.run.metadata["turns"], again.run.metadata["turns"]) is None

    # variant B answers the same for two turns, then differently: same user turns up to the divergence
    [b], _ = play([LLM_CASE], shop_agent(3), variant="B", user_simulator=llm_user(llm, cache))
    divergence = first_divergence(a.run.metadata["turns"], b.run.metadata["turns"])
    assert divergence == 3  # B's third answer differs
    assert users(b)[:divergence] == users(a)[:divergence]  # the same user up to and at the divergence
    assert users(b)[divergence] != users(a)[divergence]  # then a user reacting to B's own answer
    # B's replies after turns 1 and 2 came from the cache; after turns 3, 4 and 5 they were new calls
    assert b.run.metadata["simulator"]["cached"] == 2 and b.run.metadata["simulator"]["calls"] == 3
    assert server.calls == 8


def test_another_seed_is_another_user(endpoint: Any, tmp_path: Path) -> None:
    server, llm = endpoint
    cache = SqliteJudgeCache(tmp_path / "cache.sqlite3")
    play([LLM_CASE], shop_agent(None), user_simulator=llm_user(llm, cache, seed=1))
    play([LLM_CASE], shop_agent(None), user_simulator=llm_user(llm, cache, seed=2))
    assert server.calls == 10  # the seed is part of the cache key


def test_repeats_report_how_many_distinct_conversations_the_same_agent_met(endpoint: Any, tmp_path: Path) -> None:
    server, llm = endpoint
    cache = SqliteJudgeCache(tmp_path / "cache.sqlite3")
    flaky_answers = iter(range(1000))

    def flaky(message: str, session: Session) -> str:  # a different answer on every call
        return f"answer {next(flaky_answers)}"

    cases = [LLM_CASE, SCRIPTED]
    steady, _ = play(cases, shop_agent(None), repeat=3, concurrency=1, user_simulator=llm_user(llm, cache))
    variance = conversation_variance((r.case.id, r.run.metadata) for r in steady)
    assert variance.per_case == {"llm-5": {"repeats": 3, "distinct": 1}, "scripted-5": {"repeats": 3, "distinct": 1}}
    assert (variance.varying, variance.cases) == (0, 2)
    assert server.calls == 5  # repeats 2 and 3 met the cached user

    varied, _ = play(cases, flaky, repeat=3, concurrency=1, user_simulator=llm_user(llm, cache))
    variance = conversation_variance((r.case.id, r.run.metadata) for r in varied)
    assert (variance.varying, variance.cases) == (2, 2)
    assert variance.as_json()["coverage"] == "n=2/2"
    low, high = variance.interval or (None, None)
    assert low is not None and high == 1.0 and 0.0 < low < 0.5  # Wilson at n=2: wide
    assert variance.summary().startswith("simulated users: 2/2 cases met a different conversation")


def test_a_scenario_without_a_script_and_no_llm_user_is_errored_never_passed() -> None:
    case = Case(id="nosim", input={"scenario": {"opening": "hi", "goal": "get help"}})
    [result], _ = play([case], shop_agent(None))
    assert result.run.error is not None and result.run.error.type == "SimulatorError"
    assert result.run.output is None


def test_a_failing_simulator_errors_the_case_at_its_turn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-standin-sim")
    with StandInLLM() as llm:  # an empty script: every call is a 400
        user = llm_user(llm, SqliteJudgeCache(tmp_path / "c.sqlite3"))
        user.retries = 0
        [result], _ = play([LLM_CASE], shop_agent(None), user_simulator=user)
    assert result.run.error is not None and result.run.error.type == "SimulatorError"
    assert result.run.error.message.startswith("turn 2: the user simulator (user-model) failed")
    assert result.run.metadata["errored_turn"] == 2 and len(result.run.metadata["turns"]) == 1


# --- the case shape --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "path", "words"),
    [
        ({"persona": "x", "script": ["a"]}, "input.scenario.opening", "opening message"),
        ({"opening": "hi", "script": ["a", 3]}, "input.scenario.script[1]", "non-empty text"),
        ({"opening": "hi", "script": ["a"], "max_turns": 0}, "input.scenario.max_turns", "from 1 to 100"),
        ({"opening": "hi", "script": ["a"], "stop": "(unclosed"}, "input.scenario.stop", "not a regular expression"),
        ({"opening": "hi", "script": ["a"], "mood": "x"}, "input.scenario.mood", "unknown field 'mood'"),
        ({"opening": "hi", "starting_prompt": "hey", "script": ["a"]}, "input.scenario.starting_prompt", "twice"),
        ({"opening": "hi"}, "input.scenario", "needs a 'script'"),
        ({"opening": "hi", "user_persona": {"id": "p"}}, "input.scenario.persona", "'description'"),
    ],
)
def test_bad_scenarios_are_refused_naming_the_json_path(scenario: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(ConversationError) as caught:
        parse_scenario({"scenario": scenario})
    assert caught.value.field == path and words in caught.value.reason


def test_scenarios_load_from_json_lines_and_a_bad_one_names_file_line_and_field(tmp_path: Path) -> None:
    bank = tmp_path / "scenarios.jsonl"
    records = [
        {"id": "s1", "scenario": {"opening": "hi", "script": ["more"]}, "initial_state": {"n": 1}},
        {"id": "s2", "conversation_scenario": {"starting_prompt": "hey", "conversation_plan": "get a refund"}},
        {"id": "s3", "input": {"scenario": {"opening": "yo", "goal": "chat"}}},
    ]
    bank.write_text("".join(json.dumps(r) + "\n" for r in records))
    cases = load_cases(bank).cases
    assert [c.input for c in cases] == [
        {"scenario": {"opening": "hi", "script": ["more"]}, "initial_state": {"n": 1}},
        {"scenario": {"starting_prompt": "hey", "conversation_plan": "get a refund"}},
        {"scenario": {"opening": "yo", "goal": "chat"}},
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(records[0])
        + "\n"
        + json.dumps({"id": "s9", "scenario": {"opening": "hi", "max_turns": "5", "goal": "g"}})
        + "\n"
    )
    with pytest.raises(CaseBankError) as caught:
        load_cases(bad)
    message = str(caught.value)
    assert message.endswith("bad.jsonl:2: field 'scenario.max_turns': 'max_turns' must be a whole number from 1 to 100")


def test_a_simulator_that_raises_errors_the_case_and_the_run_goes_on() -> None:
    class Broken:
        kind = "custom"

        async def reply(self, scenario: Any, turns: Any, *, tracer: Any) -> Any:
            raise KeyError("no such persona")

    case = Case(id="broken", input={"scenario": {"opening": "hi", "goal": "help"}})
    [result], _ = play([case], shop_agent(None), user_simulator=Broken())
    assert result.run.error is not None and result.run.error.type == "SimulatorError"
    assert result.run.error.message == "turn 2: the user simulator failed: KeyError('no such persona')"
    assert result.run.output is None and len(result.run.metadata["turns"]) == 1


def test_a_played_scenario_reads_as_the_conversation_its_run_played() -> None:
    [result], _ = play([SCRIPTED], shop_agent(None))
    conversation = played_scenario(SCRIPTED, result.run.metadata)
    assert conversation is not None
    assert [turn.user for turn in conversation.turns] == users(result)
    assert not conversation.states_expectations
    assert played_scenario(Case(id="x", input="hi"), {}) is None
