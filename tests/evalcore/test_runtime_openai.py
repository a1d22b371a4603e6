"""OpenAIChatModel against the local stand-in server: round trips, retries, clear errors, settings."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator

import openai
import pytest

from evalcore.runtime.agent import Agent
from evalcore.runtime.local import LocalLlamaModel
from evalcore.runtime.models import ModelError
from evalcore.runtime.openai_client import OpenAIChatModel, model_from_settings
from evalcore.runtime.scripted import FunctionModel
from evalcore.runtime.tools import tool
from evalcore.targets import RunContext
from evalcore.tracing import Tracer
from evalcore.types import Case
from tests.support.stand_in_llm import StandInLLM

KEY_ENV = "EVALSITE_TEST_STANDIN_KEY"
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def stand_in_llm() -> Iterator[StandInLLM]:
    """Same as ``tests.support.fixtures.stand_in_llm``; kept here so this module runs on its own."""
    with StandInLLM() as server:
        yield server


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-standin-1")


MakeModel = Callable[..., OpenAIChatModel]


@pytest.fixture
async def make_model() -> AsyncIterator[MakeModel]:
    """Builds clients for the stand-in with tiny backoffs; closes their connections after the test."""
    made: list[OpenAIChatModel] = []

    def build(server: StandInLLM | None = None, *, base_url: str | None = None, **options: float) -> OpenAIChatModel:
        settings = {"timeout_s": 2.0, "max_retries": 2, "backoff_s": 0.001, **options}
        url = base_url or (server.base_url if server is not None else None)
        model = OpenAIChatModel("stand-in-model", base_url=url, api_key_env=KEY_ENV, **settings)
        made.append(model)
        return model

    yield build
    for model in made:
        await model.aclose()


@tool
def lookup_capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: Country name in English.
    """
    return {"France": "Paris", "Peru": "Lima"}.get(country, "unknown")


async def test_tool_call_round_trip_through_the_agent(make_model: MakeModel, stand_in_llm: StandInLLM) -> None:
    stand_in_llm.reply(tool_calls=[{"id": "call_a", "name": "lookup_capital", "arguments": {"country": "Peru"}}])
    stand_in_llm.reply("The capital of Peru is Lima.", usage=(40, 9))
    agent = Agent(make_model(stand_in_llm), [lookup_capital], instructions="Answer briefly.", temperature=0, seed=1)
    tracer = Tracer("t", "r")
    ctx = RunContext(case=Case("c", "q"), tracer=tracer, run_id="r", trace_id="t")

    result = await agent.run("Capital of Peru?", ctx)

    assert result.output == "The capital of Peru is Lima."
    assert (result.tokens_in, result.tokens_out) == (50, 14)
    assert result.model == "stand-in-model"
    assert result.metadata["tool_calls"] == [{"name": "lookup_capital", "arguments": {"country": "Peru"}}]
    first, second = (r.body for r in stand_in_llm.chat_requests)
    assert first["model"] == "stand-in-model"
    assert first["tools"] == [lookup_capital.openai_schema()]
    assert (first["temperature"], first["seed"]) == (0, 1)
    assert first["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Capital of Peru?"},
    ]
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_a"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_a", "content": "Lima"}
    assert stand_in_llm.chat_requests[0].headers["authorization"] == "Bearer sk-standin-1"


async def test_request_carries_sampling_options_only_when_given(
    make_model: MakeModel, stand_in_llm: StandInLLM
) -> None:
    stand_in_llm.reply("a").reply("b")
    model = make_model(stand_in_llm)
    schema = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}
    await model.complete(USER, temperature=0.2, seed=42, max_tokens=16, response_format=schema)
    await model.complete(USER)
    given, bare = (r.body for r in stand_in_llm.chat_requests)
    assert (given["temperature"], given["seed"], given["max_tokens"]) == (0.2, 42, 16)
    assert given["response_format"] == schema
    assert not {"temperature", "seed", "max_tokens", "response_format", "tools"} & set(bare)


async def test_the_key_is_read_from_the_environment_at_each_call(
    make_model: MakeModel, stand_in_llm: StandInLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in_llm.reply("a").reply("b")
    model = make_model(stand_in_llm)
    await model.complete(USER)
    monkeypatch.setenv(KEY_ENV, "sk-rotated")
    await model.complete(USER)
    assert [r.headers["authorization"] for r in stand_in_llm.chat_requests] == [
        "Bearer sk-standin-1",
        "Bearer sk-rotated",
    ]
    assert "sk-" not in repr(model) and "sk-" not in str(vars(model))


async def test_429_then_success_is_retried(
    make_model: MakeModel, stand_in_llm: StandInLLM, caplog: pytest.LogCaptureFixture
) -> None:
    stand_in_llm.rate_limited(retry_after="0").reply("after the rate limit")
    model = make_model(stand_in_llm, backoff_s=600.0)  # Retry-After: 0 must win over the 10-minute backoff
    with caplog.at_level(logging.WARNING):
        response = await asyncio.wait_for(model.complete(USER), timeout=120)  # bounds a broken retry only
    assert response.content == "after the rate limit"
    assert model.retry_count == 1
    assert len(stand_in_llm.chat_requests) == 2
    assert "HTTP 429" in caplog.text and "retry 1/" in caplog.text and "in 0.00 s" in caplog.text


async def test_server_errors_exhaust_the_retries_with_a_clear_error(
    make_model: MakeModel, stand_in_llm: StandInLLM
) -> None:
    stand_in_llm.server_error(times=3)
    model = make_model(stand_in_llm, max_retries=2)
    with pytest.raises(ModelError) as caught:
        await model.complete(USER)
    message = str(caught.value)
    assert stand_in_llm.base_url in message
    assert "HTTP 500: internal error in the stand-in" in message
    assert "gave up after 3 attempts" in message
    assert len(stand_in_llm.chat_requests) == 3
    assert model.retry_count == 2


async def test_a_503_then_success_is_retried(make_model: MakeModel, stand_in_llm: StandInLLM) -> None:
    stand_in_llm.server_error(status=503).reply("ok")
    assert (await make_model(stand_in_llm).complete(USER)).content == "ok"


async def test_malformed_json_body_is_a_clear_error_and_not_retried(
    make_model: MakeModel, stand_in_llm: StandInLLM
) -> None:
    stand_in_llm.malformed_json()
    with pytest.raises(ModelError, match=r"malformed JSON body from http://127\.0\.0\.1:\d+/v1 .*body starts"):
        await make_model(stand_in_llm).complete(USER)
    assert len(stand_in_llm.chat_requests) == 1


async def test_body_without_choices_is_a_clear_error(make_model: MakeModel, stand_in_llm: StandInLLM) -> None:
    stand_in_llm.missing_choices()
    with pytest.raises(ModelError, match=r"no 'choices' in the body \(keys: id, model, object\)"):
        await make_model(stand_in_llm).complete(USER)


async def test_401_names_the_key_variable(make_model: MakeModel, stand_in_llm: StandInLLM) -> None:
    stand_in_llm.error(401, "Incorrect API key provided")
    with pytest.raises(ModelError, match=f"Incorrect API key provided.*check the API key env var {KEY_ENV}"):
        await make_model(stand_in_llm).complete(USER)
    assert len(stand_in_llm.chat_requests) == 1


async def test_404_says_the_model_was_not_found_at_the_base_url(
    make_model: MakeModel, stand_in_llm: StandInLLM
) -> None:
    stand_in_llm.error(404, "model 'stand-in-model' not found")
    with pytest.raises(ModelError, match=r"model 'stand-in-model' not found at base_url http://127\.0\.0\.1"):
        await make_model(stand_in_llm).complete(USER)


async def test_other_4xx_is_not_retried(make_model: MakeModel, stand_in_llm: StandInLLM) -> None:
    stand_in_llm.error(400, "tools[0] is invalid")
    with pytest.raises(ModelError, match=r"rejected the request .*HTTP 400: tools\[0\] is invalid"):
        await make_model(stand_in_llm).complete(USER)
    assert len(stand_in_llm.chat_requests) == 1


async def test_a_slow_answer_times_out_and_is_retried(make_model: MakeModel, stand_in_llm: StandInLLM) -> None:
    # The first answer comes far after the timeout, the second at once: the timeout is generous
    # so that "at once" holds on a busy machine too (no tight wall-clock budget).
    stand_in_llm.slow(120).reply("in time")
    model = make_model(stand_in_llm, timeout_s=5, max_retries=1)
    response = await model.complete(USER)
    assert response.content == "in time"
    assert model.retry_count == 1


async def test_connection_refused_is_retried_then_reported(make_model: MakeModel) -> None:
    with StandInLLM() as server:
        base_url = server.base_url
    model = make_model(base_url=base_url, max_retries=1)
    with pytest.raises(ModelError, match=r"connection failed.*gave up after 2 attempts"):
        await model.complete(USER)
    assert model.retry_count == 1


async def test_malformed_tool_arguments_are_kept_raw_and_reported_to_the_model(
    make_model: MakeModel, stand_in_llm: StandInLLM
) -> None:
    stand_in_llm.reply(tool_calls=[{"id": "c1", "name": "lookup_capital", "arguments": '{"country": "Fra'}])
    stand_in_llm.reply("I could not look it up.")
    model = make_model(stand_in_llm)
    result = await Agent(model, [lookup_capital]).run("Capital of France?")
    assert result.output == "I could not look it up."
    assert result.metadata["tool_calls"] == [{"name": "lookup_capital", "arguments": {}}]
    second = stand_in_llm.chat_requests[1].body["messages"]
    assert second[-2]["tool_calls"][0]["function"]["arguments"] == '{"country": "Fra'
    assert second[-1]["content"].startswith("Error: the arguments for tool 'lookup_capital' could not be read")


async def test_a_missing_key_for_openai_itself_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALSITE_TEST_NO_SUCH_KEY", raising=False)
    model = OpenAIChatModel("gpt-4o-mini", api_key_env="EVALSITE_TEST_NO_SUCH_KEY")
    with pytest.raises(ModelError, match="set the environment variable EVALSITE_TEST_NO_SUCH_KEY"):
        await model.complete(USER)


async def test_a_missing_key_for_a_local_endpoint_is_fine(
    make_model: MakeModel, stand_in_llm: StandInLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV)
    stand_in_llm.reply("no key needed")
    assert (await make_model(stand_in_llm).complete(USER)).content == "no key needed"
    assert stand_in_llm.chat_requests[0].headers["authorization"] == "Bearer no-key"


async def test_stand_in_lists_models_and_reports_an_empty_script(
    make_model: MakeModel, stand_in_llm: StandInLLM
) -> None:
    client = openai.AsyncOpenAI(api_key="x", base_url=stand_in_llm.base_url, max_retries=0)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["stand-in-model"]
    with pytest.raises(ModelError, match="no scripted response left"):
        await make_model(stand_in_llm).complete(USER)
    await client.close()


@pytest.mark.parametrize(
    ("headers", "waited"),
    [
        ({"retry-after-ms": "10", "Retry-After": "500"}, "0.01"),  # milliseconds win
        ({"Retry-After": "0.02"}, "0.02"),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, "0.00"),  # a date already past
        ({}, "0.03"),  # no hint: the backoff
    ],
)
async def test_the_wait_before_a_retry_follows_the_servers_hint(
    make_model: MakeModel, stand_in_llm: StandInLLM, caplog: pytest.LogCaptureFixture, headers, waited
) -> None:
    stand_in_llm.error(429, "slow down", headers=headers).reply("ok")
    model = make_model(stand_in_llm, backoff_s=0.03)
    with caplog.at_level(logging.WARNING):
        response = await asyncio.wait_for(model.complete(USER), timeout=120)  # bounds a broken retry only
    assert response.content == "ok" and model.retry_count == 1
    assert f"in {waited} s" in caplog.text, caplog.text


async def test_model_from_settings() -> None:
    echo = model_from_settings({"EVALSITE_MODEL": "scripted:echo"})
    assert isinstance(echo, FunctionModel)
    assert (await echo.complete([{"role": "user", "content": "ping"}])).content == "ping"
    fixed = model_from_settings({"EVALSITE_MODEL": "scripted:42"})
    assert (await fixed.complete(USER)).content == "42"
    assert isinstance(model_from_settings({"EVALSITE_MODEL": "local:smollm2"}), LocalLlamaModel)
    remote = model_from_settings(
        {
            "EVALSITE_MODEL": "qwen2.5:0.5b",
            "EVALSITE_MODEL_BASE_URL": "http://localhost:11434/v1",
            "EVALSITE_MODEL_API_KEY_ENV": "OLLAMA_KEY",
        }
    )
    assert isinstance(remote, OpenAIChatModel)
    assert (remote.name, remote.base_url, remote.api_key_env) == (
        "qwen2.5:0.5b",
        "http://localhost:11434/v1",
        "OLLAMA_KEY",
    )
    default = model_from_settings({"EVALSITE_MODEL": "gpt-4o-mini"})
    assert isinstance(default, OpenAIChatModel)
    assert (default.base_url, default.api_key_env) == (None, "OPENAI_API_KEY")
    with pytest.raises(ModelError, match="set EVALSITE_MODEL"):
        model_from_settings({})
    with pytest.raises(ModelError, match="only bundled one is local:smollm2"):
        model_from_settings({"EVALSITE_MODEL": "local:llama3"})


def test_an_empty_choices_list_is_named_as_such() -> None:
    from evalcore.runtime.models import chat_response_from_openai

    with pytest.raises(ModelError, match=r"'choices' is an empty list"):
        chat_response_from_openai({"id": "x", "object": "chat.completion", "choices": []})


@pytest.mark.parametrize("base_url", ["not-a-url", "ftp://host/v1", "127.0.0.1:8080/v1"])
def test_an_endpoint_that_is_not_an_http_url_is_refused_before_any_call(base_url: str) -> None:
    # before: each case retried a connection for seconds, then failed; now the setup says why
    with pytest.raises(ModelError, match="is not an http\\(s\\) URL"):
        model_from_settings({"EVALSITE_MODEL": "m", "EVALSITE_MODEL_BASE_URL": base_url})


async def test_a_dead_endpoint_is_not_called_again_and_again(make_model: MakeModel, monkeypatch) -> None:
    """After two calls in a row that could not connect at all, calls fail at once (no new
    connection attempts, no retry warnings) until the pause ends; then one tries again, and an
    answer closes the breaker. A judge or an agent on a dead endpoint used to spend every retry
    of every case (48 warnings for 4 judged cases)."""
    from evalcore.runtime import openai_client

    with StandInLLM() as server:
        base_url = server.base_url
    model = make_model(base_url=base_url, max_retries=1)
    for _ in range(openai_client.UNREACHABLE_CALLS):
        with pytest.raises(ModelError, match="connection failed"):
            await model.complete(USER)
    retries = model.retry_count
    with pytest.raises(ModelError, match=r"is unreachable: 2 calls in a row could not connect .*not calling it again"):
        await model.complete(USER)
    assert model.retry_count == retries  # failed at once: no attempt, no retry
    # the pause is over: the next call tries the endpoint again (a live one now) and resets
    with StandInLLM() as live:
        live.reply("back")
        model.base_url = live.base_url
        model._clients.clear()
        monkeypatch.setattr(model, "_paused_until", 0.0)
        assert (await model.complete(USER)).content == "back"
        assert model._unreachable_calls == 0


async def test_timeouts_and_server_errors_do_not_count_as_unreachable(
    make_model: MakeModel, stand_in_llm: StandInLLM
) -> None:
    """Only an endpoint nobody answers is paused: HTTP errors mean a live server."""
    for _ in range(3):
        stand_in_llm.server_error(times=2, status=503)
    model = make_model(stand_in_llm, max_retries=1)
    for _ in range(3):
        with pytest.raises(ModelError, match="HTTP 503"):
            await model.complete(USER)
    assert model._paused_until == 0.0
