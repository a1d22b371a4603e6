"""Conversation-level scorers: scored once over a whole conversation, not turn by turn.

A scorer whose class sets ``scope = "conversation"`` (:data:`CONVERSATION_SCOPE`) is called
once per conversation case by :func:`evalcore.scoring.score_run`, with a context whose
``case`` is the conversation case itself and whose ``output`` is the transcript (one
``{"final_response", "tool_calls"}`` per turn); ``run.metadata["session_state"]`` holds the
session's final state. Every other scorer is applied turn by turn and folded
(:func:`evalcore.conversations.fold_turn_scores`). How the two kinds make the case's verdict:
:func:`evalcore.scoring.score_run` and docs/verdicts.md, "Conversation cases".

:func:`conversation_view` reads any case, single-turn included (one turn), as the conversation
and the answers these scorers read, so each of them scores a single-turn case as a
one-turn conversation.

This module holds the scorers that need no judge: ``final_state`` (:class:`FinalState`). The
rubric judge over a whole transcript is :mod:`evalcore.judge.conversation`; ADK's metrics are
:mod:`evalcore.scorers.adk_metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from evalcore.conversations import Conversation, ConversationError, Turn, conversation_of, transcript_of
from evalcore.jsonvalue import MISSING
from evalcore.scorers.base import ScoreContext, Scorer
from evalcore.types import JSON, Case, Score

CONVERSATION_SCOPE = "conversation"
"""The ``scope`` of a scorer called once per conversation (every other scorer: per turn)."""

FINAL_STATE_SCORE = "final_state"


def is_conversation_scorer(scorer: object) -> bool:
    """Whether ``scorer`` is scored once per conversation (its class's ``scope`` is ``"conversation"``)."""
    return getattr(scorer, "scope", None) == CONVERSATION_SCOPE


@dataclass(frozen=True, slots=True)
class ConversationView:
    """A case read as a conversation, with what the target answered.

    Attributes:
        conversation: The turns and their expectations (a single-turn case: one turn).
        answers: One ``{"final_response", "tool_calls"}`` per turn of ``conversation``, in
            order; a turn the run has no answer for reads ``{"final_response": None,
            "tool_calls": []}``.
        state: The session's final state (``run.metadata["session_state"]``), ``None`` when
            the run recorded none.
    """

    conversation: Conversation
    answers: list[dict[str, Any]]
    state: dict[str, Any] | None


def conversation_view(ctx: ScoreContext) -> ConversationView:
    """The case of ``ctx`` as a :class:`ConversationView` (see its attributes).

    A single-turn case is a one-turn conversation whose expectation is read from ``expected``:
    an object with ``final_response`` / ``tool_calls`` keys (an ADK case) gives those, any
    other value is the expected final response; its answer's tool calls are
    ``run.metadata["tool_calls"]``.

    Raises:
        ConversationError: The case looks like a conversation but is malformed (naming the
            JSON path).
    """
    conversation = conversation_of(ctx.case)
    state = ctx.run.metadata.get("session_state") if isinstance(ctx.run.metadata, dict) else None
    state = state if type(state) is dict else None
    if conversation is None:
        turn = _single_turn(ctx.case)
        calls = ctx.run.metadata.get("tool_calls") if isinstance(ctx.run.metadata, dict) else None
        answer = {"final_response": ctx.output, "tool_calls": calls if isinstance(calls, list) else []}
        return ConversationView(Conversation(turns=(turn,)), [answer], state)
    n = len(conversation.turns)
    played = transcript_of(ctx.output, n)
    if played is None:
        raw = ctx.output if isinstance(ctx.output, list) else []
        played = [item if isinstance(item, dict) else {} for item in raw[:n]]
    answers = [
        {
            "final_response": played[i].get("final_response") if i < len(played) else None,
            "tool_calls": (played[i].get("tool_calls") or []) if i < len(played) else [],
        }
        for i in range(n)
    ]
    return ConversationView(conversation, answers, state)


def _single_turn(case: Case) -> Turn:
    """A single-turn case's one :class:`Turn` (see :func:`conversation_view`)."""
    user = case.input if isinstance(case.input, str) else str(case.input)
    expected = case.expected
    if expected is MISSING or expected is None:
        return Turn(user=user)
    if type(expected) is dict and expected and expected.keys() <= {"final_response", "tool_calls", "rubric"}:
        calls = expected.get("tool_calls")
        return Turn(
            user=user,
            final_response=expected.get("final_response"),
            tool_calls=[c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else None,
            rubric=expected.get("rubric") if isinstance(expected.get("rubric"), str) else None,
        )
    return Turn(user=user, final_response=expected)


def state_diff(expected: dict[str, Any], actual: dict[str, Any]) -> list[dict[str, JSON]]:
    """The per-key difference of two session states, sorted by key.

    One entry per key whose values differ: ``{"key", "change", "expected"?, "actual"?}`` where
    ``change`` is ``"changed"`` (both hold the key), ``"missing"`` (expected, absent from the
    session: no ``actual``) or ``"unexpected"`` (in the session only: no ``expected``). Values
    compare as JSON values (``1 == 1.0``, key order of objects ignored).
    """
    diff: list[dict[str, JSON]] = []
    for key in sorted(set(expected) | set(actual), key=str):
        want, got = expected.get(key, MISSING), actual.get(key, MISSING)
        if want == got:
            continue
        if want is MISSING:
            diff.append({"key": key, "change": "unexpected", "actual": got})
        elif got is MISSING:
            diff.append({"key": key, "change": "missing", "expected": want})
        else:
            diff.append({"key": key, "change": "changed", "expected": want, "actual": got})
    return diff


def final_state_score(conversation: Conversation, state: Any) -> Score | None:
    """``final_state``: the session's final state against the expected one; ``None`` if none is expected.

    Passes when every key of the two states holds equal values (a key the session added fails
    too: the expected state is the whole final state, as ADK's ``final_session_state``). The
    score's ``metadata``: ``diff`` (:func:`state_diff`), ``keys`` (the keys of either state)
    and ``matching`` (how many of them hold equal values). A run that recorded no session
    state fails, saying so (the expected state was not shown to be reached).
    """
    expected = conversation.final_state
    if expected is None:
        return None
    if type(state) is not dict:
        return Score(
            FINAL_STATE_SCORE,
            False,
            explanation="the run recorded no session state",
            metadata={"diff": [], "keys": len(expected), "matching": 0},
        )
    diff = state_diff(expected, state)
    keys = len(set(expected) | set(state))
    metadata: dict[str, Any] = {"diff": diff, "keys": keys, "matching": keys - len(diff)}
    if diff:
        shown = ", ".join(f"{d['key']!r} {d['change']}" for d in diff[:5])
        more = f" (and {len(diff) - 5} more)" if len(diff) > 5 else ""
        return Score(FINAL_STATE_SCORE, False, explanation=f"state differs: {shown}{more}", metadata=metadata)
    return Score(FINAL_STATE_SCORE, True, explanation=f"{keys} key(s) equal", metadata=metadata)


@dataclass
class FinalState(Scorer):
    """``final_state``: the session's final state against the case's expected ``final_state``.

    A conversation-level scorer (see the module docstring). The verdict and the per-key diff
    in ``metadata["diff"]``: :func:`final_state_score`. A case that expects no final state
    gets no score from it. A conversation case that expects one is scored so even when this
    scorer is not named (:func:`evalcore.scoring.score_run` adds it).
    """

    name: ClassVar[str] = FINAL_STATE_SCORE
    version: ClassVar[str] = "1"
    scope: ClassVar[str] = CONVERSATION_SCOPE

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """The ``final_state`` score, or none when the case expects no final state."""
        try:
            view = conversation_view(ctx)
        except ConversationError as exc:
            return [Score.failure(self.name, f"ConversationError: {exc}")]
        score = final_state_score(view.conversation, view.state)
        return [] if score is None else [score]


def render_transcript(view: ConversationView) -> list[dict[str, JSON]]:
    """The conversation as a judge reads it: one ``{"turn", "user", "assistant", "tool_calls"}`` per turn."""
    return [
        {
            "turn": index + 1,
            "user": turn.user,
            "assistant": answer.get("final_response"),
            "tool_calls": answer.get("tool_calls") or [],
        }
        for index, (turn, answer) in enumerate(zip(view.conversation.turns, view.answers, strict=True))
    ]
