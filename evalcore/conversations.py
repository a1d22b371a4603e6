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

A *scenario* case (a simulated user, :func:`scenario_of`) has the input
``{"scenario": {"opening": text, "persona": text, "goal": text, "stop": regex, "max_turns": int,
"script": [text, ...]}, "initial_state": {...}}``: turn 1's user message is ``opening``, every
later one comes from a user simulator (:mod:`evalcore.simulator`): the ``script``'s replies in
order when there is one, else an LLM playing ``persona`` towards ``goal``. ADK's
``conversation_scenario`` names are read too (``starting_prompt`` for ``opening``,
``conversation_plan`` for ``goal``, ``user_persona`` for ``persona``). The conversation ends when
the user's next message or the agent's answer matches ``stop`` (a case-insensitive regular
expression), when the simulator says it is done (the script ran out, the LLM wrote its stop
signal) or after ``max_turns`` turns.

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
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

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


# --- scenarios (simulated users) -------------------------------------------------------------

SCENARIO_KEYS: tuple[str, ...] = ("opening", "persona", "goal", "stop", "max_turns", "script")
"""The fields of a scenario (``input.scenario``)."""

ADK_SCENARIO_NAMES: dict[str, str] = {
    "starting_prompt": "opening",
    "conversation_plan": "goal",
    "user_persona": "persona",
}
"""ADK's ``ConversationScenario`` field names, read as ours (``google.adk.evaluation.conversation_scenarios``)."""

SCENARIO_INPUT_KEYS = frozenset({"scenario", "initial_state"})
DEFAULT_MAX_TURNS = 10
"""Turns a scenario plays at most when it states no ``max_turns``."""
MAX_TURNS_LIMIT = 100
"""The largest ``max_turns`` accepted (a runaway simulated conversation is a bug, not a test)."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A conversation whose user side is played by a simulator (see the module docstring).

    Attributes:
        opening: Turn 1's user message (ADK's ``starting_prompt``).
        persona: Who the simulated user is (ADK's ``user_persona``; an object's ``description``
            and its behaviours' descriptions, one per line), or ``None``.
        goal: What the user wants from the conversation (ADK's ``conversation_plan``), or ``None``.
        stop: A case-insensitive regular expression: the conversation ends when the user's next
            message or the agent's answer matches it (``None``: only the simulator or
            ``max_turns`` end it).
        max_turns: Turns played at most (1..:data:`MAX_TURNS_LIMIT`).
        script: The scripted user's replies after the opening, in order; ``None`` for an
            LLM-backed user.
        initial_state: The session's state when turn 1 starts.
    """

    opening: str
    persona: str | None = None
    goal: str | None = None
    stop: str | None = None
    max_turns: int = DEFAULT_MAX_TURNS
    script: tuple[str, ...] | None = None
    initial_state: dict[str, JSON] = field(default_factory=dict)

    def stop_matches(self, text: Any) -> bool:
        """Whether ``text`` (a user message or an agent's answer; non-text never matches) ends
        the conversation by the scenario's ``stop`` expression."""
        return self.stop is not None and type(text) is str and re.search(self.stop, text, re.IGNORECASE) is not None

    def record(self) -> dict[str, JSON]:
        """The scenario as canonical JSON (what a simulator's cache key covers)."""
        return {
            "opening": self.opening,
            "persona": self.persona,
            "goal": self.goal,
            "stop": self.stop,
            "max_turns": self.max_turns,
            "script": None if self.script is None else list(self.script),
            "initial_state": self.initial_state,
        }


def is_scenario_input(value: Any) -> bool:
    """True when ``value`` is a scenario case's input (an object with a ``scenario``)."""
    return type(value) is dict and "scenario" in value and value.keys() <= SCENARIO_INPUT_KEYS


def check_case_shape(input_value: Any, expected: Any = MISSING) -> None:
    """Refuse a conversation or scenario case that does not read as one; other inputs pass.

    The one check every writer of a case applies (the file loaders, the API, the admin), so a
    case no run could play is never stored.

    Raises:
        ConversationError: Naming the JSON path (``input.turns[1]``, ``input.scenario.max_turns``).
    """
    if is_conversation_input(input_value):
        parse_conversation(input_value, expected)
    elif is_scenario_input(input_value):
        parse_scenario(input_value)


def scenario_of(case: Case) -> Scenario | None:
    """The case's scenario, or ``None`` when it is not a scenario case.

    Raises:
        ConversationError: The input has a ``scenario`` but it is malformed (JSON path named).
    """
    if not is_scenario_input(case.input):
        return None
    return parse_scenario(case.input)


def parse_scenario(input_value: Any, *, prefix: str = "") -> Scenario:
    """Read a scenario case's input ``{"scenario": {...}, "initial_state": {...}}``.

    Args:
        input_value: The case's input.
        prefix: Prepended to the JSON paths in errors.

    Raises:
        ConversationError: Naming the JSON path, e.g. ``input.scenario.max_turns`` or
            ``input.scenario.script[2]``.
    """
    where = f"{prefix}input"
    if type(input_value) is not dict or type(input_value.get("scenario")) is not dict:
        raise ConversationError("a scenario case's input must be an object with a 'scenario' object", where)
    unknown = sorted(set(input_value) - SCENARIO_INPUT_KEYS)
    if unknown:
        raise ConversationError(f"unknown field {unknown[0]!r} (fields: scenario, initial_state)", where)
    initial = input_value.get("initial_state", {})
    if type(initial) is not dict:
        raise ConversationError("'initial_state' must be an object", f"{where}.initial_state")
    raw: dict[str, Any] = {}
    where = f"{where}.scenario"
    for key, value in input_value["scenario"].items():
        name = ADK_SCENARIO_NAMES.get(key, key)
        if name not in SCENARIO_KEYS:
            fields = ", ".join(SCENARIO_KEYS)
            raise ConversationError(f"unknown field {key!r} (fields: {fields}, or ADK's names)", f"{where}.{key}")
        if name in raw:
            raise ConversationError(f"{name!r} is given twice (once under ADK's name)", f"{where}.{key}")
        raw[name] = value
    opening = raw.get("opening")
    if type(opening) is not str or not opening.strip():
        raise ConversationError("a scenario needs the user's opening message (non-empty text)", f"{where}.opening")
    goal = raw.get("goal")
    if goal is not None and (type(goal) is not str or not goal.strip()):
        raise ConversationError("'goal' must be non-empty text", f"{where}.goal")
    persona = _persona_text(raw.get("persona"), f"{where}.persona")
    stop = raw.get("stop")
    if stop is not None:
        if type(stop) is not str or not stop.strip():
            raise ConversationError("'stop' must be a non-empty regular expression", f"{where}.stop")
        try:
            re.compile(stop)
        except re.error as exc:
            raise ConversationError(f"'stop' is not a regular expression: {exc}", f"{where}.stop") from None
    max_turns = raw.get("max_turns", DEFAULT_MAX_TURNS)
    if type(max_turns) is not int or not 1 <= max_turns <= MAX_TURNS_LIMIT:
        raise ConversationError(f"'max_turns' must be a whole number from 1 to {MAX_TURNS_LIMIT}", f"{where}.max_turns")
    script = raw.get("script")
    if script is not None:
        if type(script) is not list:
            raise ConversationError("'script' must be a list of the user's replies (text)", f"{where}.script")
        for index, reply in enumerate(script):
            if type(reply) is not str or not reply.strip():
                raise ConversationError("a scripted reply must be non-empty text", f"{where}.script[{index}]")
        script = tuple(script)
    elif goal is None and persona is None:
        raise ConversationError(
            "a scenario needs a 'script' (a scripted user) or a 'goal' / 'persona' (an LLM-backed user)", where
        )
    return Scenario(
        opening=opening,
        persona=persona,
        goal=goal,
        stop=stop,
        max_turns=max_turns,
        script=cast("tuple[str, ...] | None", script),
        initial_state=dict(initial),
    )


def _persona_text(value: Any, where: str) -> str | None:
    """A persona as text: a string, or ADK's ``UserPersona`` object (``description`` and its
    ``behaviors``' descriptions, one per line)."""
    if value is None:
        return None
    if type(value) is str and value.strip():
        return value
    if type(value) is dict and type(value.get("description")) is str and value["description"].strip():
        lines = [value["description"]]
        behaviors = value.get("behaviors", [])
        if type(behaviors) is not list:
            raise ConversationError("'behaviors' must be a list", f"{where}.behaviors")
        for index, behavior in enumerate(behaviors):
            text = behavior.get("description") if type(behavior) is dict else behavior
            if type(text) is not str or not text.strip():
                raise ConversationError("a behaviour needs a 'description' (text)", f"{where}.behaviors[{index}]")
            lines.append(f"- {text}")
        return "\n".join(lines)
    raise ConversationError("'persona' must be text or an object with a 'description'", where)


def played_scenario(case: Case, run_metadata: Any) -> Conversation | None:
    """A scenario case as the :class:`Conversation` its run played (``None`` for any other case).

    The turns are the user messages of ``run_metadata["turns"]`` (what the simulator said, in
    order), with no per-turn expectation; the initial state is the scenario's. For scorers that
    read a whole conversation (a judge over the transcript), which would otherwise see a
    scenario case as one turn.

    Raises:
        ConversationError: The case's scenario is malformed.
    """
    scenario = scenario_of(case)
    if scenario is None:
        return None
    played = run_metadata.get("turns") if isinstance(run_metadata, Mapping) else None
    users = [t["user"] for t in played or [] if isinstance(t, Mapping) and type(t.get("user")) is str]
    return Conversation(turns=tuple(Turn(user=user) for user in users), initial_state=dict(scenario.initial_state))


SCENARIO_RECORD_KEYS = ("scenario", "conversation_scenario")
"""The keys a JSON Lines record may give its scenario under (ours, ADK's)."""


def scenario_record_input(record: Mapping[str, Any]) -> dict[str, JSON]:
    """The input of a record giving its scenario at the top level
    (``{"id": ..., "scenario": {...}, "initial_state": {...}}``, or ADK's ``conversation_scenario``
    with ``session_input.state`` as the initial state).

    Raises:
        ConversationError: Both keys given, or the scenario is malformed (JSON path named).
    """
    given = [key for key in SCENARIO_RECORD_KEYS if key in record]
    if len(given) != 1:
        raise ConversationError(
            "give the scenario once, as 'scenario' or 'conversation_scenario'", given[-1] if given else "scenario"
        )
    initial = record.get("initial_state")
    session_input = record.get("session_input")
    if initial is None and type(session_input) is dict:
        initial = session_input.get("state")
    input_value: dict[str, JSON] = {"scenario": record[given[0]]}
    if initial is not None:
        input_value["initial_state"] = initial
    try:
        parse_scenario(input_value)
    except ConversationError as exc:
        path = exc.field.removeprefix("input.")
        path = given[0] + path.removeprefix("scenario") if path.startswith("scenario") else path
        raise ConversationError(exc.reason, path) from None
    return input_value


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
