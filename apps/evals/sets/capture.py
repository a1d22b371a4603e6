"""Capturing a playground conversation as an eval case, and the eval data the playground shows.

The playground (``apps.agents``) sits below ``evals`` and never imports it: what it needs from
eval sets (a target's example input, a case's input typed into the chat) it asks through
:mod:`apps.agents.examples`, which :class:`EvalCaseExamples` answers (connected in
``EvalsConfig.ready``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.agents.examples import NO_INPUT
from apps.agents.models import InputMode, Message, Session
from apps.agents.registry import load_target
from apps.agents.services import BadInputError, as_text, free_text_field, input_template, turn_input
from apps.evals.models import EvalCase, EvalRun, EvalSet
from apps.evals.queries.runs import NEWEST_FIRST
from apps.evals.sets.case_edits import DuplicateCaseError as DuplicateCaseError  # re-exported: its old home
from apps.evals.sets.case_edits import append_case, check_case_values
from apps.evals.sets.cases import PORTAL_CAPTURE_SOURCES
from apps.traces.fields import non_finite_at
from evalcore.conversations import is_conversation_input
from evalcore.discovery import TargetSpec
from evalcore.errors import InvalidInputError
from evalcore.splits import validate_split


def last_set_id(target_id: str) -> int | None:
    """The id of the set ``target_id`` was last run on (``None``: never run)."""
    runs = EvalRun.objects.filter(target_id=target_id).order_by(NEWEST_FIRST, "-pk")
    return runs.values_list("eval_set_id", flat=True).first()


def usual_set_id(target_id: str, spec: TargetSpec | None) -> int | None:
    """The set a target is usually run on: the one it was last run on, else its
    ``default_set`` matched by file name (``None``: neither)."""
    set_id = last_set_id(target_id)
    if set_id is None and spec is not None and spec.default_set:
        stem = Path(spec.default_set).name.split(".")[0]
        set_id = EvalSet.objects.filter(name=stem).values_list("pk", flat=True).first()
    return set_id


class EvalCaseExamples:
    """The playground's example inputs, read from eval cases (see :mod:`apps.agents.examples`)."""

    def sample_input(self, target_id: str, spec: TargetSpec | None) -> Any:
        """The input of the first case of the set ``target_id`` is usually run on, or
        :data:`~apps.agents.examples.NO_INPUT`."""
        set_id = usual_set_id(target_id, spec)
        if set_id is None:
            return NO_INPUT
        case = EvalCase.objects.filter(eval_set_id=set_id).order_by("position", "case_id").only("input").first()
        return case.input if case is not None else NO_INPUT

    def case_input(self, case_pk: int) -> Any:
        """The input of the case with primary key ``case_pk``, or ``NO_INPUT`` (no such case)."""
        case = EvalCase.objects.filter(pk=case_pk).only("input").first()
        return case.input if case is not None else NO_INPUT


_ANSWER_KEYS = ("answer", "final_answer", "final", "output", "response", "text", "result")
_CALL_KEYS = ("tool_calls", "calls", "trajectory", "tools", "expected_calls")
_KIND_NAMES = {
    "text": "a string",
    "number": "a number",
    "bool": "true or false",
    "list": "a JSON list",
    "object": "a JSON object",
}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return "null"


@dataclass(slots=True)
class ExpectedShape:
    """The shape of a set's expected values, read from its cases.

    Attributes:
        kind: ``none`` (no case has one), ``text``, ``number``, ``bool``, ``list``, ``object``
            or ``mixed`` (cases disagree: anything goes).
        keys: For ``object``: the keys every sampled case has.
        example: One case's expected value (shown beside the form).
    """

    kind: str
    keys: list[str]
    example: Any = None

    def describe(self) -> str:
        """One line for the form: what a valid expected value looks like."""
        if self.kind == "object":
            return "a JSON object with " + (", ".join(f'"{k}"' for k in self.keys) or "any keys")
        return _KIND_NAMES.get(self.kind, "any JSON value")


def expected_shape(eval_set: EvalSet, sample: int = 200) -> ExpectedShape:
    """The shape of ``eval_set``'s expected values, from its first ``sample`` cases that have one
    (conversation cases left out: theirs are per turn)."""
    # a conversation case's expected value is per turn: it says nothing of the single-turn shape
    rows = (
        EvalCase.objects.filter(eval_set=eval_set, has_expected=True)
        .order_by("position", "case_id")
        .values_list("input", "expected")[:sample]
    )
    values: list[Any] = [expected for input_value, expected in rows if not is_conversation_input(input_value)]
    if not values:
        return ExpectedShape("none", [])
    kinds = {_kind(v) for v in values}
    if len(kinds) != 1:
        return ExpectedShape("mixed", [], values[0])
    kind = kinds.pop()
    keys: list[str] = []
    if kind == "object":
        common = set(values[0])
        for value in values[1:]:
            common &= set(value)
        keys = [k for k in values[0] if k in common]
    return ExpectedShape(kind, keys, values[0])


def _number_in(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    # ASCII digits only, and a number Python reads (a 5,000-digit run in an answer is no number)
    found = re.findall(r"-?[0-9][0-9,]*(?:\.[0-9]+)?", str(value or ""))
    if not found:
        return value
    text = found[-1].replace(",", "")
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return value


def shaped_expected(final: Any, tool_calls: list[Any], shape: ExpectedShape) -> Any:
    """The last answer (and its tool calls) as an expected value in the set's shape; ``None`` (an
    empty Expected field) when there is no answer: ``final`` is ``None`` (an errored turn or
    trace) and, for shapes that hold tool calls, there are none either."""
    if shape.kind == "none" or (final is None and (not tool_calls or shape.kind in ("text", "number", "bool"))):
        return None
    if shape.kind == "mixed":
        return {"answer": final, "tool_calls": tool_calls}
    if shape.kind == "text":
        return final if isinstance(final, str) else as_text(final)
    if shape.kind == "number":
        return _number_in(final)
    if shape.kind == "bool":
        return final if isinstance(final, bool) else str(final).strip().lower() in ("true", "yes", "1")
    if shape.kind == "list":
        return tool_calls if tool_calls or not isinstance(final, list) else final
    if isinstance(final, dict) and all(k in final for k in shape.keys):
        return final
    value: dict[str, Any] = {}
    for key in shape.keys:
        if key in _CALL_KEYS:
            value[key] = tool_calls
        elif key in _ANSWER_KEYS:
            value[key] = final
        elif isinstance(final, dict) and key in final:
            value[key] = final[key]
        else:
            value[key] = (shape.example or {}).get(key)
    return value


def check_expected(value: Any, shape: ExpectedShape) -> None:
    """Refuse an expected value that does not have the set's shape (``None``: no expected).

    Raises:
        ValueError: The value's kind differs, or an object lacks a key every case has.
    """
    if value is None or shape.kind in ("none", "mixed"):
        return
    if _kind(value) != shape.kind:
        raise InvalidInputError(
            f"this set's cases expect {shape.describe()}; this is {_KIND_NAMES.get(_kind(value), 'null')}",
            field="expected",
        )
    missing = [k for k in shape.keys if k not in value] if shape.kind == "object" else []
    if missing:
        raise InvalidInputError(
            f"this set's cases expect {shape.describe()}; missing: {', '.join(missing)}", field="expected"
        )


def _offered_calls(calls: Any) -> list[dict[str, Any]]:
    """A turn's recorded tool calls as expected calls ``[{"name", "arguments"}]``: the runtime's
    ``{"name", "arguments"}``, ``args`` for ``arguments``, or OpenAI's ``{"function": {"name",
    "arguments": JSON text}}``; a call without a name is left out (it could not be expected)."""
    offered: list[dict[str, Any]] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        nested = call.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else call
        name = function.get("name")
        arguments = function.get("arguments", function.get("args"))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {"arguments": arguments}
        if isinstance(name, str) and name:
            offered.append({"name": name, "arguments": arguments if isinstance(arguments, dict) else {}})
    return offered


def _turn_expectation(reply: Message | None) -> dict[str, Any]:
    """What a turn's answer offers as its expected value: ``{"final_response", "tool_calls"}``
    (``{}`` for a turn without an answer, or whose target failed: nothing to expect from it)."""
    if reply is None:
        return {}
    run = reply.run
    if run is not None and run.error:
        return {}
    final = run.final_answer if run is not None else reply.content
    calls = list((run.metadata or {}).get("tool_calls") or []) if run is not None else []
    text = final if isinstance(final, str) or final is None else as_text(final)
    return {"final_response": text, "tool_calls": _offered_calls(calls or reply.tool_calls)}


def conversation_defaults(session: Session) -> dict[str, Any] | None:
    """The whole session as one conversation case (:mod:`evalcore.conversations`), or ``None``
    when it is not one: fewer than two user turns, or a session whose target gets each message on
    its own (``text`` / ``json`` input modes: every turn is its own single-turn case).

    Returns:
        ``{"input": {"turns": [user messages]}, "expected": [one {"final_response", "tool_calls"}
        per turn, the agent's own answer offered as the expected one], "turns": [{"user",
        "final_response", "tool_calls"}] (what the form shows), "run_ids": [...]}``.
    """
    if session.input_mode != InputMode.CONVERSATION:
        return None
    messages = list(session.messages.select_related("run").order_by("id"))
    pairs: list[tuple[Message, Message | None]] = []
    for message in messages:
        if message.role == Message.Role.USER:
            pairs.append((message, None))
        elif pairs and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], message)
    pairs = [(user, reply) for user, reply in pairs if user.content.strip()]
    if len(pairs) < 2:
        return None
    expected = [_turn_expectation(reply) for _, reply in pairs]
    return {
        "input": {"turns": [user.content for user, _ in pairs]},
        "expected": expected,
        "turns": [{"user": user.content, **offered} for (user, _), offered in zip(pairs, expected, strict=True)],
        "run_ids": [m.run.run_id for m in messages if m.run_id and m.run is not None],
    }


def captured_defaults(session: Session, eval_set: EvalSet | None = None, *, whole: bool = True) -> dict[str, Any]:
    """Suggested input / expected for capturing a session.

    A conversation of two or more turns is one conversation case (:func:`conversation_defaults`:
    every user turn, each turn's answer and tool calls offered as its expected value). Otherwise
    the conversation up to the last user message, and the last answer with the tool trajectory of
    that turn (in the shape of ``eval_set``'s expected values when given, see
    :func:`shaped_expected`); ``whole=False`` asks for that last turn of a conversation too.

    Returns:
        ``{"input": ..., "expected": ..., "run_ids": [traces run ids of the session's turns]}``,
        and ``"turns"`` (the offered turns) for a conversation case.
    """
    conversation = conversation_defaults(session) if whole else None
    if conversation is not None:
        return conversation
    messages = list(session.messages.order_by("id"))
    last_reply = next((m for m in reversed(messages) if m.role == Message.Role.ASSISTANT), None)
    upto = messages[: messages.index(last_reply)] if last_reply else messages
    final: Any = None
    tool_calls: list[Any] = []
    if last_reply is not None:
        run = last_reply.run
        final = run.final_answer if run is not None else last_reply.content
        tool_calls = list((run.metadata or {}).get("tool_calls") or []) if run is not None else []
        tool_calls = tool_calls or list(last_reply.tool_calls or [])
    turns = [{"role": m.role, "content": m.content} for m in upto]
    last_user = next((m["content"] for m in reversed(turns) if m["role"] == "user"), "")
    if session.input_mode == "text":
        captured_input: Any = last_user
    elif session.input_mode == "json":
        # what the target was sent: plain text went into the input's one free-text field
        spec: TargetSpec | None
        try:
            spec = load_target(session.target_id)
        except (LookupError, FileNotFoundError):
            spec = None
        template = input_template(session.target_id, spec)
        try:
            captured_input = turn_input(session, [], last_user, template, free_text_field(template, spec))
        except BadInputError:
            captured_input = last_user
    else:
        captured_input = turns
    if eval_set is not None:
        expected = shaped_expected(final, tool_calls, expected_shape(eval_set))
    else:
        expected = {"answer": final, "tool_calls": tool_calls}
    return {
        "input": captured_input,
        "expected": expected,
        "run_ids": [m.run.run_id for m in messages if m.run_id and m.run is not None],
    }


def capture_session_as_case(
    *,
    session: Session,
    eval_set: EvalSet,
    split: str,
    tags: list[str],
    case_id: str,
    input: Any,
    expected: Any,
    user: Any,
) -> EvalCase:
    """Save a playground conversation as an eval case, in one transaction.

    An ``expected`` of ``None`` means the case has no reference answer.

    The case's metadata links back to its source: session id, the runs of its turns, and who
    captured it. The case goes after the set's last case.

    Raises:
        DuplicateCaseError: The set already has ``case_id``.
        InvalidInputError: An unknown split, an empty case id, or an expected value not in the shape
            of the set's cases (see :func:`check_expected`).
    """
    source = captured_defaults(session)
    metadata = {
        "source": "playground",
        "session_id": session.pk,
        "target_id": session.target_id,
        "variant": session.variant,
        "run_ids": source["run_ids"],
        "captured_by": getattr(user, "username", ""),
    }
    return add_captured_case(
        eval_set=eval_set,
        split=split,
        tags=tags,
        case_id=case_id,
        input=input,
        expected=expected,
        metadata=metadata,
        user=user,
    )


def add_captured_case(
    *,
    eval_set: EvalSet,
    split: str,
    tags: list[str],
    case_id: str,
    input: Any,
    expected: Any,
    metadata: dict[str, Any],
    user: Any,
) -> EvalCase:
    """Append a case captured from a conversation or a trace to ``eval_set``, in one transaction
    (the one write path of :func:`capture_session_as_case` and of the trace capture page, whose
    metadata comes from :func:`apps.evals.sets.trace_capture.trace_case_metadata`).

    Raises:
        DuplicateCaseError: The set already has ``case_id``.
        InvalidInputError: An unknown split, an empty case id, an expected value not in the shape
            of the set's cases (see :func:`check_expected`), or a NaN / infinity in the input, the
            expected value or the metadata (``field`` names which).
        ValueError: ``metadata["source"]`` is not one of :data:`PORTAL_CAPTURE_SOURCES` (a new
            capture path must be listed there, or a re-import of the set would delete its cases).
    """
    if metadata.get("source") not in PORTAL_CAPTURE_SOURCES:
        raise ValueError(f"capture source {metadata.get('source')!r} is not in PORTAL_CAPTURE_SOURCES")
    validate_split(split)
    case_id = case_id.strip()
    if not case_id:
        raise InvalidInputError("a case needs an id", field="case_id")
    for name, value in (("input", input), ("expected", expected), ("metadata", metadata)):
        where = non_finite_at(value, "")
        if where is not None:
            raise InvalidInputError(
                f"{name}{where[0]}: {where[1]!r} is not valid JSON (NaN / Infinity are refused)", field=name
            )
    check_case_values(input, expected)  # a conversation case must read as one (path in the error)
    if not is_conversation_input(input):  # a conversation's expectations are per turn, not the set's shape
        check_expected(expected, expected_shape(eval_set))
    return append_case(
        eval_set=eval_set,
        case_id=case_id,
        input_value=input,
        expected=expected,
        tags=[t for t in tags if t],
        split=split,
        metadata=metadata,
        user=user,
        source=f"captured case {case_id}",
    )
