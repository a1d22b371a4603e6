"""The runner: cases x target x scorers -> per-case results (to a sink) and an aggregate report.

``run_eval`` never raises for anything a target or a scorer does: a target that raises (any
``BaseException``: its own ``CancelledError``, ``SystemExit``, ``KeyboardInterrupt``), hangs
past the timeout or returns nothing usable gives an *errored* case with the error kept; a
scorer that raises or exceeds its own timeout gives that score an error and the run goes on.
Every case selected gives exactly one result (the report's ``n`` is cases x repeats).
A real Ctrl-C (a signal, told apart from a target's own ``KeyboardInterrupt`` by
:mod:`evalcore.interrupts`) stops the run: in-flight cases are cancelled, finished ones were
already handed to the sink, and ``KeyboardInterrupt`` is raised. Memory stays O(concurrency):
cases are pulled from the iterable as workers free up, and results are folded into the report
and handed to the sink, never accumulated.

Inference (:func:`evalcore.inference.run_case`) and scoring (:func:`evalcore.scoring.score_run`)
are separate, so stored runs can be scored again (:func:`rescore`) without calling the target.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Container, Iterable, Sequence
from typing import Any

from evalcore.capture import routed_streams
from evalcore.inference import make_run_id, run_case
from evalcore.interrupts import counting_signals, stop_on_ctrl_c, waking_on_signals
from evalcore.processes import process_scope
from evalcore.report import EvalReport, ReportBuilder
from evalcore.scorer_registry import resolve_scorers
from evalcore.scorers.base import ScorerServices
from evalcore.scoring import DEFAULT_SCORER_TIMEOUT_S, score_run
from evalcore.simulator import UserSimulator
from evalcore.store import EvalSink, NullSink
from evalcore.targets import resolve_target
from evalcore.tracing import TraceEvent, Tracer
from evalcore.types import Case, CaseResult, RunRecord


def check_seconds(name: str, value: float | None) -> None:
    """Refuse a duration that is not ``None`` or a finite number > 0 (seconds).

    ``asyncio.timeout(nan)`` never fires and ``inf`` is no limit in disguise; neither is JSON, so
    either would also break the run's stored config.

    Raises:
        ValueError: ``value`` is a bool, not a number, NaN, infinite, zero or negative (the
            message names ``name``).
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0 (seconds) or None, got {value!r}")


async def _run_pool(
    items: Iterable[Any] | AsyncIterable[Any],
    worker: Callable[[Any], Any],
    concurrency: int,
) -> None:
    """Run ``worker`` on every item with ``concurrency`` tasks pulling from one shared iterator
    (items are taken as workers free up: O(concurrency) memory for any number of items).

    A plain iterable is pulled with ``next()``, which never suspends, so the tasks share it with
    no lock; an async iterable is pulled under a lock (only one task may wait on it at a time).
    If a worker fails (a sink that cannot store results), everything stops and that error is
    raised.
    """
    if isinstance(items, AsyncIterable):
        source = aiter(items)
        lock = asyncio.Lock()

        async def consume() -> None:
            while True:
                async with lock:
                    try:
                        item = await anext(source)
                    except StopAsyncIteration:
                        return
                await worker(item)

    else:
        shared = iter(items)

        async def consume() -> None:
            for item in shared:
                await worker(item)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(consume())
    except BaseExceptionGroup as group_error:
        # callers expect the error itself (e.g. the store's), not a group of one
        raise group_error.exceptions[0] from None


def _with_repeats(
    cases: Iterable[Case] | AsyncIterable[Case], repeat: int, skip: Container[tuple[str, int]]
) -> Iterable[tuple[Case, int]] | AsyncIterable[tuple[Case, int]]:
    """``(case, repeat index)`` pairs to run, those in ``skip`` left out; async iff ``cases`` is."""
    if isinstance(cases, AsyncIterable):

        async def pairs() -> AsyncIterator[tuple[Case, int]]:
            async for case in cases:
                for index in range(repeat):
                    if (case.id, index) not in skip:
                        yield case, index

        return pairs()
    if repeat == 1 and not skip:
        return ((case, 0) for case in cases)
    return ((case, index) for case in cases for index in range(repeat) if (case.id, index) not in skip)


async def run_eval(
    cases: Iterable[Case] | AsyncIterable[Case],
    target: Any,
    scorers: Sequence[Any] = (),
    *,
    concurrency: int = 8,
    timeout_s: float | None = 60.0,
    repeat: int = 1,
    sink: EvalSink | None = None,
    eval_run_id: str | None = None,
    variant: str | None = None,
    retries: int = 0,
    services: ScorerServices | None = None,
    run_metadata: dict[str, Any] | None = None,
    skip: Container[tuple[str, int]] = (),
    scorer_timeout_s: float | None = DEFAULT_SCORER_TIMEOUT_S,
    conversation_timeout_s: float | None = None,
    user_simulator: UserSimulator | None = None,
) -> EvalReport:
    """Run every case through the target, score it, stream results to ``sink``, return the report.

    Args:
        cases: Cases (any iterable or async iterable; consumed lazily).
        target: A function, Node, Pipeline, promoted pipeline or agent (see ``resolve_target``).
        scorers: Scorers, scorer specs / CLI strings, or plain predicate functions.
        concurrency: Cases in flight at once (>= 1).
        timeout_s: Per-case limit on the target call, seconds; ``None`` for no limit.
        repeat: Runs per case (>= 1).
        sink: Receives trace events and case results (e.g. an ``EvalStore``). A sink with an
            async ``case_starting(run_id)`` has it awaited before each target call.
        eval_run_id: Id stamped on runs; a new uuid4 hex when omitted.
        variant: A/B label stamped on runs.
        retries: Extra attempts on transient target errors.
        services: Helpers injected into every scorer (e.g. ``ScorerServices(judge=client)``).
        run_metadata: Extra values stamped on every run's metadata.
        skip: ``(case id, repeat index)`` pairs already done (resuming an interrupted run);
            they are not run and not in the report.
        scorer_timeout_s: Limit on each scorer call (the judge included), seconds; ``None``
            for no limit. A timed-out score is an error; the run goes on.
        conversation_timeout_s: Limit on a whole conversation case, seconds (``None``: none);
            ``timeout_s`` then bounds each of its turns (see :mod:`evalcore.conversations`).
        user_simulator: Plays the user of scenario cases without a script (an
            :class:`~evalcore.simulator.LLMUser`); ``None``: such cases are errored.

    Returns:
        The aggregate :class:`EvalReport` (of the cases run now).

    Raises:
        ValueError: On ``concurrency < 1``, ``repeat < 1``, or a timeout that is not ``None`` or a
            finite number > 0 (a usage error, before any case runs).
        TypeError: When ``target`` or a scorer spec is not usable (before any case runs).
        KeyboardInterrupt: The run was stopped by Ctrl-C (see :mod:`evalcore.interrupts`); the
            cases finished before it were handed to the sink (the sink is not flushed).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    check_seconds("timeout_s", timeout_s)
    check_seconds("scorer_timeout_s", scorer_timeout_s)
    check_seconds("conversation_timeout_s", conversation_timeout_s)
    resolved = resolve_target(target)
    scorer_objs = resolve_scorers(scorers)
    eval_run_id = eval_run_id or uuid.uuid4().hex
    sink = sink or NullSink()
    builder = ReportBuilder(eval_run_id)
    started = time.perf_counter()

    case_starting = getattr(sink, "case_starting", None)

    async def work(item: tuple[Case, int]) -> None:
        case, index = item
        if case_starting is not None:
            # a durable sink records the case as in flight (and commits what finished before)
            await case_starting(make_run_id(eval_run_id, case.id, index, repeat))
        run, tracer = await run_case(
            case,
            resolved,
            eval_run_id=eval_run_id,
            repeat_index=index,
            repeat=repeat,
            timeout_s=timeout_s,
            variant=variant,
            on_event=sink.on_event,
            retries=retries,
            run_metadata=run_metadata,
            conversation_timeout_s=conversation_timeout_s,
            user_simulator=user_simulator,
        )
        scores = await score_run(
            case,
            run,
            scorer_objs,
            events=list(tracer.events),
            services=services,
            tracer=tracer,
            scorer_timeout_s=scorer_timeout_s,
        )
        result = CaseResult(case=case, run=run, scores=scores)
        builder.add(result)
        sink.on_result(result)

    # what the cases leave running ends with the run; what they print goes to their traces
    with process_scope(), routed_streams():
        await _interruptible(_run_pool(_with_repeats(cases, repeat, skip), work, concurrency))
    await asyncio.to_thread(sink.flush)
    return builder.build(elapsed_s=time.perf_counter() - started)


async def _interruptible(pool: Any) -> None:
    """Await the pool; a first Ctrl-C (under ``two_stage_ctrl_c``) cancels it -> KeyboardInterrupt.

    While the pool runs, SIGINT / SIGTERM are counted, so a target's own ``KeyboardInterrupt``
    or ``SystemExit`` can be told from a signal's.
    """
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    stopped = False

    def stop() -> None:  # runs in the signal handler (main thread)
        nonlocal stopped
        stopped = True
        if task is not None:
            loop.call_soon_threadsafe(task.cancel)

    with counting_signals(), stop_on_ctrl_c(stop), waking_on_signals(loop):
        try:
            await pool
        except asyncio.CancelledError:
            if stopped and task is not None and task.uncancel() == 0:
                raise KeyboardInterrupt("stopped by Ctrl-C") from None
            raise


async def rescore(
    runs: Iterable[tuple[Case, RunRecord]] | AsyncIterable[tuple[Case, RunRecord]],
    scorers: Sequence[Any],
    *,
    eval_run_id: str | None = None,
    sink: EvalSink | None = None,
    concurrency: int = 8,
    services: ScorerServices | None = None,
    events_for: Callable[[str], list[TraceEvent]] | None = None,
    scorer_timeout_s: float | None = DEFAULT_SCORER_TIMEOUT_S,
) -> EvalReport:
    """Score stored runs again without calling the target.

    Args:
        runs: (case, run record) pairs, e.g. from ``EvalStore.iter_runs``.
        scorers: As for :func:`run_eval`.
        eval_run_id: Id of the new eval run; each run record is re-stamped with it.
        sink: Receives the new case results.
        concurrency: Scoring calls in flight (a judge is I/O bound).
        services: Helpers injected into every scorer (the judge model and cache).
        events_for: Looks up a run's stored trace events (for trajectory scorers).
        scorer_timeout_s: Limit on each scorer call, seconds (``None``: none); as in
            :func:`run_eval`.

    Returns:
        The report of the re-scored run.

    Raises:
        ValueError: ``scorer_timeout_s`` is neither ``None`` nor a finite number > 0.
        KeyboardInterrupt: Stopped by Ctrl-C (as in :func:`run_eval`).
    """
    check_seconds("scorer_timeout_s", scorer_timeout_s)
    scorer_objs = resolve_scorers(scorers)
    eval_run_id = eval_run_id or uuid.uuid4().hex
    sink = sink or NullSink()
    builder = ReportBuilder(eval_run_id)
    started = time.perf_counter()

    async def work(pair: tuple[Case, RunRecord]) -> None:
        case, source = pair
        events = (events_for(source.run_id) or []) if events_for else []
        # the judge's spans are appended to the stored trace, after its last event
        tracer = Tracer(
            source.trace_id,
            source.run_id,
            callback=sink.on_event,
            keep=False,
            first_seq=max((e.seq for e in events), default=-1) + 1,
        )
        scores = await score_run(
            case,
            source,
            scorer_objs,
            events=events,
            services=services,
            tracer=tracer,
            scorer_timeout_s=scorer_timeout_s,
        )
        result = CaseResult(case=case, run=source, scores=scores)
        builder.add(result)
        sink.on_result(result)

    with process_scope():  # what the scorers leave running ends with the run (evalcore.processes)
        await _interruptible(_run_pool(runs, work, concurrency))
    await asyncio.to_thread(sink.flush)
    return builder.build(elapsed_s=time.perf_counter() - started)
