"""The rubric judge and the rule judge ask through one loop (evalcore.judge.ask), so they retry the
same way: asserted on the requests a local stand-in OpenAI-compatible server received and on the
trace each judge left, for the same scripted endpoint behaviour."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from evalcore.judge import AXES, RubricJudge
from evalcore.rules.judging import RuleJudge, render
from evalcore.rules.model import Rule
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.scorers.base import ScoreContext
from evalcore.tracing import Tracer
from evalcore.types import Case, RunRecord
from tests.support.stand_in_llm import StandInLLM

RULE = Rule("R1", "Always answer in English.")
RUBRIC_ANSWER = json.dumps({axis: {"score": 5, "reason": "fine"} for axis in AXES})
RULE_ANSWER = json.dumps({"verdict": "honoured", "reason": "it is in English"})


@dataclass
class Seen:
    """One judge's question, as the endpoint and the trace saw it."""

    answered: bool
    kind: str | None
    detail: str | None
    attempts: int
    formats: list[str | None]
    """The ``response_format`` type of every request the endpoint received, in order."""
    span_attempts: list[int]
    error_attempts: list[int]
    """The attempt of every unreadable-answer error event."""


def _seen(llm: StandInLLM, tracer: Tracer, *, answered: bool, kind: Any, detail: Any, attempts: int) -> Seen:
    formats = [(r.body.get("response_format") or {}).get("type") for r in llm.chat_requests]
    begins = [e for e in tracer.events if e.type == "span_begin" and e.payload.get("role") == "judge"]
    errors = [e for e in tracer.events if e.type == "error"]
    return Seen(
        answered,
        kind,
        detail,
        attempts,
        formats,
        [e.payload["attempt"] for e in begins],
        [e.payload["attempt"] for e in errors],
    )


async def ask_rubric(llm: StandInLLM, **options: Any) -> Seen:
    tracer = Tracer("t", "r")
    model = OpenAIChatModel("stand-in-model", base_url=llm.base_url, max_retries=0)
    judge = RubricJudge(model=model, retry_backoff_s=0.001, use_cache=False, **options)
    case = Case(id="c1", input="Say hello", expected="Hello")
    run = RunRecord(case_id="c1", run_id="r:c1", trace_id="r:c1", output="Hello")
    scores = await judge.score(ScoreContext(case=case, output="Hello", run=run, tracer=tracer))
    meta = scores[0].metadata
    answered = scores[0].error is None
    return _seen(
        llm,
        tracer,
        answered=answered,
        kind=None if answered else meta["kind"],
        detail=None if answered else scores[0].error,
        attempts=meta["attempts"],
    )


async def ask_rule(llm: StandInLLM, **options: Any) -> Seen:
    tracer = Tracer("t", "r")
    model = OpenAIChatModel("stand-in-model", base_url=llm.base_url, max_retries=0)
    judge = RuleJudge(model, retry_backoff_s=0.001, tracer=tracer, **options)
    got = await judge.judge(RULE, render(RULE, input="Say hello", output="Hello", tool_calls=[]))
    return _seen(
        llm, tracer, answered=got.verdict is not None, kind=got.error_kind, detail=got.error, attempts=got.attempts
    )


JUDGES: dict[str, tuple[Callable[..., Awaitable[Seen]], str]] = {
    "rubric": (ask_rubric, RUBRIC_ANSWER),
    "rule": (ask_rule, RULE_ANSWER),
}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stand-in")


async def both(script: Callable[[StandInLLM, str], None], **options: Any) -> dict[str, Seen]:
    """Each judge's view of the same scripted endpoint (a fresh stand-in each)."""
    seen: dict[str, Seen] = {}
    for name, (ask, good) in JUDGES.items():
        with StandInLLM() as llm:
            script(llm, good)
            seen[name] = await ask(llm, **options)
            assert llm.pending == 0, f"{name}: the script was not used up"
    return seen


async def test_both_judges_retry_an_unreadable_answer_and_a_model_error_then_read_the_answer() -> None:
    def script(llm: StandInLLM, good: str) -> None:
        llm.reply("I would rather not say.")  # unreadable: retried at once
        llm.error(400, "the stand-in refuses this one")  # a model error (not a format refusal): backoff, retry
        llm.reply(good)

    seen = await both(script, retries=2)
    for name, got in seen.items():
        assert got.answered and got.kind is None and got.detail is None, name
        assert got.attempts == 3, name
        assert got.formats == ["json_schema"] * 3, name
        assert got.span_attempts == [0, 1, 2], name
        assert got.error_attempts == [0], name
    assert seen["rubric"] == seen["rule"]


async def test_both_judges_give_up_after_their_retries_with_the_last_error() -> None:
    def script(llm: StandInLLM, good: str) -> None:
        llm.reply("not an answer")
        llm.error(400, "still refusing")
        llm.error(400, "refusing for good")

    seen = await both(script, retries=2)
    for name, got in seen.items():
        assert not got.answered and got.kind == "model_error", name
        assert got.attempts == 3 and len(got.formats) == 3, name
        assert "refusing for good" in str(got.detail), name
        assert got.span_attempts == [0, 1, 2] and got.error_attempts == [0], name


async def test_both_judges_step_down_the_format_ladder_within_one_attempt() -> None:
    def script(llm: StandInLLM, good: str) -> None:
        llm.error(400, "response_format json_schema is not supported")
        llm.reply(good)

    seen = await both(script, retries=0)
    for name, got in seen.items():
        assert got.answered and got.attempts == 1, name
        assert got.formats == ["json_schema", "json_object"], name
        assert got.span_attempts == [0, 0] and got.error_attempts == [], name
    assert seen["rubric"] == seen["rule"]


async def test_both_judges_count_a_timeout_as_a_failed_attempt_and_retry_it() -> None:
    def script(llm: StandInLLM, good: str) -> None:
        llm.slow(5.0)  # past the judge's own timeout
        llm.reply(good)

    seen = await both(script, retries=1, timeout_s=0.2)
    for name, got in seen.items():
        assert got.answered and got.attempts == 2, name
        assert got.span_attempts == [0, 1] and got.error_attempts == [], name
    assert seen["rubric"] == seen["rule"]
