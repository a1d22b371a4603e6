"""Inference: one case through the target -> a :class:`~evalcore.types.RunRecord` (the *run*).

:func:`run_case` never raises for anything the target does: a target that raises (any
``BaseException``: its own ``CancelledError``, ``SystemExit``, ``KeyboardInterrupt``), hangs
past the timeout or returns nothing usable gives a record with its error kept. Scoring is a
separate step (:mod:`evalcore.scoring`), so a stored run can be scored again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import types
from collections.abc import Callable
from typing import Any

from evalcore._util.eager import resume
from evalcore.capture import Captured, capturing, new_capture
from evalcore.interrupts import (
    foreign_error,
    raised_by_code,
    signal_count,
)
from evalcore.jsonvalue import NotJSONError, to_json, type_name
from evalcore.processes import process_scope
from evalcore.targets import ResolvedTarget, RunContext, preview
from evalcore.tracing import NullSpan, TraceEvent, Tracer
from evalcore.types import Case, ErrorInfo, RunRecord, TargetOutput


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
    record = RunRecord(
        case_id=case.id,
        run_id=run_id,
        trace_id=run_id,
        repeat_index=repeat_index,
        started_at=time.time(),
        metadata={"eval_run_id": eval_run_id, "variant": variant, "split": case.split, **(run_metadata or {})},
    )
    started = time.perf_counter()
    signals_before = signal_count()
    span_kind = "node" if target.kind == "node" else "invoke_agent"
    attempt = 0
    printed = new_capture()
    while True:
        try:
            root = (
                contextlib.nullcontext(NullSpan())
                if target.self_traced
                else tracer.span(span_kind, target.name, input_preview=preview(case.input))
            )
            with root as span, capturing(printed):
                value = await _call_target(target, case.input, ctx, timeout_s)
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
            if not raised_by_code(exc, signals_before):
                raise  # our own cancellation, or a real Ctrl-C / termination signal
            record.error = foreign_error(exc, "target")
            tracer.error("target_exit", type=record.error.type, message=record.error.message)
            break
    _trace_printed(tracer, printed)
    record.elapsed_ms = (time.perf_counter() - started) * 1000.0
    record.metadata.update(ctx.metadata)
    if attempt:
        record.metadata["attempts"] = attempt + 1
    try:
        record.metadata = to_json(record.metadata)
    except NotJSONError as exc:
        base_metadata = {"eval_run_id": eval_run_id, "variant": variant, "split": case.split, **(run_metadata or {})}
        record.metadata = to_json(base_metadata)
        record.output = None
        record.error = ErrorInfo("UnusableOutputError", f"target metadata is not JSON: {exc}")
    return record, tracer


async def _call_target(target: ResolvedTarget, value: Any, ctx: RunContext, timeout_s: float | None) -> Any:
    """``await target.fn(value, ctx)`` within ``timeout_s``, started eagerly: a target that finishes
    without waiting (a no-op, a cache hit) costs no timer; one that waits is bounded from the
    moment it started (:mod:`evalcore._util.eager`). Subprocesses it starts run in process groups of
    their own, killed when the call times out (:mod:`evalcore.processes`)."""
    with process_scope(kill_on_exit=False) as processes:
        try:
            return await _bounded_call(target, value, ctx, timeout_s)
        except TimeoutError:
            processes.kill()  # abandoned: nothing it started outlives it (evalcore.processes)
            raise
        finally:
            processes.sweep()


async def _bounded_call(target: ResolvedTarget, value: Any, ctx: RunContext, timeout_s: float | None) -> Any:
    loop = asyncio.get_running_loop()
    deadline = None if timeout_s is None else loop.time() + timeout_s
    call = target.fn(value, ctx)
    if type(call) is not types.CoroutineType:  # another awaitable: awaited as it is
        async with asyncio.timeout_at(deadline):
            return await call
    try:
        first = call.send(None)
    except StopIteration as stop:
        return stop.value
    async with asyncio.timeout_at(deadline):
        return await resume(call, first)


def _trace_printed(tracer: Tracer, printed: dict[str, Captured]) -> None:
    """What the target printed, one ``message`` event per stream that got text (``role`` the
    stream's name, ``content`` the kept text, ``bytes`` all it wrote, ``truncated``)."""
    for name, captured in printed.items():
        if captured.total:
            tracer.message(name, role=name, content=captured.text(), bytes=captured.total, truncated=captured.truncated)


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
