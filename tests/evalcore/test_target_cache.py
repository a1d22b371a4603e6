"""The target response cache (evalcore.target_cache): what its key covers, what a hit looks like,
and what is never cached. In process, no Django."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from evalcore.runner import run_eval
from evalcore.runtime.agent import Agent
from evalcore.runtime.scripted import ScriptedModel
from evalcore.target_cache import (
    METADATA_KEY,
    InMemoryTargetCache,
    SqliteTargetCache,
    cached_target,
    fingerprint,
    is_hit,
    target_cache_key,
    target_identity,
)
from evalcore.targets import resolve_target
from evalcore.tracing import TraceEvent
from evalcore.types import Case, CaseResult, TargetOutput


class Counting:
    """A target that counts its calls; ``fail`` inputs raise, ``none`` returns None."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, text: Any) -> Any:
        self.calls += 1
        if text == "fail":
            raise RuntimeError("endpoint down")
        if text == "none":
            return None
        return TargetOutput(output=str(text).upper(), model="m1", tokens_in=7, tokens_out=3)


class Sink:
    """Keeps every result and trace event of one run."""

    def __init__(self) -> None:
        self.results: list[CaseResult] = []
        self.events: list[TraceEvent] = []

    def on_event(self, event: TraceEvent) -> None:
        self.events.append(event)

    def on_result(self, result: CaseResult) -> None:
        self.results.append(result)

    def flush(self) -> None:
        return None


def run(cases: list[Case], target: Any, **kwargs: Any) -> Sink:
    sink = Sink()
    asyncio.run(run_eval(cases, target, ["exact_match"], sink=sink, concurrency=2, **kwargs))
    return sink


def wrap(fn: Any, cache: Any, *, variant: str = "v1") -> Any:
    # a Counting's public counter is in its fingerprint: name the target by its class here
    ident = target_identity(target_id="t", variant=variant, target=type(fn) if isinstance(fn, Counting) else fn)
    return cached_target(resolve_target(fn), cache=cache, identity=ident, target_id="t", variant=variant)


CASES = [Case(id=f"c{i}", input=w, expected=w.upper()) for i, w in enumerate(["a", "b", "fail", "none"])]


def test_a_second_run_calls_nothing_that_answered_and_marks_every_hit() -> None:
    target, cache = Counting(), InMemoryTargetCache()
    first = run(CASES, wrap(target, cache))
    assert target.calls == 4 and len(cache) == 2  # the raising and the None case are not stored
    assert all(not is_hit(r.run.metadata) for r in first.results)

    second = run(CASES, wrap(target, cache))
    assert target.calls == 6  # only the two errored cases were called again
    by_id = {r.case.id: r for r in second.results}
    for case_id in ("c0", "c1"):
        record = by_id[case_id].run
        assert record.output == {"c0": "A", "c1": "B"}[case_id] and record.model == "m1"
        mark = record.metadata[METADATA_KEY]
        assert mark["hit"] is True and mark["source_run_id"].endswith(f":{case_id}")
        assert (mark["tokens_in"], mark["tokens_out"]) == (7, 3)
        assert (record.tokens_in, record.tokens_out) == (0, 0)  # nothing spent this time
        spans = [e for e in second.events if e.run_id == record.run_id and e.name == "target_cache hit"]
        assert spans, "the trace says the answer came from the cache"
    assert by_id["c2"].run.error is not None and not is_hit(by_id["c2"].run.metadata)
    assert by_id["c0"].status.value == "passed"


def test_the_key_changes_with_variant_input_repeat_model_parameters_and_code(tmp_path: Path) -> None:
    model = ScriptedModel(["x"])
    base = target_identity(target_id="t", variant="v", target=Agent(model, instructions="short", temperature=0.0))
    assert base == target_identity(target_id="t", variant="v", target=Agent(model, instructions="short", temperature=0))
    others = {
        target_identity(target_id="t", variant="w", target=Agent(model, instructions="short", temperature=0.0)),
        target_identity(target_id="u", variant="v", target=Agent(model, instructions="short", temperature=0.0)),
        target_identity(target_id="t", variant="v", target=Agent(model, instructions="long", temperature=0.0)),
        target_identity(target_id="t", variant="v", target=Agent(model, instructions="short", temperature=0.7)),
        target_identity(
            target_id="t", variant="v", target=Agent(model, instructions="short", temperature=0.0), models={"run": "m2"}
        ),
    }
    assert base not in others and len(others) == 5
    module = tmp_path / "agent.py"
    module.write_text("x = 1\n")
    a = target_identity(target_id="t", variant="v", target=None, module=module)
    module.write_text("x = 2\n")
    assert a != target_identity(target_id="t", variant="v", target=None, module=module)
    assert target_cache_key(base, input="q") != target_cache_key(base, input="q ")
    assert target_cache_key(base, input="q") != target_cache_key(base, input="q", repeat_index=1)


def test_fingerprints_follow_partials_closures_and_bytecode_but_not_counters() -> None:
    def answer(text: str, style: str = "plain") -> str:
        return text

    assert fingerprint(functools.partial(answer, style="a")) != fingerprint(functools.partial(answer, style="b"))

    def make(prompt: str) -> Any:
        def inner(text: str) -> str:
            return prompt + text

        return inner

    assert fingerprint(make("p1")) != fingerprint(make("p2"))
    assert fingerprint(make("p1")) == fingerprint(make("p1"))

    def other(text: str) -> str:
        return text + "!"

    assert fingerprint(answer)["code"] != fingerprint(other)["code"]
    model = ScriptedModel(["x"])
    before = fingerprint(Agent(model))
    model.calls.clear()  # state that changes as it runs does not change a chat model's print
    model.retry_count = 3  # type: ignore[attr-defined]
    assert fingerprint(Agent(model)) == before


def test_repeats_are_cached_apart() -> None:
    target, cache = Counting(), InMemoryTargetCache()
    run(CASES[:1], wrap(target, cache), repeat=3)
    assert target.calls == 3 and len(cache) == 3
    run(CASES[:1], wrap(target, cache), repeat=3)
    assert target.calls == 3


def test_a_conversation_played_turn_by_turn_is_never_cached() -> None:
    calls: list[str] = []

    async def chat(text: str, session: Any) -> str:
        calls.append(text)
        return f"ok {len(session.history)}"

    case = Case(id="conv", input={"turns": ["hi", "bye"]})
    cache = InMemoryTargetCache()
    for _ in range(2):
        store = run([case], wrap(chat, cache))
        assert store.results[0].run.metadata[METADATA_KEY] == {"hit": False, "skipped": "conversation"}
    assert calls == ["hi", "bye", "hi", "bye"] and len(cache) == 0


def test_the_sqlite_cache_survives_reopening_and_clears_by_target(tmp_path: Path) -> None:
    path = tmp_path / "target_cache.sqlite3"
    target = Counting()
    with SqliteTargetCache(path) as cache:
        run(CASES[:2], wrap(target, cache))
        run(CASES[:2], wrap(target, cache, variant="v2"))
    assert target.calls == 4
    with SqliteTargetCache(path) as cache:
        run(CASES[:2], wrap(target, cache))
        assert target.calls == 4
        assert [(s.target_id, s.variant, s.entries) for s in cache.stats()] == [("t", "v1", 2), ("t", "v2", 2)]
        assert cache.clear(target_id="t", variant="v2") == 2
        assert cache.clear() == 2 and len(cache) == 0
        with pytest.raises(ValueError, match="needs its target id"):
            cache.clear(variant="v1")
