"""The ``rubric_judge`` scorer against a fake judge model: verdicts, retries, errors, samples, tracing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from evalcore.jsonvalue import MISSING
from evalcore.judge import (
    AXES,
    RubricJudge,
    count_unstable,
    format_n,
    judge_usage,
    parse_judge_answer,
)
from evalcore.runner import run_eval
from evalcore.runtime.models import ChatResponse, ModelError
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers import ScoreContext, ScorerServices
from evalcore.serial import to_record
from evalcore.tracing import SPAN_BEGIN, SPAN_END, Tracer
from evalcore.types import Case, CaseResult, CaseStatus, RunRecord, Score

Answer = str | ChatResponse | BaseException


def answer(pass_: bool | None = None, **scores: int) -> str:
    """A judge answer in the rubric prompts' shape; axes default to 5."""
    body: dict[str, Any] = {axis: {"score": scores.get(axis, 5), "reason": f"{axis} reason"} for axis in AXES}
    if pass_ is not None:
        body["pass"] = pass_
    return json.dumps(body)


class FakeJudge:
    """A ChatModel that answers from a script (a list, consumed in order) or a function of the messages.

    Records every call's keyword arguments. Each text answer reports 100 prompt / 20 completion tokens.
    """

    def __init__(
        self, script: list[Answer] | Callable[[list[dict[str, Any]], dict[str, Any]], Answer], name: str = "fake-judge"
    ):
        self.name = name
        self._script = script
        self.calls: list[dict[str, Any]] = []

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        kwargs = {
            "response_format": response_format,
            "temperature": temperature,
            "seed": seed,
            "max_tokens": max_tokens,
        }
        self.calls.append({"messages": messages, **kwargs})
        if callable(self._script):
            item = self._script(messages, kwargs)
        else:
            item = self._script.pop(0)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, ChatResponse):
            return item
        return ChatResponse(content=item, model=self.name, tokens_in=100, tokens_out=20, finish_reason="stop")


def make_ctx(
    output: Any = "Paris", input: Any = "Capital of France?", expected: Any = "Paris", **services: Any
) -> ScoreContext:
    case = Case(id="c1", input=input, expected=expected)
    run = RunRecord(case_id="c1", run_id="r:c1", trace_id="r:c1", output=output)
    return ScoreContext(case=case, output=output, run=run, **services)


def by_name(scores: list[Score]) -> dict[str, Score]:
    return {score.name: score for score in scores}


async def test_scores_each_axis_and_derives_the_verdict() -> None:
    model = FakeJudge([answer(accuracy=4, completeness=3, grounding=2)])
    scores = by_name(await RubricJudge(model=model).score(make_ctx()))
    assert list(scores) == RubricJudge().score_names
    assert scores["rubric_judge.accuracy"].value == 0.8
    assert scores["rubric_judge.grounding"].value == 0.4
    assert scores["rubric_judge.grounding"].passed is False
    assert scores["rubric_judge.accuracy"].passed is True
    assert scores["rubric_judge.grounding"].explanation == "grounding reason"
    assert scores["rubric_judge.grounding"].metadata == {"score": 2, "min": 3}
    verdict = scores["rubric_judge"]
    assert verdict.value is False and verdict.passed is False
    assert verdict.explanation == "fail: grounding 2 < 3"
    assert verdict.metadata["failing_axes"] == ["grounding"]
    assert verdict.metadata["judge_model"] == "fake-judge"
    assert verdict.metadata["prompt_version"] == "rubric-v2"


async def test_call_is_deterministic_and_asks_for_the_strict_schema() -> None:
    model = FakeJudge([answer()])
    await RubricJudge(model=model, max_tokens=300).score(make_ctx())
    (call,) = model.calls
    assert call["temperature"] == 0.0
    assert call["seed"] == 0
    assert call["max_tokens"] == 300
    fmt = call["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["required"] == list(AXES)


async def test_prompt_carries_input_output_expected_and_rubric() -> None:
    model = FakeJudge([answer()])
    await RubricJudge(model=model, rubric="Cite the atlas.").score(
        make_ctx(output="It is {output} Lyon", input="Capital?", expected=MISSING)
    )
    system, user = model.calls[0]["messages"]
    assert system["role"] == "system" and "JSON" in system["content"]
    assert "Capital?" in user["content"]
    assert "It is {output} Lyon" in user["content"]  # a value's braces are not expanded again
    assert '"reference_answer": ' not in user["content"]  # none given: the field is left out
    assert "- grounding:" in user["content"] and "Cite the atlas." in user["content"]
    assert "{rubric}" not in user["content"]


async def test_judge_pass_field_never_decides_the_verdict() -> None:
    model = FakeJudge([answer(pass_=True, accuracy=2), answer(pass_=False)])
    judge = RubricJudge(model=model)
    failing = by_name(await judge.score(make_ctx()))["rubric_judge"]
    assert failing.value is False and failing.metadata["judge_pass"] is True
    passing = by_name(await judge.score(make_ctx()))["rubric_judge"]
    assert passing.value is True and passing.metadata["judge_pass"] is False


async def test_unreadable_answer_is_retried_with_a_new_call() -> None:
    model = FakeJudge(["I think it's great!", "```json\n" + answer() + "\n```"])
    scores = by_name(await RubricJudge(model=model).score(make_ctx()))
    assert scores["rubric_judge"].value is True
    assert scores["rubric_judge"].metadata["attempts"] == 2
    assert scores["rubric_judge"].metadata["judge_calls"] == 2
    assert len(model.calls) == 2


@pytest.mark.parametrize(
    ("bad", "kind"),
    [
        ("no json here", "no_json"),
        ('{"accuracy": {"score": 4, "reason": "cut', "truncated"),
        (answer(accuracy=7), "schema"),
        ("{'accuracy': 4}", "invalid_json"),
        ("", "empty"),
        # a draft and a revision: scoring either one is a guess (the first passed, the last failed)
        ("Draft: " + answer() + " Wait, the answer is wrong. Final: " + answer(**dict.fromkeys(AXES, 0)), "ambiguous"),
        (answer(accuracy=1) + "\n" + answer(), "ambiguous"),
        # a repeated key read last-wins turned a 1 into a pass
        ('{"accuracy": 1, "accuracy": 5, ' + answer()[1:], "schema"),
    ],
)
async def test_answer_that_stays_bad_is_a_judge_error_not_a_zero(bad: str, kind: str) -> None:
    model = FakeJudge([bad] * 3)
    scores = by_name(await RubricJudge(model=model, retries=2).score(make_ctx()))
    assert len(model.calls) == 3
    assert set(scores) == set(RubricJudge().score_names)
    for score in scores.values():
        assert score.error is not None and score.value is None and score.passed is None
        assert score.metadata["kind"] == kind
    verdict = scores["rubric_judge"]
    assert verdict.metadata["raw"] == bad
    assert "raw" not in scores["rubric_judge.accuracy"].metadata
    assert "after 3 attempt(s)" in verdict.error
    assert verdict.metadata["judge_calls"] == 3


async def test_model_error_is_retried_then_recorded() -> None:
    model = FakeJudge([ModelError("HTTP 429: rate limited")] * 2)
    scores = by_name(await RubricJudge(model=model, retries=1, retry_backoff_s=0).score(make_ctx()))
    assert len(model.calls) == 2
    assert scores["rubric_judge"].metadata["kind"] == "model_error"
    assert "429" in scores["rubric_judge"].error
    assert scores["rubric_judge"].metadata["raw"] is None


async def test_model_error_then_success() -> None:
    model = FakeJudge([ModelError("HTTP 503"), answer()])
    scores = by_name(await RubricJudge(model=model, retry_backoff_s=0).score(make_ctx()))
    assert scores["rubric_judge"].value is True


async def test_a_hanging_judge_times_out_instead_of_staying_pending() -> None:
    class SlowJudge(FakeJudge):
        async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
            self.calls.append(kwargs)
            await asyncio.sleep(10)
            raise AssertionError("unreachable")

    model = SlowJudge([])
    scores = by_name(await RubricJudge(model=model, timeout_s=0.01, retries=1, retry_backoff_s=0).score(make_ctx()))
    assert scores["rubric_judge"].metadata["kind"] == "timeout"
    assert len(model.calls) == 2


def rejects(*types: str | None) -> Callable[[list[dict[str, Any]], dict[str, Any]], Answer]:
    """A script that rejects the given response_format types like an endpoint without support."""

    def reply(_: list[dict[str, Any]], kwargs: dict[str, Any]) -> Answer:
        fmt = kwargs["response_format"]
        if (fmt or {}).get("type") in types:
            return ModelError(f"HTTP 400: response_format type {fmt['type']!r} is not supported")
        return answer()

    return reply


async def test_schema_rejection_falls_back_to_json_mode_and_is_remembered() -> None:
    model = FakeJudge(rejects("json_schema"))
    judge = RubricJudge(model=model)
    first = by_name(await judge.score(make_ctx()))
    assert first["rubric_judge"].value is True
    assert [c["response_format"]["type"] for c in model.calls] == ["json_schema", "json_object"]
    await judge.score(make_ctx())
    assert model.calls[-1]["response_format"] == {"type": "json_object"}
    assert len(model.calls) == 3


async def test_endpoint_without_any_response_format_gets_none() -> None:
    model = FakeJudge(rejects("json_schema", "json_object"))
    scores = by_name(await RubricJudge(model=model).score(make_ctx()))
    assert scores["rubric_judge"].value is True
    assert model.calls[-1]["response_format"] is None


async def test_use_schema_false_sends_no_response_format() -> None:
    model = FakeJudge([answer()])
    await RubricJudge(model=model, use_schema=False).score(make_ctx())
    assert model.calls[0]["response_format"] is None


@pytest.mark.parametrize("empty", ["", "   ", None, [], {}])
async def test_empty_output_is_a_judge_error_without_a_call(empty: Any) -> None:
    model = FakeJudge([])
    scores = by_name(await RubricJudge(model=model).score(make_ctx(output=empty)))
    assert model.calls == []
    assert scores["rubric_judge"].metadata["kind"] == "empty_output"
    assert scores["rubric_judge"].error == "empty output: not sent to the judge"
    assert scores["rubric_judge.accuracy"].error is not None


async def test_missing_input_is_a_judge_error_without_a_call() -> None:
    model = FakeJudge([])
    scores = by_name(await RubricJudge(model=model).score(make_ctx(input="")))
    assert model.calls == []
    assert scores["rubric_judge"].metadata["kind"] == "empty_input"


async def test_on_empty_judge_asks_and_flags() -> None:
    model = FakeJudge([answer(accuracy=0)])
    scores = by_name(await RubricJudge(model=model, on_empty="judge").score(make_ctx(output="")))
    assert len(model.calls) == 1
    assert scores["rubric_judge"].value is False
    assert scores["rubric_judge"].metadata["empty_output"] is True


async def test_no_model_is_a_judge_error() -> None:
    scores = by_name(await RubricJudge().score(make_ctx()))
    assert scores["rubric_judge"].metadata["kind"] == "no_model"


async def test_model_from_services_and_named_mapping() -> None:
    model = FakeJudge([answer(), answer()], name="judge-a")
    assert by_name(await RubricJudge().score(make_ctx(judge=model)))["rubric_judge"].value is True
    other = FakeJudge([], name="judge-b")
    picked = by_name(
        await RubricJudge(judge_model="judge-a").score(make_ctx(judge={"judge-a": model, "judge-b": other}))
    )
    assert picked["rubric_judge"].metadata["judge_model"] == "judge-a"
    assert other.calls == []


def test_spec_records_model_name_and_prompt_version_not_the_object() -> None:
    spec = RubricJudge(model=FakeJudge([], name="qwen2.5-7b"), samples=3).spec()
    assert spec.name == "rubric_judge"
    assert spec.args["judge_model"] == "qwen2.5-7b"
    assert spec.args["prompt_version"] == "rubric-v2"
    assert spec.args["samples"] == 3
    assert "model" not in spec.args and "cache" not in spec.args
    json.dumps(to_record(spec))  # the stored spec is plain JSON
    rebuilt = scorer_from_spec(to_record(spec))
    assert isinstance(rebuilt, RubricJudge) and rebuilt.samples == 3 and rebuilt.judge_model == "qwen2.5-7b"


def test_cli_spec_string_builds_the_judge() -> None:
    judge = scorer_from_spec("rubric_judge:samples=3,min_accuracy=5,judge_model=gpt-4o-mini")
    assert isinstance(judge, RubricJudge)
    assert judge.thresholds.minimums["accuracy"] == 5


@pytest.mark.parametrize(
    "options",
    [{"samples": 0}, {"retries": -1}, {"on_empty": "skip"}, {"prompt_version": "rubric-v0"}, {"min_accuracy": 6}],
)
def test_bad_options_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RubricJudge(**options)


async def test_samples_vote_and_flag_instability() -> None:
    model = FakeJudge([answer(accuracy=5), answer(accuracy=3), answer(accuracy=5)])
    scores = by_name(await RubricJudge(model=model, samples=3).score(make_ctx()))
    verdict = scores["rubric_judge"]
    assert verdict.value is True
    assert scores["rubric_judge.accuracy"].metadata["score"] == 5
    assert verdict.metadata["unstable"] is True
    assert verdict.metadata["disagreeing_axes"] == ["accuracy"]
    assert [s["pass"] for s in verdict.metadata["samples"]] == [True, False, True]
    assert [s["scores"]["accuracy"] for s in verdict.metadata["samples"]] == [5, 3, 5]
    # temperature 0 throughout; each sample its own seed, so K samples are K draws
    assert sorted(call["seed"] for call in model.calls) == [0, 1, 2]
    assert all(call["temperature"] == 0.0 for call in model.calls)


async def test_samples_tie_is_conservative() -> None:
    model = FakeJudge([answer(accuracy=5), answer(accuracy=3)])
    scores = by_name(await RubricJudge(model=model, samples=2).score(make_ctx()))
    assert scores["rubric_judge.accuracy"].metadata["score"] == 3
    assert scores["rubric_judge"].value is False


async def test_agreeing_samples_are_stable() -> None:
    model = FakeJudge([answer(accuracy=4)] * 3)
    verdict = by_name(await RubricJudge(model=model, samples=3).score(make_ctx()))["rubric_judge"]
    assert verdict.metadata["unstable"] is False
    assert verdict.metadata["samples_used"] == 3


async def test_an_errored_sample_is_missing_not_a_vote() -> None:
    model = FakeJudge([answer(accuracy=5), "garbage", "garbage", answer(accuracy=5)])
    verdict = by_name(await RubricJudge(model=model, samples=2, retries=1).score(make_ctx()))["rubric_judge"]
    assert verdict.value is True
    assert verdict.metadata["samples_used"] == 1
    assert verdict.metadata["samples_failed"] == 1
    assert verdict.metadata["samples"][1]["kind"] == "no_json"
    assert verdict.metadata["unstable"] is False


async def test_all_samples_erroring_is_a_judge_error() -> None:
    model = FakeJudge(["nope"] * 4)
    scores = by_name(await RubricJudge(model=model, samples=2, retries=1).score(make_ctx()))
    assert scores["rubric_judge"].error is not None
    assert len(scores["rubric_judge"].metadata["samples"]) == 2


async def test_judge_calls_are_traced_as_chat_spans() -> None:
    tracer = Tracer("t1", "r1")
    model = FakeJudge(["not json", answer()])
    verdict = by_name(await RubricJudge(model=model).score(make_ctx(tracer=tracer)))["rubric_judge"]
    begins = [e for e in tracer.events if e.type == SPAN_BEGIN]
    ends = [e for e in tracer.events if e.type == SPAN_END]
    assert [e.name for e in begins] == ["judge:fake-judge", "judge:fake-judge"]
    assert all(e.payload["kind"] == "chat" and e.payload["role"] == "judge" for e in begins)
    assert [e.payload["attempt"] for e in begins] == [0, 1]
    assert all(e.payload["tokens_in"] == 100 and e.payload["tokens_out"] == 20 for e in ends)
    assert [e.payload["kind"] for e in tracer.events if e.type == "error"] == ["no_json"]
    assert verdict.metadata["judge_calls"] == 2
    assert verdict.metadata["judge_tokens_in"] == 200
    assert verdict.metadata["judge_tokens_out"] == 40


def results_of(scores_per_case: list[list[Score]]) -> list[CaseResult]:
    return [
        CaseResult(
            case=Case(id=str(i), input="q"),
            run=RunRecord(case_id=str(i), run_id=str(i), trace_id=str(i)),
            scores=scores,
        )
        for i, scores in enumerate(scores_per_case)
    ]


async def test_count_unstable_and_judge_usage_helpers() -> None:
    stable = await RubricJudge(model=FakeJudge([answer()] * 2), samples=2).score(make_ctx())
    unstable = await RubricJudge(model=FakeJudge([answer(), answer(grounding=1)]), samples=2).score(make_ctx())
    failed = await RubricJudge(model=FakeJudge(["x"] * 3)).score(make_ctx())
    results = results_of([stable, unstable, failed])
    assert count_unstable(results) == 1
    assert count_unstable([{"scores": [to_record(s) for s in unstable]}]) == 1
    assert judge_usage(results) == {
        "calls": 7,
        "tokens_in": 700,
        "tokens_out": 140,
        "cache_hits": 0,
        "verdicts": 2,
        "errors": 1,
    }


def echo(question: str) -> str:
    return f"answer to {question}"


async def test_ten_cases_one_judge_failure_gives_nine_scored_and_one_error() -> None:
    """The judge fails on exactly one case: nine scores, one judge error, the run carries on."""

    def reply(messages: list[dict[str, Any]], _: dict[str, Any]) -> Answer:
        if "question 7" in messages[1]["content"]:
            return "I refuse to answer in JSON."
        return answer(accuracy=4)

    model = FakeJudge(reply)
    cases = [Case(id=f"q{i}", input=f"question {i}", expected=f"answer to question {i}") for i in range(10)]
    report = await run_eval(cases, echo, [RubricJudge(retries=2)], services=ScorerServices(judge=model), concurrency=3)
    accuracy = report.metrics["rubric_judge.accuracy"]
    assert (accuracy.n, accuracy.total, accuracy.errors) == (9, 10, 1)
    assert accuracy.mean == pytest.approx(0.8)
    assert format_n(accuracy) == "n=9/10"
    verdict = report.metrics["rubric_judge"]
    assert (verdict.n, verdict.total, verdict.passed) == (9, 10, 9)
    assert report.errored == 1 and report.passed == 9
    assert report.target_errors == 0
    assert report.scorer_errors == 1  # one failing scorer, however many scores (verdict + five axes) it emits
    assert len(model.calls) == 9 + 3


async def test_errored_case_status_is_errored_not_failed() -> None:
    scores = await RubricJudge(model=FakeJudge(["x"] * 3)).score(make_ctx())
    (result,) = results_of([scores])
    assert result.status is CaseStatus.ERRORED


def test_the_same_answer_repeated_is_one_answer_and_nested_objects_are_part_of_it() -> None:
    # inside a fence and echoed after it: the same reading, so no ambiguity
    fenced = "```json\n" + answer(accuracy=3) + "\n```\nSo: " + answer(accuracy=3)
    assert parse_judge_answer(fenced).scores["accuracy"] == 3
    # a {"scores": {...}} wrapper holds an object that looks like an answer: still one answer
    wrapped = json.dumps({"scores": json.loads(answer(accuracy=2))})
    assert parse_judge_answer(wrapped).scores["accuracy"] == 2
