"""The judge cache: both stores, the key, and a second run that makes no model call."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalcore.jsonvalue import MISSING
from evalcore.judge import (
    InMemoryJudgeCache,
    JudgeCache,
    RubricJudge,
    SqliteJudgeCache,
    judge_cache_key,
    judge_endpoint,
)
from evalcore.runner import run_eval
from evalcore.runtime.openai_client import OpenAIChatModel
from evalcore.types import Case
from tests.evalcore.test_judge_rubric import FakeJudge, answer, by_name, make_ctx

KEY_ARGS: dict[str, Any] = {
    "judge_model": "m",
    "endpoint": "http://judge-a.local/v1",
    "prompt_version": "rubric-v1",
    "messages": [{"role": "user", "content": "grade 4"}],
    "input": {"q": "2+2", "context": ["a", "b"]},
    "output": "4",
    "expected": "4",
    "rubric": "rubric text",
    "sample_index": 0,
    "temperature": 0.0,
    "seed": 0,
    "max_tokens": 1024,
    "use_schema": True,
}


def test_key_is_a_stable_sha256() -> None:
    key = judge_cache_key(**KEY_ARGS)
    assert len(key) == 64 and int(key, 16) >= 0
    reordered = {**KEY_ARGS, "input": {"context": ["a", "b"], "q": "2+2"}}
    assert judge_cache_key(**reordered) == key


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("judge_model", "other"),
        ("endpoint", "http://judge-b.local/v1"),
        ("endpoint", "http://judge-a.local/v2"),
        ("endpoint", None),
        ("messages", [{"role": "user", "content": "grade 4 strictly"}]),
        ("use_schema", False),
        ("prompt_version", "rubric-v2"),
        ("input", {"q": "2+3"}),
        ("output", "5"),
        ("expected", "5"),
        ("expected", MISSING),
        ("rubric", "stricter"),
        ("sample_index", 1),
        ("temperature", 0.7),
        ("seed", 1),
        ("max_tokens", 10),
    ],
)
def test_key_changes_with_everything_that_shapes_the_answer(field: str, value: Any) -> None:
    assert judge_cache_key(**{**KEY_ARGS, field: value}) != judge_cache_key(**KEY_ARGS)


def test_key_ignores_credentials_and_a_trailing_slash_in_the_endpoint() -> None:
    plain = judge_cache_key(**KEY_ARGS)
    for url in ("http://bob:hunter2@judge-a.local/v1", "http://judge-a.local/v1/"):
        assert judge_cache_key(**{**KEY_ARGS, "endpoint": url}) == plain


def test_judge_endpoint_names_the_class_and_the_url_without_credentials() -> None:
    model = OpenAIChatModel("m", base_url="http://bob:hunter2@judge.local:8080/v1/")
    assert judge_endpoint(model) == {
        "class": "evalcore.runtime.openai_client.OpenAIChatModel",
        "endpoint": "http://judge.local:8080/v1",
    }
    other = judge_endpoint(OpenAIChatModel("m", base_url="http://judge.local:9090/v1"))
    assert other["endpoint"] == "http://judge.local:9090/v1"


def test_missing_expected_and_null_expected_differ() -> None:
    assert judge_cache_key(**{**KEY_ARGS, "expected": MISSING}) != judge_cache_key(**{**KEY_ARGS, "expected": None})


@pytest.fixture(params=["memory", "sqlite"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> JudgeCache:
    if request.param == "memory":
        return InMemoryJudgeCache()
    store = SqliteJudgeCache(tmp_path / "judge.sqlite3")
    request.addfinalizer(store.close)
    return store


def test_get_set_replace(cache: JudgeCache) -> None:
    assert isinstance(cache, JudgeCache)
    assert cache.get("k") is None
    value = {"scores": {"accuracy": 4}, "reasons": {}}
    cache.set("k", value)
    value["scores"]["accuracy"] = 0  # later mutation of the caller's dict must not leak in
    assert cache.get("k") == {"scores": {"accuracy": 4}, "reasons": {}}
    cache.set("k", {"scores": {"accuracy": 2}})
    assert cache.get("k") == {"scores": {"accuracy": 2}}


def test_sqlite_persists_across_connections_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "judge.sqlite3"
    with SqliteJudgeCache(path) as first:
        first.set("k", {"v": 1})
        assert len(first) == 1
    with SqliteJudgeCache(path) as second:
        assert second.get("k") == {"v": 1}
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["judge_cache"]
    finally:
        conn.close()


def cases(n: int = 4) -> list[Case]:
    return [Case(id=f"q{i}", input=f"question {i}", expected=f"answer {i}") for i in range(n)]


def echo(question: str) -> str:
    return f"reply to {question}"


async def test_second_run_makes_zero_model_calls(tmp_path: Path) -> None:
    with SqliteJudgeCache(tmp_path / "judge.sqlite3") as store:
        model = FakeJudge(lambda *_: answer(accuracy=4))
        first = await run_eval(cases(), echo, [RubricJudge(model=model, cache=store)])
        assert len(model.calls) == 4
        second = await run_eval(cases(), echo, [RubricJudge(model=model, cache=store)])
        assert len(model.calls) == 4
        assert second.metrics["rubric_judge.accuracy"].mean == first.metrics["rubric_judge.accuracy"].mean == 0.8
        assert second.pass_rate == first.pass_rate == 1.0


async def test_thresholds_change_without_calling_the_judge_again() -> None:
    store = InMemoryJudgeCache()
    model = FakeJudge([answer(accuracy=4)])
    lenient = by_name(await RubricJudge(model=model, cache=store).score(make_ctx()))
    strict = by_name(await RubricJudge(model=model, cache=store, min_accuracy=5).score(make_ctx()))
    assert len(model.calls) == 1
    assert lenient["rubric_judge"].value is True
    assert strict["rubric_judge"].value is False
    assert strict["rubric_judge"].metadata["judge_cache_hits"] == 1
    assert strict["rubric_judge"].metadata["judge_calls"] == 0


async def test_use_cache_false_bypasses_the_cache() -> None:
    store = InMemoryJudgeCache()
    model = FakeJudge([answer(), answer()])
    await RubricJudge(model=model, cache=store, use_cache=False).score(make_ctx())
    await RubricJudge(model=model, cache=store, use_cache=False).score(make_ctx())
    assert len(model.calls) == 2
    assert len(store) == 0


async def test_cache_from_services() -> None:
    store = InMemoryJudgeCache()
    model = FakeJudge([answer()])
    await RubricJudge(model=model).score(make_ctx(judge_cache=store))
    await RubricJudge(model=model).score(make_ctx(judge_cache=store))
    assert len(model.calls) == 1


async def test_judge_errors_are_not_cached() -> None:
    store = InMemoryJudgeCache()
    model = FakeJudge(["bad", answer()])
    failed = by_name(await RubricJudge(model=model, cache=store, retries=0).score(make_ctx()))
    assert failed["rubric_judge"].error is not None
    assert len(store) == 0
    again = by_name(await RubricJudge(model=model, cache=store, retries=0).score(make_ctx()))
    assert again["rubric_judge"].value is True
    assert len(store) == 1


async def test_each_sample_has_its_own_entry() -> None:
    store = InMemoryJudgeCache()
    model = FakeJudge([answer(accuracy=5), answer(accuracy=3)])
    first = by_name(await RubricJudge(model=model, cache=store, samples=2).score(make_ctx()))
    again = by_name(await RubricJudge(model=model, cache=store, samples=2).score(make_ctx()))
    assert len(store) == 2 and len(model.calls) == 2
    assert first["rubric_judge"].metadata["unstable"] is again["rubric_judge"].metadata["unstable"] is True
    assert [s["cached"] for s in again["rubric_judge"].metadata["samples"]] == [True, True]


async def test_corrupt_entry_is_asked_again() -> None:
    store = InMemoryJudgeCache()
    model = FakeJudge([answer(), answer(accuracy=2)])
    await RubricJudge(model=model, cache=store).score(make_ctx())
    (key,) = store._items
    store.set(key, {"scores": {"accuracy": 9}})
    scores = by_name(await RubricJudge(model=model, cache=store).score(make_ctx()))
    assert len(model.calls) == 2
    assert scores["rubric_judge.accuracy"].metadata["score"] == 2
