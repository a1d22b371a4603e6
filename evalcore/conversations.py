"""Conversation cases: a session of user turns played in order, each turn scored on its own.

A conversation case is an ordinary :class:`~evalcore.types.Case` whose fields have this shape
(so it is stored, exported and compared like any case; :func:`conversation_of` recognises it):

* ``input``: ``{"turns": ["user message 1", "user message 2", ...], "initial_state": {...}}``
  (``initial_state``, the session's state when turn 1 starts, is optional);
* ``expected`` (optional): the per-turn expectations, a list with one object per turn
  ``{"final_response": text | null, "tool_calls": [{"name", "arguments"}], "rubric": text}``
  (each key optional; ``{}`` states nothing about that turn), or, when the session's final
  state is expected too, ``{"turns": [that list], "final_state": {...}}``.

A JSON Lines record may write a conversation turn by turn instead (:func:`record_to_fields`):
``{"id": "c1", "turns": [{"user": "hi", "final_response": "hello", "tool_calls": [...],
"rubric": "..."}], "initial_state": {...}, "final_state": {...}}``.

Playing one (see docs/targets.md): a *conversational* target (a function with a ``session``
parameter, or an object with ``conversational = True`` such as the runtime's ``Agent``) is
called once per turn with that turn's user message and the case's :class:`Session` (history,
state, turn index), and returns that turn's answer. Any other target is called once with the
whole ``input`` and must return a *transcript*: a list with one ``{"final_response",
"tool_calls"}`` answer per turn.

The verdict rule (:func:`fold_turn_scores`): each scorer is applied to each turn that states
the value it reads (``tool_calls`` a turn's ``tool_calls``, every other scorer a turn's
``final_response``; the rubric judge also a turn with a ``rubric``, added to its notes); per
score name the case gets one score that fails when any turn fails, is an error when a turn
errored and none failed, passes when at least one turn passed; the
case's status then follows :func:`evalcore.types.case_outcome` as for a single-turn case. A
turn that raises or times out ends the case as *errored* at that turn.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.types import JSON, Case, Score, case_outcome

TURN_KEYS: tuple[str, ...] = ("final_response", "tool_calls", "rubric")
"""The keys of one turn's expectation."""

RECORD_TURN_KEYS: tuple[str, ...] = ("user", *TURN_KEYS)
"""The keys of one turn of a JSON Lines record written turn by turn."""

INPUT_KEYS = frozenset({"turns", "initial_state"})
TOOL_CALLS_SCORER = "tool_calls"


class ConversationError(ValueError):
    """A conversation that cannot be read; ``field`` is the JSON path of the offending value."""

    def __init__(self, reason: str, field: str) -> None:
        self.reason = reason
        self.field = field
        super().__init__(f"{field}: {reason}")


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation case.

    Attributes:
        user: The user's message.
        final_response: The expected final response, ``None`` when the turn states none.
        tool_calls: The expected tool calls (``{"name", "arguments"}``), ``None`` when not stated.
        rubric: A per-turn rubric for the judge, if any.
    """

    user: str
    final_response: JSON = None
    tool_calls: list[dict[str, JSON]] | None = None
    rubric: str | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation case's turns, the session's initial state and the expected final state."""

    turns: tuple[Turn, ...]
    initial_state: dict[str, JSON] = field(default_factory=dict)
    final_state: dict[str, JSON] | None = None

    @property
    def states_expectations(self) -> bool:
        """Whether any turn states an expected value (response, tool calls, rubric) or a final
        state is expected: without any, a whole-conversation target's single answer is scored as
        it was before conversations were played turn by turn (``{"turns": [...]}`` inputs such as
        the rules demo's)."""
        return self.final_state is not None or any(
            turn.final_response is not None or turn.tool_calls is not None or turn.rubric is not None
            for turn in self.turns
        )


@dataclass(slots=True)
class Session:
    """What a conversational target gets besides the turn's message.

    Attributes:
        case: The conversation case being played.
        turn: 0-based index of the turn being played.
        history: The chat messages of the earlier turns (``{"role", "content"}``; the runtime's
            ``Agent`` keeps its tool messages too). A target may append this turn's messages
            itself; if it does not, the runner appends the user message and the answer.
        state: The session's state: a copy of the case's ``initial_state`` at turn 1, then
            whatever the target left in it (compared with an expected ``final_state``).
        ctx: The run context (tracer, run id, free ``metadata``).
    """

    case: Case
    turn: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    ctx: Any = None


def is_conversation_input(value: Any) -> bool:
    """True when ``value`` is a conversation case's input (an object with a ``turns`` list)."""
    return type(value) is dict and "turns" in value and value.keys() <= INPUT_KEYS


def conversation_of(case: Case) -> Conversation | None:
    """The case's conversation, or ``None`` for a single-turn case.

    Raises:
        ConversationError: The case's fields look like a conversation but are malformed.
    """
    if not is_conversation_input(case.input):
        return None
    return parse_conversation(case.input, case.expected)


def parse_conversation(input_value: Any, expected: Any, *, prefix: str = "") -> Conversation:
    """Read a conversation from a case's ``input`` and ``expected`` (see the module docstring).

    Args:
        input_value: The case's input.
        expected: The case's expected value, or :data:`~evalcore.jsonvalue.MISSING`.
        prefix: Prepended to the JSON paths in errors (e.g. ``""`` for a stored case).

    Raises:
        ConversationError: Naming the JSON path, e.g. ``input.turns[1]`` or
            ``expected[0].tool_calls[0].arguments``.
    """
    if type(input_value) is not dict:
        raise ConversationError("a conversation's input must be an object with a 'turns' list", f"{prefix}input")
    unknown = sorted(set(input_value) - INPUT_KEYS)
    if unknown:
        raise ConversationError(f"unknown field {unknown[0]!r} (fields: turns, initial_state)", f"{prefix}input")
    texts = input_value.get("turns")
    if type(texts) is not list or not texts:
        raise ConversationError("'turns' must be a non-empty list of user messages", f"{prefix}input.turns")
    for index, text in enumerate(texts):
        if type(text) is not str or not text.strip():
            raise ConversationError("a turn needs the user's message (non-empty text)", f"{prefix}input.turns[{index}]")
    initial = input_value.get("initial_state", {})
    if type(initial) is not dict:
        raise ConversationError("'initial_state' must be an object", f"{prefix}input.initial_state")
    final_state: dict[str, JSON] | None = None
    where = f"{prefix}expected"
    if expected is MISSING or expected is None:
        expectations: list[Any] = [{} for _ in texts]
    else:
        if type(expected) is dict:
            unknown = sorted(set(expected) - {"turns", "final_state"})
            if unknown:
                raise ConversationError(f"unknown field {unknown[0]!r} (fields: turns, final_state)", where)
            final_state = expected.get("final_state")
            if final_state is not None and type(final_state) is not dict:
                raise ConversationError("'final_state' must be an object", f"{where}.final_state")
            expectations = expected.get("turns", [{} for _ in texts])
            where = f"{where}.turns"
        else:
            expectations = expected
        if type(expectations) is not list:
            raise ConversationError("the expected turns must be a list with one object per turn", where)
        if len(expectations) != len(texts):
            raise ConversationError(
                f"{len(expectations)} expected turn(s) for {len(texts)} user turn(s): give one per turn", where
            )
    turns = tuple(
        _turn(text, expectation, f"{where}[{index}]")
        for index, (text, expectation) in enumerate(zip(texts, expectations, strict=True))
    )
    return Conversation(turns=turns, initial_state=dict(initial), final_state=final_state)


def _turn(user: str, expectation: Any, where: str) -> Turn:
    if expectation is None:
        expectation = {}
    if type(expectation) is not dict:
        raise ConversationError("a turn's expectation must be an object", where)
    unknown = sorted(set(expectation) - set(TURN_KEYS))
    if unknown:
        raise ConversationError(
            f"unknown field {unknown[0]!r} (fields: {', '.join(TURN_KEYS)})", f"{where}.{unknown[0]}"
        )
    calls = expectation.get("tool_calls")
    if calls is not None:
        calls = check_tool_calls(calls, f"{where}.tool_calls")
    rubric = expectation.get("rubric")
    if rubric is not None and (type(rubric) is not str or not rubric.strip()):
        raise ConversationError("'rubric' must be non-empty text", f"{where}.rubric")
    final = expectation.get("final_response")
    if type(final) in (list, dict):
        raise ConversationError("'final_response' must be text (or null)", f"{where}.final_response")
    return Turn(user=user, final_response=final, tool_calls=calls, rubric=rubric)


def check_tool_calls(calls: Any, where: str) -> list[dict[str, JSON]]:
    """Expected calls as ``[{"name", "arguments"}]`` (``args`` accepted for ``arguments``).

    Raises:
        ConversationError: Not a list of calls with a string name and object arguments.
    """
    if type(calls) is not list:
        raise ConversationError("'tool_calls' must be a list of calls", where)
    checked: list[dict[str, JSON]] = []
    for index, call in enumerate(calls):
        at = f"{where}[{index}]"
        if type(call) is not dict or type(call.get("name")) is not str or not call["name"]:
            raise ConversationError("a tool call needs a non-empty string 'name'", at)
        unknown = sorted(set(call) - {"name", "arguments", "args"})
        if unknown:
            raise ConversationError(f"unknown field {unknown[0]!r} (fields: name, arguments)", f"{at}.{unknown[0]}")
        arguments = call.get("arguments", call.get("args", {}))
        if arguments is None:
            arguments = {}
        if type(arguments) is not dict:
            raise ConversationError("'arguments' must be an object", f"{at}.arguments")
        checked.append({"name": call["name"], "arguments": arguments})
    return checked


def case_fields(conversation: Conversation) -> tuple[JSON, JSON]:
    """A conversation's ``(input, expected)`` as stored on its case (``expected`` may be MISSING)."""
    input_value: dict[str, JSON] = {"turns": [turn.user for turn in conversation.turns]}
    if conversation.initial_state:
        input_value["initial_state"] = conversation.initial_state
    expectations = []
    for turn in conversation.turns:
        stated: dict[str, JSON] = {}
        if turn.final_response is not None:
            stated["final_response"] = turn.final_response
        if turn.tool_calls is not None:
            stated["tool_calls"] = turn.tool_calls
        if turn.rubric is not None:
            stated["rubric"] = turn.rubric
        expectations.append(stated)
    expected: JSON = expectations if any(expectations) else MISSING
    if conversation.final_state is not None:
        expected = {"turns": expectations, "final_state": conversation.final_state}
    return input_value, expected


RECORD_KEYS = frozenset({"turns", "initial_state", "final_state"})
"""The conversation keys of a JSON Lines record written turn by turn."""


def record_to_fields(record: Mapping[str, Any]) -> tuple[JSON, JSON]:
    """``(input, expected)`` of a record written turn by turn (``{"turns": [{"user", ...}]}``).

    Raises:
        ConversationError: A turn without a user message, an expected value of the wrong
            shape or an unknown field, naming its path (e.g. ``turns[1].user``).
    """
    turns = record.get("turns")
    if type(turns) is not list or not turns:
        raise ConversationError("'turns' must be a non-empty list of turns", "turns")
    parsed = []
    for index, raw in enumerate(turns):
        where = f"turns[{index}]"
        if type(raw) is not dict:
            raise ConversationError('a turn must be an object {"user": text, ...}', where)
        unknown = sorted(set(raw) - set(RECORD_TURN_KEYS))
        if unknown:
            raise ConversationError(
                f"unknown field {unknown[0]!r} (fields: {', '.join(RECORD_TURN_KEYS)})", f"{where}.{unknown[0]}"
            )
        user = raw.get("user")
        if type(user) is not str or not user.strip():
            raise ConversationError("a turn needs the user's message (non-empty text)", f"{where}.user")
        parsed.append(_turn(user, {k: v for k, v in raw.items() if k != "user"}, where))
    initial = record.get("initial_state")
    if initial is not None and type(initial) is not dict:
        raise ConversationError("'initial_state' must be an object", "initial_state")
    final = record.get("final_state")
    if final is not None and type(final) is not dict:
        raise ConversationError("'final_state' must be an object", "final_state")
    return case_fields(Conversation(turns=tuple(parsed), initial_state=dict(initial or {}), final_state=final))


# --- answers and transcripts ----------------------------------------------------------------


def transcript_of(output: Any, n_turns: int) -> list[dict[str, JSON]] | None:
    """A single-call target's output read as a transcript of ``n_turns`` answers, else ``None``.

    A transcript is a list (or ``{"turns": [...]}``) with one answer per turn, each an object
    with ``final_response`` and / or ``tool_calls``.
    """
    if type(output) is dict and set(output) == {"turns"}:
        output = output["turns"]
    if type(output) is not list or len(output) != n_turns:
        return None
    answers = []
    for item in output:
        if type(item) is not dict or not ({"final_response", "tool_calls"} & item.keys()):
            return None
        calls = item.get("tool_calls", [])
        if type(calls) is not list:
            return None
        answers.append({"final_response": item.get("final_response"), "tool_calls": calls})
    return answers


# --- scoring ----------------------------------------------------------------------------------


def turn_expected(turn: Turn, scorer_name: str) -> JSON:
    """What ``scorer_name`` is scored against on ``turn`` (MISSING: no expected value for it).

    ``tool_calls`` reads the turn's expected calls; every other scorer the turn's final response.
    """
    if scorer_name == TOOL_CALLS_SCORER:
        return MISSING if turn.tool_calls is None else {"tool_calls": turn.tool_calls}
    return MISSING if turn.final_response is None else turn.final_response


def scores_turn(turn: Turn, scorer_name: str, *, takes_rubric: bool) -> bool:
    """Whether a scorer runs on ``turn``: it states what the scorer reads (see :func:`turn_expected`),
    or the turn has a ``rubric`` and the scorer is graded by one (the rubric judge)."""
    return turn_expected(turn, scorer_name) is not MISSING or (takes_rubric and turn.rubric is not None)


def with_turn_rubric(rubric: str | None, turn_rubric: str) -> str:
    """A judge's rubric for one turn: the scorer's own notes, then the turn's."""
    return f"{rubric}\n\n{turn_rubric}" if rubric else turn_rubric


def fold_turn_scores(names: Iterable[str], per_turn: list[list[Score]]) -> list[Score]:
    """One case-level score per name from the turns' scores (the verdict rule).

    Per name: a turn that fails makes it fail (value: the share of scored turns that passed,
    as ADK's per-invocation averages); else a turn's scorer error makes it an error; else it
    passes when a turn passed; a measurement is the mean over the turns that gave one. Each
    score's ``metadata["turns"]`` holds every turn's score (``null`` where not scored).
    """
    folded: list[Score] = []
    for name in names:
        row: list[Score | None] = [next((s for s in scores if s.name == name), None) for scores in per_turn]
        detail: list[JSON] = [None if s is None else _turn_score_detail(s) for s in row]
        scored = [(index, s) for index, s in enumerate(row) if s is not None]
        if not scored:
            continue
        verdicts = [(index, _verdict(s)) for index, s in scored]
        failing = [index for index, verdict in verdicts if verdict is False]
        errored = [(index, s) for index, s in scored if s.error is not None]
        judged = [verdict for _, verdict in verdicts if verdict is not None]
        share = sum(1 for v in judged if v) / len(judged) if judged else None
        if failing:
            first = failing[0]
            failed = row[first]
            why = failed.explanation if failed is not None else None
            text = f"turn {first + 1} fails" + (f": {why}" if why else "")
            others = [str(i + 1) for i in failing[1:]]
            if others:
                text += f" (also turn {', '.join(others)})"
            folded.append(Score(name, share, passed=False, explanation=text, metadata={"turns": detail}))
        elif errored:
            index, score = errored[0]
            folded.append(Score.failure(name, f"turn {index + 1}: {score.error}", turns=detail))
        elif judged:
            folded.append(
                Score(name, share, passed=True, explanation=f"{len(judged)} turn(s) pass", metadata={"turns": detail})
            )
        else:
            numbers = [s.numeric for _, s in scored if s.numeric is not None]
            value = sum(numbers) / len(numbers) if numbers else None
            if value is None:
                continue
            folded.append(Score(name, value, metadata={"turns": detail}))
    return folded


def _verdict(score: Score) -> bool | None:
    if score.error is not None:
        return None
    if score.passed is not None:
        return score.passed
    return score.value if type(score.value) is bool else None


def _turn_score_detail(score: Score) -> dict[str, JSON]:
    detail: dict[str, JSON] = {"value": score.value, "passed": score.passed}
    if score.explanation:
        detail["explanation"] = score.explanation
    if score.error is not None:
        detail["error"] = score.error
    return detail


def final_state_score(conversation: Conversation, state: Any) -> Score | None:
    """``final_state``: the session's final state against the expected one (None if none expected)."""
    if conversation.final_state is None:
        return None
    if type(state) is not dict:
        return Score("final_state", False, explanation="the run recorded no session state")
    differing = sorted(
        k
        for k in set(conversation.final_state) | set(state)
        if conversation.final_state.get(k, MISSING) != state.get(k, MISSING)
    )
    if differing:
        return Score("final_state", False, explanation=f"state differs at {', '.join(map(repr, differing[:5]))}")
    return Score("final_state", True)


# --- the report ------------------------------------------------------------------------------


def report_turns(run_metadata: Any, scores: Any) -> list[dict[str, JSON]] | None:
    """The ``turns`` block of a conversation case in the JSON report, else ``None``.

    One entry per turn played: ``turn`` (1-based), ``user``, ``final_response``, ``tool_calls``,
    ``error`` (the turn that ended the case), ``status`` (the turn's own verdict by the same
    rule as a case's) and ``scores`` (the turn's score per name).
    """
    if not isinstance(run_metadata, dict) or not isinstance(run_metadata.get("turns"), list):
        return None
    played = run_metadata["turns"]
    out: list[dict[str, JSON]] = []
    for index, record in enumerate(played):
        if not isinstance(record, dict):
            continue
        turn_scores: list[dict[str, JSON]] = []
        for score in scores or []:
            per = (score.get("metadata") or {}).get("turns") if isinstance(score, dict) else None
            if isinstance(per, list) and index < len(per) and isinstance(per[index], dict):
                turn_scores.append({"name": score.get("name"), **per[index]})
        error = record.get("error")
        outcome = case_outcome(target_errored=error is not None, scores=turn_scores)
        out.append({**record, "status": outcome.status.value, "scores": turn_scores})
    return out


def copy_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a session state (each play starts from the case's own, unchanged)."""
    return copy.deepcopy(dict(state))
