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

Inference (:func:`run_case`) and scoring (:func:`score_run`) are separate, so stored runs can be
scored again (:func:`rescore`) without calling the target.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import time
import types
import uuid
from collections.abc import AsyncIterable, Callable, Container, Iterable, Sequence
from typing import Any

from evalcore.interrupts import counting_signals, signal_count, stop_on_ctrl_c, waking_on_signals
from evalcore.jsonvalue import NotJSONError, to_json, type_name
from evalcore.report import EvalReport, ReportBuilder
from evalcore.scorers.base import ScoreContext, Scorer, ScorerServices
from evalcore.scorers.registry import resolve_scorers
from evalcore.store import EvalSink, NullSink
from evalcore.targets import ResolvedTarget, RunContext, preview, resolve_target
from evalcore.threads import run_blocking
from evalcore.tracing import NullSpan, TraceEvent, Tracer
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord, Score, TargetOutput

DEFAULT_SCORER_TIMEOUT_S = 120.0
"""Default limit on one scorer call (the judge included), seconds."""


class NoOutputError(Exception):
    """The target returned ``None`` (nothing usable)."""


class UnusableOutputError(Exception):
    """The target returned a value that cannot be stored as JSON (NaN, an arbitrary object...).

    The message names the type: ``target output of type X is not JSON: ...`` (see
    :mod:`evalcore.jsonvalue` for what is converted).
    """


class TransientError(Exception):
    """Raise (or subclass) in a target for an error worth retrying (rate limit, 5xx)."""


def make_run_id(eval_run_id: str, case_id: str, repeat_index: int, repeat: int) -> str:
    """``<eval run id>:<case id>``, with ``#<repeat index>`` appended when repeat > 1."""
    base = f"{eval_run_id}:{case_id}"
    return f"{base}#{repeat_index}" if repeat > 1 else base


async def run_case(
    case: Case,
    target: ResolvedTarget,
    *,
    eval_run_id: str,
    repeat_index: int = 0,
    repeat: int = 1,
    timeout_s: float | None = 60.0,
    variant: str | None = None,
    on_event: Callable[[TraceEvent], None] | None = None,
    retries: int = 0,
    retry_backoff_s: float = 0.5,
    run_metadata: dict[str, Any] | None = None,
) -> tuple[RunRecord, Tracer]:
    """Run the target on one case. Never raises (except on cancellation).

    Returns:
        The run record (output or error, timings, tokens) and the run's tracer (its
        ``events`` are the trace so far; scorers such as the judge keep recording on it).
    """
    run_id = make_run_id(eval_run_id, case.id, repeat_index, repeat)
    tracer = Tracer(trace_id=run_id, run_id=run_id, callback=on_event, keep=True)
    ctx = RunContext(case=case, tracer=tracer, run_id=run_id, trace_id=run_id, eval_run_id=eval_run_id, variant=variant)
    base_metadata = {"eval_run_id": eval_run_id, "variant": variant, "split": case.split, **(run_metadata or {})}
    record = RunRecord(
        case_id=case.id,
        run_id=run_id,
        trace_id=run_id,
        repeat_index=repeat_index,
        started_at=time.time(),
        metadata=dict(base_metadata),
    )
    started = time.perf_counter()
    signals_before = signal_count()
    span_kind = "node" if target.kind == "node" else "invoke_agent"
    attempt = 0
    while True:
        try:
            root = (
                contextlib.nullcontext(NullSpan())
                if target.self_traced
                else tracer.span(span_kind, target.name, input_preview=preview(case.input))
            )
            with root as span:
                async with asyncio.timeout(timeout_s):
                    value = await target.fn(case.input, ctx)
                output = _accept_output(value, record)
                span.set(
                    output_preview=preview(output),
                    tokens_in=record.tokens_in,
                    tokens_out=record.tokens_out,
                    model=record.model,
                )
            record.output = output
            record.error = None
            break
        except TimeoutError as exc:
            if not _timed_out_by_us(exc, started, timeout_s) and attempt < retries:
                attempt += 1
                await asyncio.sleep(retry_backoff_s * 2 ** (attempt - 1))
                continue
            message = f"target exceeded the {timeout_s:g} s timeout" if timeout_s else str(exc)
            record.error = ErrorInfo("Timeout", message)
            tracer.error("timeout", message=message)
            break
        except Exception as exc:  # noqa: BLE001 - the runner never raises for a target
            if isinstance(exc, TransientError | ConnectionError) and attempt < retries:
                attempt += 1
                await asyncio.sleep(retry_backoff_s * 2 ** (attempt - 1))
                continue
            record.error = ErrorInfo.from_exception(exc)
            break
        except BaseException as exc:
            if not _raised_by_code(exc, signals_before):
                raise  # our own cancellation, or a real Ctrl-C / termination signal
            record.error = _foreign_error(exc, "target")
            tracer.error("target_exit", type=record.error.type, message=record.error.message)
            break
    record.elapsed_ms = (time.perf_counter() - started) * 1000.0
    record.metadata.update(ctx.metadata)
    if attempt:
        record.metadata["attempts"] = attempt + 1
    try:
        record.metadata = to_json(record.metadata)
    except NotJSONError as exc:
        record.metadata = to_json(base_metadata)
        record.output = None
        record.error = ErrorInfo("UnusableOutputError", f"target metadata is not JSON: {exc}")
    return record, tracer


def _raised_by_code(exc: BaseException, signals_before: int) -> bool:
    """True when a non-``Exception`` came from the called code itself, not from outside.

    ``CancelledError`` is ours when this task has a pending cancel request (a timeout, the run
    being stopped); otherwise the code raised it. ``KeyboardInterrupt`` / ``SystemExit`` are a
    signal's (Ctrl-C, a worker told to stop) when a signal arrived during the call.
    """
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is not None and task.cancelling() == 0
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return signal_count() == signals_before
    return not isinstance(exc, GeneratorExit)


def _foreign_error(exc: BaseException, who: str) -> ErrorInfo:
    """The error kept for a ``BaseException`` raised by a target's or scorer's own code."""
    kind = type(exc).__name__
    detail = str(exc)
    if isinstance(exc, SystemExit):
        message = f"the {who} called sys.exit({exc.code!r})"
    elif isinstance(exc, KeyboardInterrupt):
        message = f"the {who} raised KeyboardInterrupt itself (not a Ctrl-C)" + (f": {detail}" if detail else "")
    elif isinstance(exc, asyncio.CancelledError):
        message = f"the {who} raised CancelledError itself (not a cancellation of the run)" + (
            f": {detail}" if detail else ""
        )
    else:
        message = f"{detail or repr(exc)} (a BaseException subclass raised by the {who})"
    return ErrorInfo(kind, message)


def _timed_out_by_us(exc: TimeoutError, started: float, timeout_s: float | None) -> bool:
    return timeout_s is not None and time.perf_counter() - started >= timeout_s * 0.999


def _accept_output(value: Any, record: RunRecord) -> Any:
    if isinstance(value, TargetOutput):
        record.model = value.model
        record.tokens_in = value.tokens_in
        record.tokens_out = value.tokens_out
        record.metadata.update(value.metadata)
        value = value.output
    if value is None:
        raise NoOutputError("target returned None (no usable output)")
    try:
        return to_json(value)
    except NotJSONError as exc:
        raise UnusableOutputError(f"target output of type {type_name(value)} is not JSON: {exc}") from None


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


async def score_run(
    case: Case,
    run: RunRecord,
    scorers: Sequence[Scorer],
    *,
    events: list[TraceEvent] | None = None,
    services: ScorerServices | None = None,
    tracer: Tracer | None = None,
    scorer_timeout_s: float | None = DEFAULT_SCORER_TIMEOUT_S,
) -> list[Score]:
    """Score one run with every scorer. Never raises: a failing scorer gives an errored score.

    An errored run is not scored (its error is its outcome; no fake 0 is recorded). With a
    ``tracer``, scorers that call models (the judge) record their spans in the run's trace.

    Each scorer call is bounded by ``scorer_timeout_s`` seconds (``None``: no limit); past it
    the call is abandoned and its scores are errors naming the timeout. A scorer whose
    ``score`` is a plain ``def`` runs on a daemon thread, off the event loop (see
    :mod:`evalcore.threads`). Anything a scorer raises, ``BaseException`` included (its own
    ``sys.exit``, ``KeyboardInterrupt``, ``CancelledError``), is that scorer's error; only our
    own cancellation and a real Ctrl-C propagate. Scores are converted to JSON values here; a
    score that cannot be (e.g. an object in its metadata) is an error naming the type.
    """
    if run.error is not None:
        return []
    injected = services or ScorerServices()
    ctx = ScoreContext(
        case=case,
        output=run.output,
        run=run,
        events=events or [],
        judge=injected.judge,
        judge_cache=injected.judge_cache,
        tracer=tracer,
    )
    scores: list[Score] = []
    for scorer in scorers:
        signals_before = signal_count()
        limit = asyncio.timeout(scorer_timeout_s)
        try:
            produced = await _call_scorer(scorer, ctx, limit)
            batch = produced if isinstance(produced, list) else [produced]
            for score in batch:
                if not isinstance(score, Score):
                    raise TypeError(f"scorer returned {type(score).__name__}, not Score")
            scores.extend(_storable_score(score) for score in batch)
        except Exception as exc:  # noqa: BLE001 - a scorer failure is data, not a crash
            # every score the scorer would have given is marked failed, so each of its metrics
            # shows the failure in its n/total (e.g. citation_set.recall n=9/10)
            if isinstance(exc, TimeoutError) and limit.expired():
                names = _score_names(scorer)
                label = names[0] if len(names) == 1 else scorer.name  # the name the user sees
                message = f"Timeout: scorer {label!r} exceeded the {scorer_timeout_s:g} s scorer timeout"
            else:
                message = f"{type(exc).__name__}: {exc}"
            scores.extend(Score.failure(name, message) for name in _score_names(scorer))
        except BaseException as exc:
            if not _raised_by_code(exc, signals_before):
                raise
            error = _foreign_error(exc, "scorer")
            scores.extend(Score.failure(name, f"{error.type}: {error.message}") for name in _score_names(scorer))
    return scores


_ASYNC_SCORE: dict[type, bool] = {}


async def _call_scorer(scorer: Scorer, ctx: ScoreContext, limit: asyncio.Timeout) -> Any:
    """``scorer.score(ctx)`` within ``limit``: awaited when async, on a daemon thread when a ``def``.

    An async scorer is started eagerly: one that finishes without waiting on anything (every
    built-in check) returns at once, with no timer to schedule; one that waits is resumed
    under ``limit``.
    """
    method = scorer.score
    is_async = _ASYNC_SCORE.get(type(scorer))
    if is_async is None:
        is_async = _ASYNC_SCORE[type(scorer)] = inspect.iscoroutinefunction(method)
    if is_async:
        coro = method(ctx)
        try:
            first = coro.send(None)
        except StopIteration as stop:
            return stop.value  # finished without suspending: nothing to bound
        async with limit:
            return await _resume(coro, first)
    async with limit:
        produced = await run_blocking(method, ctx)
        if inspect.isawaitable(produced):
            produced = await produced
    return produced


@types.coroutine
def _resume(coro: Any, first: Any) -> Any:
    """Drive a coroutine that already ran up to its first suspension (``first``) to its end."""
    value = first
    while True:
        try:
            sent = yield value
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown in by the task (e.g. cancellation)
            try:
                value = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                value = coro.send(sent)
            except StopIteration as stop:
                return stop.value


_SCORE_VALUE_TYPES = (bool, float, str, type(None))


def _storable_score(score: Score) -> Score:
    """The score with JSON-only metadata; a score that has none is an error naming the type."""
    try:
        if score.explanation is not None and not isinstance(score.explanation, str):
            raise NotJSONError(type_name(score.explanation), "explanation", "an explanation must be text")
        if score.metadata:
            score.metadata = to_json(score.metadata)
        if type(score.value) not in _SCORE_VALUE_TYPES:
            score.value = to_json(score.value)
        if score.passed is not None and type(score.passed) is not bool:
            score.passed = to_json(score.passed)
            if not isinstance(score.passed, bool):
                raise NotJSONError(type_name(score.passed), "passed", "a verdict must be a bool or None")
        if score.value is not None and not isinstance(score.value, bool | float | str):
            raise NotJSONError(type_name(score.value), "value", "a score value must be bool, 0..1 float or str")
    except NotJSONError as exc:
        return Score.failure(score.name, f"UnusableOutputError: score {score.name!r} is not JSON: {exc}")
    return score


def _score_names(scorer: Scorer) -> list[str]:
    try:
        names = list(scorer.score_names)
    except Exception:  # noqa: BLE001 - a broken score_names must not hide the real failure
        names = []
    return names or [scorer.name]


async def _aiter_cases(cases: Iterable[Case] | AsyncIterable[Case]):  # type: ignore[no-untyped-def]
    if isinstance(cases, AsyncIterable):
        async for case in cases:
            yield case
    else:
        for case in cases:
            yield case


async def _run_pool(
    items: AsyncIterable[Any],
    worker: Callable[[Any], Any],
    concurrency: int,
) -> None:
    """Feed items to ``concurrency`` workers through a bounded queue (O(concurrency) memory).

    If a worker fails (a sink that cannot store results), everything stops and that error is
    raised: the producer must not wait forever on a queue nobody drains.
    """
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=concurrency)
    done = object()

    async def consume() -> None:
        while True:
            item = await queue.get()
            if item is done:
                return
            await worker(item)

    async def produce() -> None:
        async for item in items:
            await queue.put(item)
        for _ in range(concurrency):
            await queue.put(done)

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(produce())
            for _ in range(concurrency):
                group.create_task(consume())
    except BaseExceptionGroup as group_error:
        # callers expect the error itself (e.g. the store's), not a group of one
        raise group_error.exceptions[0] from None


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
    resolved = resolve_target(target)
    scorer_objs = resolve_scorers(scorers)
    eval_run_id = eval_run_id or uuid.uuid4().hex
    sink = sink or NullSink()
    builder = ReportBuilder(eval_run_id)
    started = time.perf_counter()

    async def items():  # type: ignore[no-untyped-def]
        async for case in _aiter_cases(cases):
            for index in range(repeat):
                if (case.id, index) not in skip:
                    yield case, index

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

    await _interruptible(_run_pool(items(), work, concurrency))
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

    async def items():  # type: ignore[no-untyped-def]
        if isinstance(runs, AsyncIterable):
            async for pair in runs:
                yield pair
        else:
            for pair in runs:
                yield pair

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

    await _interruptible(_run_pool(items(), work, concurrency))
    await asyncio.to_thread(sink.flush)
    return builder.build(elapsed_s=time.perf_counter() - started)
