"""The run's time limits bound the user simulator too (issue 25 follow-up): a simulator endpoint
that never answers ends the case as errored at that turn, the reason naming the simulator, the
turns played before it kept."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from evalcore.conversations import Session
from evalcore.runner import run_eval
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.simulator import LLMUser
from evalcore.store import NullSink
from evalcore.types import Case, CaseResult
from tests.support.stand_in_llm import StandInLLM, completion_body

KEY_ENV = "EVALSITE_TEST_SIM_TIMEOUT_KEY"

CASE = Case(
    id="booking",
    input={"scenario": {"opening": "Book me a table", "goal": "a table for two at 8pm Friday", "max_turns": 6}},
)


class HangsFromCall:
    """The stand-in user: answers its first ``answered`` calls, then never answers (until the
    test ends and opens the gate, so the server's thread can stop)."""

    def __init__(self, answered: int) -> None:
        self.answered = answered
        self.calls = 0
        self.gate = threading.Event()
        self.hanging = threading.Event()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        if self.calls > self.answered:
            self.hanging.set()
            self.gate.wait(120)
        return completion_body(f"user message {self.calls}", usage=(10, 5))


@pytest.fixture
def hanging(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HangsFromCall, StandInLLM]]:
    monkeypatch.setenv(KEY_ENV, "sk-standin-sim")
    responder = HangsFromCall(answered=1)
    llm = StandInLLM(responder=responder).start()
    try:
        yield responder, llm
    finally:
        responder.gate.set()
        llm.stop()


def user_of(llm: StandInLLM) -> LLMUser:
    """No limit of the simulator's own: only the run's limits can end its call."""
    model = OpenAIChatModel("user-model", base_url=llm.base_url, api_key_env=KEY_ENV, timeout_s=120.0, max_retries=0)
    return LLMUser(model, cache=None, seed=3, retries=0, timeout_s=None)


def agent(message: str, session: Session) -> str:
    return f"answer {session.turn + 1}"


class Collect(NullSink):
    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)


def play(user: LLMUser, **limits: Any) -> CaseResult:
    sink = Collect()
    asyncio.run(run_eval([CASE], agent, [], sink=sink, user_simulator=user, **limits))
    (result,) = sink.results
    return result


def test_a_hanging_simulator_ends_the_case_at_the_turn_timeout_naming_the_simulator(hanging: Any) -> None:
    responder, llm = hanging
    result = play(user_of(llm), timeout_s=0.5)
    assert responder.hanging.is_set()  # the third user message was asked for and never came
    error = result.run.error
    assert error is not None and error.type == "Timeout"
    assert error.message == "turn 3: the user simulator (user-model) exceeded the 0.5 s turn timeout"
    assert result.run.metadata["errored_turn"] == 3
    turns = result.run.metadata["turns"]
    assert [t["user"] for t in turns] == ["Book me a table", "user message 1"]  # earlier turns kept
    assert all("error" not in t for t in turns)
    assert result.run.output is None and result.scores == []  # errored, never a pass


def test_a_hanging_simulator_ends_the_case_at_the_conversation_timeout(hanging: Any) -> None:
    _, llm = hanging
    result = play(user_of(llm), timeout_s=60.0, conversation_timeout_s=0.5)
    error = result.run.error
    assert error is not None and error.type == "Timeout"
    assert error.message == (
        "turn 3: the conversation exceeded the 0.5 s conversation timeout while the user simulator "
        "(user-model) was writing the user's message"
    )
    assert len(result.run.metadata["turns"]) == 2


def test_a_repeat_waiting_on_a_timed_out_call_asks_again(hanging: Any) -> None:
    """Two repeats ask the same first reply at once; the call they share hangs and the turn limit
    cancels it: both cases end errored at turn 2 by their own timeout, neither is cancelled
    outright (the run goes on and stores both)."""
    responder, llm = hanging
    responder.answered = 0
    sink = Collect()
    asyncio.run(run_eval([CASE], agent, [], sink=sink, user_simulator=user_of(llm), timeout_s=0.5, repeat=2))
    assert sorted(r.run.repeat_index for r in sink.results) == [0, 1]
    for result in sink.results:
        assert result.run.error is not None and result.run.error.type == "Timeout"
        assert result.run.error.message.startswith("turn 2: the user simulator (user-model)")
