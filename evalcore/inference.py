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
from evalcore.conversations import (
    Conversation,
    ConversationError,
    Scenario,
    Session,
    conversation_of,
    copy_state,
    scenario_of,
    transcript_of,
)
from evalcore.costs import case_latency, usage_block
from evalcore.interrupts import (
    foreign_error,
    raised_by_code,
    signal_count,
)
from evalcore.jsonvalue import NotJSONError, to_json, type_name
from evalcore.processes import process_scope
from evalcore.simulator import SPAN_KIND as SIMULATOR_SPAN
from evalcore.simulator import SimulatorError, UserReply, UserSimulator, simulator_for
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
    conversation_timeout_s: float | None = None,
    user_simulator: UserSimulator | None = None,
) -> tuple[RunRecord, Tracer]:
    """Run the target on one case. Never raises (except on cancellation).

    A conversation case (:mod:`evalcore.conversations`) is played turn by turn when the target
    is conversational: ``timeout_s`` then bounds each turn and ``conversation_timeout_s`` (``None``:
    no limit) the whole conversation; a turn that raises or times out ends the case as errored
    at that turn, the earlier turns kept in ``metadata["turns"]``. A target that is not
    conversational is called once with the whole input and must return a transcript (one answer
    per turn).

    A scenario case (a simulated user, :func:`~evalcore.conversations.scenario_of`) is played the
    same way, its user messages after the opening from :func:`~evalcore.simulator.simulator_for`:
    the scenario's script, else ``user_simulator`` (an :class:`~evalcore.simulator.LLMUser`; none
    configured makes the case errored). The simulator's calls are ``user_simulator`` spans and
    its usage is ``metadata["simulator"]``, never the target's tokens. The same limits bound the
    simulator: each of its replies gets ``timeout_s`` (or what is left of
    ``conversation_timeout_s``); one that takes longer ends the case as errored (``Timeout``, the
    message naming the user simulator) at that turn, the earlier turns kept.

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
    conversation, problem = _read_conversation(case)
    scenario: Scenario | None = None
    if conversation is None and problem is None:
        scenario, problem = _read_scenario(case)
    if problem is not None:
        record.error = ErrorInfo("ConversationError", f"the case is not a valid conversation: {problem}")
    elif scenario is not None:
        simulator = simulator_for(scenario, user_simulator)
        if not target.conversational:
            record.error = ErrorInfo(
                "UnusableTargetError",
                "a scenario case (a simulated user) needs a conversational target: a function with a 'session' "
                "parameter, or an Agent",
            )
        elif simulator is None:
            record.error = ErrorInfo(
                "SimulatorError",
                "this scenario has no 'script', so an LLM-backed user simulator plays it, and the run has none: "
                "give one (evalsite eval --simulator-model NAME, or run_eval(user_simulator=LLMUser(model)))",
            )
        else:
            await _play_conversation(
                scenario,
                target,
                record=record,
                ctx=ctx,
                timeout_s=timeout_s,
                conversation_timeout_s=conversation_timeout_s,
                printed=printed,
                simulator=simulator,
            )
    elif conversation is not None and target.conversational:
        await _play_conversation(
            conversation,
            target,
            record=record,
            ctx=ctx,
            timeout_s=timeout_s,
            conversation_timeout_s=conversation_timeout_s,
            printed=printed,
        )
    else:
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
        if conversation is not None and record.error is None:
            _read_transcript(record, conversation)
    _trace_printed(tracer, printed)
    record.elapsed_ms = (time.perf_counter() - started) * 1000.0
    record.metadata.update(ctx.metadata)
    record.metadata["usage"] = usage_block(
        latency=case_latency(tracer.events),
        tokens_in=record.tokens_in,
        tokens_out=record.tokens_out,
        model=record.model,
        case_input=case.input,
        output=record.output,
        metadata=record.metadata,
    )
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


def _read_conversation(case: Case) -> tuple[Conversation | None, ConversationError | None]:
    try:
        return conversation_of(case), None
    except ConversationError as exc:
        return None, exc


def _read_scenario(case: Case) -> tuple[Scenario | None, ConversationError | None]:
    try:
        return scenario_of(case), None
    except ConversationError as exc:
        return None, exc


_TURN_METADATA_KEYS = ("tool_calls", "steps", "finish_reason")
"""Per-turn values an agent leaves on ``ctx.metadata``: moved to the turn, never the case's."""


async def _play_conversation(
    conversation: Conversation | Scenario,
    target: ResolvedTarget,
    *,
    record: RunRecord,
    ctx: RunContext,
    timeout_s: float | None,
    conversation_timeout_s: float | None,
    printed: dict[str, Captured],
    simulator: UserSimulator | None = None,
) -> None:
    """Play the turns in order on one :class:`Session`; each turn a ``turn`` span of the trace.

    A :class:`Conversation` plays its fixed user messages; a :class:`Scenario` its opening, then
    what ``simulator`` replies (each reply a ``user_simulator`` span), until the stop rule of
    :mod:`evalcore.conversations` ends it.

    Fills ``record``: ``output`` the transcript (one ``{"final_response", "tool_calls"}`` per
    turn), ``metadata["turns"]`` what each turn played, ``metadata["session_state"]`` the state
    at the end, and for a scenario ``metadata["simulator"]`` (:func:`_simulator_usage`); on a
    turn's error, ``error`` names the turn and ``output`` stays ``None``.
    """
    tracer = ctx.tracer
    case = ctx.case
    session = Session(case=case, state=copy_state(conversation.initial_state), ctx=ctx)
    ctx.session = session
    loop = asyncio.get_running_loop()
    deadline = None if conversation_timeout_s is None else loop.time() + conversation_timeout_s
    span_kind = "node" if target.kind == "node" else "invoke_agent"
    played: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    scenario = conversation if isinstance(conversation, Scenario) else None
    usage = _simulator_usage(simulator) if scenario is not None else None
    total = len(conversation.turns) if isinstance(conversation, Conversation) else conversation.max_turns
    index = -1
    while True:
        index += 1
        number = index + 1
        if isinstance(conversation, Conversation):
            if index >= total:
                break
            user, source = conversation.turns[index].user, None
        elif index == 0:
            user, source = conversation.opening, "opening"
        else:
            assert simulator is not None and usage is not None
            ended = _scenario_end(conversation, played, usage)
            if ended is None:
                ask_limit, ask_whole = _turn_limit(timeout_s, deadline, loop)
                try:
                    if ask_limit is not None and ask_limit <= 0:
                        raise TimeoutError
                    async with asyncio.timeout(ask_limit):
                        reply = await _simulated_reply(simulator, conversation, played, tracer, number, usage)
                except TimeoutError:
                    who = f"the user simulator ({usage['model'] or usage['kind']})"
                    if ask_whole:
                        message = (
                            f"turn {number}: the conversation exceeded the {conversation_timeout_s:g} s conversation "
                            f"timeout while {who} was writing the user's message"
                        )
                    else:
                        message = f"turn {number}: {who} exceeded the {timeout_s:g} s turn timeout"
                    record.error = ErrorInfo("Timeout", message)
                    record.metadata["errored_turn"] = number
                    tracer.error("timeout", message=message, turn=number, role=SIMULATOR_SPAN)
                    break
                except Exception as exc:  # noqa: BLE001 - a simulator's failure errors the case, never the run
                    why = str(exc) if isinstance(exc, SimulatorError) else f"the user simulator failed: {exc!r}"
                    record.error = ErrorInfo("SimulatorError", f"turn {number}: {why}")
                    record.metadata["errored_turn"] = number
                    tracer.error(SIMULATOR_SPAN, message=record.error.message, turn=number)
                    break
                ended = _reply_end(conversation, reply, number)
            if ended is not None:
                usage["stopped"] = ended
                break
            user, source = str(reply.text), "cache" if reply.cached else simulator.kind
        session.turn = index
        history_before = len(session.history)
        scratch = RunRecord(case_id=case.id, run_id=record.run_id, trace_id=record.trace_id)
        entry: dict[str, Any] = {"turn": number, "user": user}
        if source is not None:
            entry["user_from"] = source
        limit, whole = _turn_limit(timeout_s, deadline, loop)
        turn_started = time.perf_counter()
        signals_before = signal_count()
        error: ErrorInfo | None = None
        try:
            with (
                tracer.span("turn", f"turn {number}", turn=number, turns=total, input_preview=preview(user)) as span,
                capturing(printed),
            ):
                if limit is not None and limit <= 0:
                    raise TimeoutError
                root = (
                    contextlib.nullcontext(NullSpan())
                    if target.self_traced
                    else tracer.span(span_kind, target.name, input_preview=preview(user))
                )
                with root as agent_span:
                    value = await _call_target(target, user, ctx, limit)
                    answer = _turn_answer(value, scratch)
                    agent_span.set(output_preview=preview(answer["final_response"]), model=scratch.model)
                span.set(
                    output_preview=preview(answer["final_response"]),
                    tokens_in=scratch.tokens_in,
                    tokens_out=scratch.tokens_out,
                )
        except TimeoutError:
            if whole:
                message = (
                    f"turn {number}: the conversation exceeded the {conversation_timeout_s:g} s conversation timeout"
                )
            else:
                message = f"turn {number}: target exceeded the {timeout_s:g} s turn timeout"
            error = ErrorInfo("Timeout", message)
            tracer.error("timeout", message=message, turn=number)
        except Exception as exc:  # noqa: BLE001 - the runner never raises for a target
            error = ErrorInfo(type(exc).__name__, f"turn {number}: {str(exc) or repr(exc)}")
        except BaseException as exc:
            if not raised_by_code(exc, signals_before):
                raise
            foreign = foreign_error(exc, "target")
            error = ErrorInfo(foreign.type, f"turn {number}: {foreign.message}")
            tracer.error("target_exit", type=error.type, message=error.message, turn=number)
        for key in _TURN_METADATA_KEYS:  # an agent's per-run values belong to this turn
            if key in ctx.metadata:
                entry.setdefault(key, ctx.metadata.pop(key))
        entry["elapsed_ms"] = (time.perf_counter() - turn_started) * 1000.0
        record.tokens_in = _add(record.tokens_in, scratch.tokens_in)
        record.tokens_out = _add(record.tokens_out, scratch.tokens_out)
        record.model = scratch.model or record.model
        if error is not None:
            entry["error"] = {"type": error.type, "message": error.message}
            played.append(entry)
            record.error = error
            record.metadata["errored_turn"] = number
            break
        if not answer["tool_calls"] and isinstance(entry.get("tool_calls"), list):
            answer["tool_calls"] = to_json(entry["tool_calls"])  # recorded on ctx.metadata during the turn
        entry.update(answer)
        played.append(entry)
        answers.append(answer)
        if len(session.history) == history_before:  # the target kept no history itself
            session.history.append({"role": "user", "content": user})
            session.history.append({"role": "assistant", "content": answer["final_response"]})
    ctx.session = None
    record.metadata["turns"] = played
    record.metadata["session_state"] = session.state
    if usage is not None:
        record.metadata["simulator"] = usage
    if record.error is None:
        record.output = answers


def _turn_limit(
    timeout_s: float | None, deadline: float | None, loop: asyncio.AbstractEventLoop
) -> tuple[float | None, bool]:
    """Seconds the next call of a turn (the target's, or the user simulator's) may take: the turn
    timeout, or what is left of the conversation's when that is less (then ``True``: the whole
    conversation's limit is the one that binds); ``None``: no limit."""
    if deadline is None:
        return timeout_s, False
    remaining = deadline - loop.time()
    if timeout_s is None or remaining < timeout_s:
        return max(remaining, 0.0), True
    return timeout_s, False


def _simulator_usage(simulator: UserSimulator | None) -> dict[str, Any]:
    """The case's ``metadata["simulator"]`` block, before any reply: ``kind`` (``scripted`` or
    ``llm``), ``model`` and ``seed`` (``None`` when scripted), ``calls`` (model calls, retries included),
    ``cached`` (replies read from the cache), ``tokens_in`` / ``tokens_out`` (the simulator's,
    never the target's), and once the conversation ends ``stopped`` ``{"reason", "turn"}`` (plus
    ``message``: a user message that matched ``stop`` and was not sent)."""
    return {
        "kind": getattr(simulator, "kind", None),
        "model": getattr(getattr(simulator, "model", None), "name", None),
        "seed": getattr(simulator, "seed", None),
        "calls": 0,
        "cached": 0,
        "tokens_in": 0,
        "tokens_out": 0,
    }


def _scenario_end(scenario: Scenario, played: list[dict[str, Any]], usage: dict[str, Any]) -> dict[str, Any] | None:
    """Whether the scenario ends before asking for the next message: the agent's last answer
    matched ``stop``, or ``max_turns`` turns were played."""
    last = played[-1]
    if scenario.stop_matches(last.get("final_response")):
        return {"reason": "agent_matched_stop", "turn": last["turn"]}
    if len(played) >= scenario.max_turns:
        return {"reason": "max_turns", "turn": last["turn"]}
    return None


def _reply_end(scenario: Scenario, reply: UserReply, number: int) -> dict[str, Any] | None:
    """Whether the simulator's reply ends the conversation (it said so, or its message matches
    ``stop``: then that message is recorded, not sent)."""
    if reply.text is None:
        return {"reason": reply.reason or "simulator_done", "turn": number - 1}
    if scenario.stop_matches(reply.text):
        return {"reason": "user_matched_stop", "turn": number - 1, "message": reply.text}
    return None


async def _simulated_reply(
    simulator: UserSimulator,
    scenario: Scenario,
    played: list[dict[str, Any]],
    tracer: Tracer,
    number: int,
    usage: dict[str, Any],
) -> UserReply:
    """Ask the simulator for turn ``number``'s user message inside its own ``user_simulator``
    span (tokens, cache hit), counting its usage in ``usage`` (never the target's)."""
    name = f"{SIMULATOR_SPAN}:{usage['model'] or usage['kind']}"
    with tracer.span(SIMULATOR_SPAN, name, role=SIMULATOR_SPAN, turn=number, simulator=usage["kind"]) as span:
        reply = await simulator.reply(scenario, played, tracer=tracer)
        span.set(
            output_preview=preview(reply.text if reply.text is not None else reply.reason),
            cached=reply.cached,
            calls=reply.calls,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            model=reply.model,
        )
    usage["calls"] += reply.calls
    usage["cached"] += int(reply.cached)
    usage["tokens_in"] += reply.tokens_in
    usage["tokens_out"] += reply.tokens_out
    return reply


def _add(total: int | None, more: int | None) -> int | None:
    return total if more is None else (total or 0) + more


def _turn_answer(value: Any, scratch: RunRecord) -> dict[str, Any]:
    """One turn's answer as ``{"final_response", "tool_calls"}``.

    The target may return the final response (any JSON value), a :class:`TargetOutput` (its
    ``metadata["tool_calls"]`` the turn's calls, as the runtime's ``Agent`` records them) or a
    dict ``{"final_response", "tool_calls"}``.

    Raises:
        NoOutputError, UnusableOutputError: As for a single-turn target.
    """
    output = _accept_output(value, scratch)
    if type(output) is dict and output and output.keys() <= {"final_response", "tool_calls"}:
        final, calls = output.get("final_response"), output.get("tool_calls", [])
    else:
        final, calls = output, scratch.metadata.get("tool_calls", [])
    if calls is None:
        calls = []
    if type(calls) is not list:
        raise UnusableOutputError(f"a turn's tool_calls must be a list, got {type_name(calls)}")
    return {"final_response": final, "tool_calls": to_json(calls)}


def _read_transcript(record: RunRecord, conversation: Conversation) -> None:
    """A single-call target's output on a conversation case, read as its transcript (or an error;
    kept as one answer when the conversation states no per-turn expectation)."""
    answers = transcript_of(record.output, len(conversation.turns))
    if answers is None and not conversation.states_expectations:
        return  # one answer to the whole conversation, nothing stated per turn: scored as a whole
    if answers is None:
        n = len(conversation.turns)
        record.error = ErrorInfo(
            "UnusableOutputError",
            f"a conversation case of {n} turn(s) needs a conversational target (a function with a 'session' "
            f"parameter, or an Agent) or a transcript: a list of {n} answers "
            '{"final_response", "tool_calls"}, one per turn',
        )
        record.output = None
        return
    record.output = answers
    record.metadata["turns"] = [
        {"turn": index + 1, "user": turn.user, **answer}
        for index, (turn, answer) in enumerate(zip(conversation.turns, answers, strict=True))
    ]


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


MAX_TOKENS = 10**12
"""The most tokens one call may report (a trillion): a count past it is not a count (a database
integer, and the sums over a million cases, must still hold it)."""


def token_count(value: Any, name: str) -> int | None:
    """A token count a target reported, checked: ``None``, or a whole number from 0 to
    :data:`MAX_TOKENS` (a float with no fraction is taken as its integer).

    Raises:
        UnusableOutputError: Anything else (text, a bool, a fraction, NaN, an infinity, a negative
            or enormous number), naming ``name``: the case is errored, the run goes on.
    """
    if value is None:
        return None
    if type(value) is int and 0 <= value <= MAX_TOKENS:
        return value
    if type(value) is float and value.is_integer() and 0 <= value <= MAX_TOKENS:
        return int(value)
    raise UnusableOutputError(f"{name} must be a whole number of tokens from 0 to {MAX_TOKENS:,}, got {value!r:.80}")


def _accept_output(value: Any, record: RunRecord) -> Any:
    if isinstance(value, TargetOutput):
        tokens_in = token_count(value.tokens_in, "tokens_in")
        tokens_out = token_count(value.tokens_out, "tokens_out")
        if value.model is not None and not isinstance(value.model, str):
            raise UnusableOutputError(f"model must be text (the model's name), got {type_name(value.model)}")
        record.model = value.model
        record.tokens_in = tokens_in
        record.tokens_out = tokens_out
        record.metadata.update(value.metadata)
        value = value.output
    if value is None:
        raise NoOutputError("target returned None (no usable output)")
    try:
        return to_json(value)
    except NotJSONError as exc:
        raise UnusableOutputError(f"target output of type {type_name(value)} is not JSON: {exc}") from None
