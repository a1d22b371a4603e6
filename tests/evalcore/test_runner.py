"""The runner never raises for what a target or a scorer does, and keeps memory bounded."""

from __future__ import annotations

import asyncio
import threading
import tracemalloc
from typing import Any

import pytest

from evalcore import Case, InMemoryEvalStore, Score, TargetOutput, run_eval
from evalcore.report import ReportBuilder
from evalcore.runner import rescore
from evalcore.scorers.base import ScoreContext, Scorer
from evalcore.targets import Pipeline, as_agent, resolve_target


def cases(n: int, split: str = "dev") -> list[Case]:
    return [Case(f"c{i}", i, i, split=split) for i in range(n)]


async def test_target_that_raises_gives_errored_cases_with_the_error_kept():
    def boom(x):
        raise RuntimeError(f"bad input {x}")

    store = InMemoryEvalStore()
    report = await run_eval(cases(3), boom, ["exact_match"], sink=store, eval_run_id="r1")
    assert (report.n, report.passed, report.failed, report.errored) == (3, 0, 0, 3)
    assert report.target_errors == 3
    result = store.results["r1"]["c1"]
    assert result.status.value == "errored"
    assert (result.run.error.type, result.run.error.message) == ("RuntimeError", "bad input 1")
    assert result.scores == []  # no fake 0 for an errored target


async def test_target_that_hangs_times_out_and_the_run_goes_on():
    async def maybe_hang(x):
        if x == 1:
            await asyncio.sleep(3600)
        return x

    store = InMemoryEvalStore()
    # the deadline only bounds a broken timeout (the target would hang an hour): no clock assertion
    report = await asyncio.wait_for(
        run_eval(cases(4), maybe_hang, ["exact_match"], timeout_s=0.2, sink=store, eval_run_id="r"), timeout=120
    )
    assert (report.passed, report.errored) == (3, 1)
    assert store.results["r"]["c1"].run.error.type == "Timeout"


async def test_sync_target_that_hangs_times_out_too():
    release = threading.Event()

    def sleepy(x):
        if x == 0:
            release.wait(120)  # hangs until the test is over (a thread cannot be cancelled)
        return x

    try:
        # a timeout generous enough for the quick case on a busy machine; the hung one exceeds any
        report = await asyncio.wait_for(run_eval(cases(2), sleepy, ["exact_match"], timeout_s=3), timeout=120)
    finally:
        release.set()
    assert (report.passed, report.errored) == (1, 1)


async def test_target_returning_none_or_nan_is_errored_not_failed():
    store = InMemoryEvalStore()
    report = await run_eval(
        cases(2), lambda x: None if x == 0 else float("nan"), ["exact_match"], sink=store, eval_run_id="r"
    )
    assert report.errored == 2 and report.failed == 0
    assert store.results["r"]["c0"].run.error.type == "NoOutputError"
    assert store.results["r"]["c1"].run.error.type == "UnusableOutputError"


async def test_scorer_that_raises_records_a_score_error_and_other_scores_survive():
    class Flaky(Scorer):
        name = "flaky"

        async def score(self, ctx: ScoreContext) -> Score:
            if ctx.case.id == "c0":
                raise ZeroDivisionError("division by zero")
            return Score(self.name, 1.0, passed=True)

    store = InMemoryEvalStore()
    report = await run_eval(cases(3), lambda x: x, [Flaky(), "exact_match"], sink=store, eval_run_id="r")
    scores = {s.name: s for s in store.results["r"]["c0"].scores}
    assert scores["flaky"].error == "ZeroDivisionError: division by zero"
    assert scores["flaky"].value is None and scores["flaky"].passed is None
    assert scores["exact_match"].passed is True
    assert report.metrics["flaky"].n == 2 and report.metrics["flaky"].total == 3
    assert report.metrics["flaky"].mean == 1.0  # the error is not averaged in as a 0
    assert report.errored == 1 and report.scorer_errors == 1


async def test_concurrency_is_bounded_and_used():
    in_flight = peak = 0

    async def target(x):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return x

    await run_eval(cases(40), target, [], concurrency=5)
    assert peak == 5


async def test_repeat_gives_separate_runs_with_indexed_ids():
    store = InMemoryEvalStore()
    report = await run_eval(cases(2), lambda x: x, ["exact_match"], repeat=3, sink=store, eval_run_id="r")
    assert report.n == 6
    assert sorted(store.results["r"]) == [f"c{i}#{k}" for i in range(2) for k in range(3)]


async def test_usage_errors_raise_before_any_case_runs():
    with pytest.raises(ValueError, match="concurrency"):
        await run_eval(cases(1), lambda x: x, [], concurrency=0)
    with pytest.raises(TypeError, match="cannot evaluate"):
        await run_eval(cases(1), 42, [])


async def test_per_split_breakdown_and_stderr():
    mixed = cases(4, "train") + cases(2, "test")
    for i, case in enumerate(mixed):
        case.id = f"k{i}"
    report = await run_eval(mixed, lambda x: x if x % 2 == 0 else -1, ["exact_match"])
    assert set(report.splits) == {"train", "test"}
    assert report.splits["train"].n == 4 and report.splits["train"].passed == 2
    # four pass/fail values, mean 0.5: no standard error below 10 values, Wilson's interval of 2/4
    # (the Welford arithmetic itself: tests/evalcore/test_mutation_kills.py)
    metric = report.splits["train"].metrics["exact_match"]
    assert metric.stderr is None and metric.binary and metric.interval_method == "wilson"
    assert (metric.low, metric.high) == pytest.approx((0.1500, 0.8500), abs=1e-4)


async def test_target_metadata_tokens_and_model_are_recorded():
    store = InMemoryEvalStore()
    report = await run_eval(
        cases(2),
        lambda x: TargetOutput(x, model="m1", tokens_in=10, tokens_out=3),
        ["exact_match"],
        sink=store,
        eval_run_id="r",
    )
    assert (report.tokens_in, report.tokens_out) == (20, 6)
    assert store.results["r"]["c0"].run.model == "m1"


async def test_every_target_kind_resolves_and_pipeline_spans_nest():
    def double(x):
        return x * 2

    async def inc(x, ctx):
        return x + 1

    pipeline = Pipeline([double, inc], name="p")
    assert resolve_target(double).kind == "node"
    assert resolve_target(pipeline).kind == "pipeline"
    assert resolve_target(as_agent(pipeline)).kind == "pipeline"
    store = InMemoryEvalStore()
    report = await run_eval([Case("a", 1, 3)], as_agent(pipeline), ["exact_match"], sink=store, eval_run_id="r")
    assert report.passed == 1
    events = store.events_for("r:a")
    begins = [e for e in events if e.type == "span_begin"]
    # the promoted pipeline opens the root span itself; the runner adds no second one
    assert [e.payload["kind"] for e in begins] == ["invoke_agent", "node", "node"]
    agent, first, second = begins
    assert agent.payload["parent_span_id"] is None
    assert first.payload["parent_span_id"] == agent.payload["span_id"] == second.payload["parent_span_id"]
    assert [e.seq for e in events] == list(range(len(events)))


async def test_rescore_uses_stored_outputs_without_calling_the_target():
    calls = 0

    def target(x):
        nonlocal calls
        calls += 1
        return x

    store = InMemoryEvalStore()
    await run_eval(cases(5), target, ["exact_match"], sink=store, eval_run_id="src")
    assert calls == 5
    report = await rescore(store.iter_runs("src"), ["json_match"])
    assert calls == 5 and report.n == 5 and report.metrics["json_match"].mean == 1.0


async def test_memory_stays_bounded_by_concurrency_not_cases():
    async def noop(x):
        return x

    def lazy(n):
        return (Case(f"c{i}", "x" * 200, split="dev") for i in range(n))

    async def peak(n: int) -> int:
        tracemalloc.start()
        await run_eval(lazy(n), noop, [], concurrency=8, sink=InMemoryEvalStore(keep_events=False, keep_results=False))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = await peak(500), await peak(5000)
    assert large < small * 2  # 10x the cases, nowhere near 10x the memory


def test_report_builder_is_incremental():
    builder = ReportBuilder("r")
    assert builder.build().n == 0


def test_span_previews_are_json_not_python_reprs() -> None:
    """``evalsite trace`` shows output previews: JSON like every other value (issue 11)."""
    from evalcore.targets import preview

    assert preview([{"solve": {"a": 3, "ok": True, "none": None}}]) == '[{"solve": {"a": 3, "ok": true, "none": null}}]'
    assert preview("plain text\nsecond line") == "plain text second line"
    assert preview({"when": object}).startswith('{"when": "<class')
    assert len(preview(list(range(1000)))) == 200


async def test_the_runner_flushes_the_sink_once_after_the_last_result() -> None:
    """``flush`` is part of the sink protocol: called once, after every ``on_result``."""
    from evalcore.store import EvalSink

    calls: list[str] = []

    class Recording:
        def on_event(self, event: Any) -> None:
            return None

        def on_result(self, result: Any) -> None:
            calls.append("result")

        def flush(self) -> None:
            calls.append("flush")

    sink = Recording()
    assert isinstance(sink, EvalSink)
    await run_eval([Case("a", "x", "x"), Case("b", "y", "y")], lambda q: q, ["exact_match"], sink=sink)
    assert calls == ["result", "result", "flush"]
