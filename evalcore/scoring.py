"""Scoring: a run's scores from every scorer (:func:`score_run`); never raises for a scorer's fault.

A scorer that raises or exceeds its own timeout gives that score an error and the run goes
on. Kept apart from inference (:mod:`evalcore.inference`) so a stored run can be scored again
(:func:`evalcore.runner.rescore`) without calling the target.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Sequence
from typing import Any

from evalcore._util.eager import resume
from evalcore._util.threads import run_blocking
from evalcore.conversations import (
    Conversation,
    ConversationError,
    conversation_of,
    fold_turn_scores,
    scores_turn,
    transcript_of,
    turn_expected,
    with_turn_rubric,
)
from evalcore.interrupts import (
    foreign_error,
    raised_by_code,
    signal_count,
)
from evalcore.jsonvalue import NotJSONError, to_json, type_name
from evalcore.processes import process_scope
from evalcore.scorers.base import ScoreContext, Scorer, ScorerServices
from evalcore.scorers.conversation import FinalState, final_state_score, is_conversation_scorer
from evalcore.tracing import TraceEvent, Tracer
from evalcore.types import Case, RunRecord, Score

DEFAULT_SCORER_TIMEOUT_S = 120.0
"""Default limit on one scorer call (the judge included), seconds."""


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
    the call is abandoned and its scores are errors naming the timeout, and the subprocesses it
    started (each in a process group of its own) are killed with their children
    (:mod:`evalcore.processes`). A scorer whose
    ``score`` is a plain ``def`` runs on a daemon thread, off the event loop (see
    :mod:`evalcore._util.threads`). Anything a scorer raises, ``BaseException`` included (its own
    ``sys.exit``, ``KeyboardInterrupt``, ``CancelledError``), is that scorer's error; only our
    own cancellation and a real Ctrl-C propagate. Scores are converted to JSON values here; a
    score that cannot be (e.g. an object in its metadata) is an error naming the type.
    """
    if run.error is not None:
        return []
    injected = services or ScorerServices()
    try:
        conversation = conversation_of(case)
    except ConversationError as exc:
        return [Score.failure(scorer.name, f"ConversationError: {exc}") for scorer in scorers]
    if conversation is not None and (
        conversation.states_expectations or transcript_of(run.output, len(conversation.turns)) is not None
    ):
        return await _score_conversation(
            conversation,
            case,
            run,
            scorers,
            events=events or [],
            services=injected,
            tracer=tracer,
            scorer_timeout_s=scorer_timeout_s,
        )
    ctx = ScoreContext(
        case=case,
        output=run.output,
        run=run,
        events=events or [],
        judge=injected.judge,
        judge_cache=injected.judge_cache,
        tracer=tracer,
    )
    return await _score_context(ctx, scorers, scorer_timeout_s)


def takes_rubric(scorer: Any) -> bool:
    """Whether ``scorer`` is graded by a rubric (a dataclass with a ``rubric`` field: the rubric
    judges), so a conversation turn's own ``rubric`` is added to its notes."""
    return dataclasses.is_dataclass(scorer) and "rubric" in {f.name for f in dataclasses.fields(scorer)}


async def _score_conversation(
    conversation: Conversation,
    case: Case,
    run: RunRecord,
    scorers: Sequence[Scorer],
    *,
    events: list[TraceEvent],
    services: ScorerServices,
    tracer: Tracer | None,
    scorer_timeout_s: float | None,
) -> list[Score]:
    """A conversation case's scores: per-turn scorers folded, then conversation-level scorers.

    The verdict rule of a conversation case (docs/verdicts.md, "Conversation cases"):

    1. A *per-turn* scorer (every scorer whose ``scope`` is not ``"conversation"``) is applied to
       each turn that states what it reads, as a single-turn case whose input is the turn's
       message, whose expected value is the turn's
       (:func:`~evalcore.conversations.turn_expected`; a rubric judge on a turn with a
       ``rubric`` gets it added to its notes), whose output is the turn's final response and
       whose ``run.metadata["tool_calls"]`` are the calls made in that turn only; its turns'
       scores fold into one score per name (:func:`~evalcore.conversations.fold_turn_scores`:
       a failing turn fails it, else a turn's error makes it an error, else it passes when a
       turn passed).
    2. A *conversation-level* scorer (:mod:`evalcore.scorers.conversation`: ``final_state``,
       ``conversation_rubric``, ``goal_completion``, ``knowledge_retention``,
       ``rule_adherence``, ADK's ``tool_trajectory_avg_score`` / ``response_match_score``, the
       case's own ``case_scorers``) is called once with the whole case and the transcript; its
       scores are the case's as they are. ``final_state`` is added when the case expects a
       final state and no ``final_state`` scorer was named.
    3. Per-turn and conversation-level scores are then one list, and the case's status is
       :func:`evalcore.types.case_outcome` of it, exactly as for a single-turn case: any
       failing verdict fails the case; else any error makes it errored; else it passes when at
       least one verdict passed; with no verdict at all it is unscored, never passed.
    """
    conversation_level = [scorer for scorer in scorers if is_conversation_scorer(scorer)]
    scorers = [scorer for scorer in scorers if not is_conversation_scorer(scorer)]
    answers = run.output if isinstance(run.output, list) else []
    per_turn: list[list[Score]] = []
    names: list[str] = list(dict.fromkeys(name for scorer in scorers for name in _score_names(scorer)))
    # per scorer, once per case rather than once per turn: whether it is graded by a rubric
    takes_rubrics = [takes_rubric(scorer) for scorer in scorers]
    for index, turn in enumerate(conversation.turns):
        answer = answers[index] if index < len(answers) and isinstance(answers[index], dict) else {}
        turn_run = dataclasses.replace(
            run,
            output=answer.get("final_response"),
            metadata={**run.metadata, "tool_calls": answer.get("tool_calls") or [], "turn": index + 1},
        )
        turn_scores: list[Score] = []
        for scorer, by_rubric in zip(scorers, takes_rubrics, strict=True):
            if not scores_turn(turn, scorer.name, takes_rubric=by_rubric):
                continue
            turn_scorer = scorer
            if by_rubric and turn.rubric is not None:
                try:  # the rubric judge with this turn's rubric added to its notes
                    turn_scorer = dataclasses.replace(  # type: ignore[type-var]
                        scorer, rubric=with_turn_rubric(getattr(scorer, "rubric", None), turn.rubric)
                    )
                except Exception as exc:  # noqa: BLE001 - a scorer that refuses the rubric: that turn's error
                    turn_scores.extend(
                        Score.failure(name, f"{type(exc).__name__}: {exc}") for name in _score_names(scorer)
                    )
                    continue
            expected = turn_expected(turn, scorer.name)
            turn_case = dataclasses.replace(
                case, input=turn.user, expected=expected, metadata={**case.metadata, "turn": index + 1}
            )
            ctx = ScoreContext(
                case=turn_case,
                output=turn_run.output,
                run=turn_run,
                events=events,
                judge=services.judge,
                judge_cache=services.judge_cache,
                tracer=tracer,
            )
            turn_scores.extend(await _score_context(ctx, [turn_scorer], scorer_timeout_s))
        per_turn.append(turn_scores)
    scores = fold_turn_scores(names, per_turn)
    if conversation_level:
        ctx = ScoreContext(
            case=case,
            output=run.output,
            run=run,
            events=events,
            judge=services.judge,
            judge_cache=services.judge_cache,
            tracer=tracer,
        )
        scores.extend(await _score_context(ctx, conversation_level, scorer_timeout_s))
    if not any(isinstance(scorer, FinalState) for scorer in conversation_level):
        state = final_state_score(conversation, run.metadata.get("session_state"))
        if state is not None:
            scores.append(state)
    return scores


async def _score_context(ctx: ScoreContext, scorers: Sequence[Scorer], scorer_timeout_s: float | None) -> list[Score]:
    """Every scorer on one context (the loop of :func:`score_run`)."""
    scores: list[Score] = []
    for scorer in scorers:
        signals_before = signal_count()
        limit = asyncio.timeout(scorer_timeout_s)
        try:
            with process_scope(kill_on_exit=False) as processes:
                try:
                    produced = await _call_scorer(scorer, ctx, limit)
                except TimeoutError:
                    processes.kill()  # abandoned: its subprocesses (a code check's) go with it
                    raise
                finally:
                    processes.sweep()
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
            if not raised_by_code(exc, signals_before):
                raise
            error = foreign_error(exc, "scorer")
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
            return await resume(coro, first)
    async with limit:
        produced = await run_blocking(method, ctx)
        if inspect.isawaitable(produced):
            produced = await produced
    return produced


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
