"""Playground writes: sessions, chat turns (each one a traced ``Run``), and capturing a
conversation as an eval case.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import IntegrityError, transaction

from apps.agents.models import Message, Session
from apps.evals.models import EvalCase, EvalSet
from apps.evals.services import refresh_set_hashes
from apps.traces.models import Run
from apps.traces.services import save_run
from evalcore.runner import run_case
from evalcore.types import Case


class DuplicateCaseError(ValueError):
    """The set already has a case with that id."""


def start_session(*, user: Any, target_id: str, variant: str = "", input_mode: str = "conversation") -> Session:
    """A new playground session with a target (the target is resolved at each turn).

    ``input_mode`` is what the target receives each turn: ``conversation`` (the chat as
    ``[{role, content}]``), ``text`` (the message string) or ``json`` (the message parsed).
    """
    return Session.objects.create(
        user=user, target_id=target_id, variant=variant, input_mode=input_mode, title=f"chat with {target_id}"
    )


class BadInputError(ValueError):
    """A message that cannot become the target's input (e.g. invalid JSON in ``json`` mode)."""


def _schema_template(schema: dict[str, Any]) -> Any:
    """An example value for a JSON-schema-like declaration (strings empty, numbers 0)."""
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if kind == "object" or "properties" in schema:
        return {k: _schema_template(v or {}) for k, v in (schema.get("properties") or {}).items()}
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "null": None}.get(kind, "")


def input_template(target_id: str, spec: Any = None) -> Any:
    """What a JSON target's input looks like, for the playground: from the target's declared
    ``input_schema``, else the first case of the set it was last run on (else of its
    ``default_set``, matched by file name). ``None`` when nothing tells.
    """
    schema = getattr(spec, "input_schema", None)
    if schema:
        return _schema_template(schema)
    set_id = last_set_id(target_id)
    if set_id is None and getattr(spec, "default_set", None):
        stem = Path(spec.default_set).name.split(".")[0]
        set_id = EvalSet.objects.filter(name=stem).values_list("pk", flat=True).first()
    if set_id is None:
        return None
    case = EvalCase.objects.filter(eval_set_id=set_id).order_by("position", "case_id").only("input").first()
    return case.input if case is not None else None


def last_set_id(target_id: str) -> int | None:
    """The id of the set ``target_id`` was last run on (``None``: never run)."""
    from apps.evals.models import EvalRun
    from apps.evals.queries import NEWEST_FIRST

    runs = EvalRun.objects.filter(target_id=target_id).order_by(NEWEST_FIRST, "-pk")
    return runs.values_list("eval_set_id", flat=True).first()


def free_text_field(template: Any, spec: Any = None) -> str | None:
    """The one free-text field of a JSON input (an object with exactly one string value, or a
    schema with exactly one string property), which plain text fills; else ``None``."""
    schema = getattr(spec, "input_schema", None)
    if schema and schema.get("properties"):
        names = [k for k, v in schema["properties"].items() if (v or {}).get("type") == "string"]
    elif isinstance(template, dict):
        names = [k for k, v in template.items() if isinstance(v, str)]
    else:
        return None
    return names[0] if len(names) == 1 else None


def turn_input(
    session: Session, history: list[dict[str, str]], content: str, template: Any = None, free_field: str | None = None
) -> Any:
    """The target's input for a new message, per the session's input mode.

    In ``json`` mode a message that is not JSON (and does not start like JSON) is plain text:
    it becomes the ``free_field`` of ``template`` when the input has one free-text field.

    Raises:
        BadInputError: ``json`` mode and the message is not valid JSON (position given), or
            plain text where the input has no single free-text field.
    """
    if session.input_mode == "text":
        return content
    if session.input_mode == "json":
        text = content.strip()
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            if free_field is None or text[:1] in "{[":
                hint = f" (the input looks like {json.dumps(template, ensure_ascii=False)[:300]})" if template else ""
                raise BadInputError(
                    f"this target takes JSON: line {exc.lineno} column {exc.colno}: {exc.msg}{hint}"
                ) from None
            return {**template, free_field: content}
        if free_field is not None and isinstance(template, dict) and not isinstance(value, dict):
            return {**template, free_field: content}
        return value
    return [*history, {"role": "user", "content": content}]


def conversation(session: Session) -> list[dict[str, str]]:
    """The session so far as ``[{role, content}]`` messages, oldest first."""
    return [{"role": m.role, "content": m.content} for m in session.messages.order_by("id")]


@dataclass(slots=True)
class Turn:
    """One exchange: the user's message, the target's answer, and its traced run."""

    user_message: Message
    reply: Message
    run: Run


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


def chat_turn(*, session: Session, content: str, agents_dir: str | Path | None = None, timeout_s: float = 60.0) -> Turn:
    """Synchronous form of :func:`achat_turn` (tests, the shell, sync callers)."""
    return async_to_sync(achat_turn)(session=session, content=content, agents_dir=agents_dir, timeout_s=timeout_s)


async def achat_turn(
    *, session: Session, content: str, agents_dir: str | Path | None = None, timeout_s: float = 60.0
) -> Turn:
    """Send ``content`` to the session's target with the whole conversation as input.

    The target runs through the engine's ``run_case`` (a ``Tracer`` records its spans), the run
    and its events are stored with ``save_run``, and the answer becomes an assistant message
    linked to that run. A target error is shown as the reply (``[error] ...``), never raised.

    Async so a slow target (up to ``timeout_s``) never holds the server's shared thread for sync
    views: only the database work runs there, briefly.

    Raises:
        LookupError: The session's target is not declared anymore.
    """
    from apps.evals.services import load_target

    # discovery imports the agents' modules: off the event loop, off the shared sync thread
    spec = await sync_to_async(load_target, thread_sensitive=False)(session.target_id, agents_dir)
    resolved, label = spec.resolve(session.variant or None)
    history = await sync_to_async(conversation)(session)
    template, free_field = None, None
    if session.input_mode == "json":
        template = await sync_to_async(input_template)(session.target_id, spec)
        free_field = free_text_field(template, spec)
    target_input = turn_input(session, history, content, template, free_field)
    turn_no = len(history) // 2 + 1
    case = Case(id=f"turn{turn_no}-{secrets.token_hex(3)}", input=target_input, metadata={"session_id": session.pk})
    record, tracer = await run_case(
        case,
        resolved,
        eval_run_id=f"playground-{session.pk}",
        timeout_s=timeout_s,
        variant=label,
        run_metadata={"target_id": spec.id, "session_id": session.pk},
    )
    return await sync_to_async(_save_turn)(session, content, record, tracer.events, spec.id)


def _save_turn(session: Session, content: str, record: Any, events: list[Any], target_id: str) -> Turn:
    with transaction.atomic():
        # a conversation is its owner's: its traces are readable by the owner and staff only
        run = save_run(record, events, target_id=target_id, private=True, owner=session.user)
        user_message = Message.objects.create(session=session, role=Message.Role.USER, content=content)
        text = f"[error] {record.error.type}: {record.error.message}" if record.error else _as_text(record.output)
        reply = Message.objects.create(
            session=session,
            role=Message.Role.ASSISTANT,
            content=text,
            run=run,
            tool_calls=list(record.metadata.get("tool_calls") or []),
        )
    return Turn(user_message, reply, run)


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
    """The shape of ``eval_set``'s expected values, from its first ``sample`` cases that have one."""
    values = list(
        EvalCase.objects.filter(eval_set=eval_set, has_expected=True)
        .order_by("position", "case_id")
        .values_list("expected", flat=True)[:sample]
    )
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
    import re

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    found = re.findall(r"-?\d[\d,]*(?:\.\d+)?", str(value or ""))
    if not found:
        return value
    text = found[-1].replace(",", "")
    return float(text) if "." in text else int(text)


def shaped_expected(final: Any, tool_calls: list[Any], shape: ExpectedShape) -> Any:
    """The last answer (and its tool calls) as an expected value in the set's shape."""
    if shape.kind == "none":
        return None
    if shape.kind == "mixed":
        return {"answer": final, "tool_calls": tool_calls}
    if shape.kind == "text":
        return final if isinstance(final, str) else _as_text(final)
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
        raise ValueError(f"this set's cases expect {shape.describe()}; this is {_KIND_NAMES.get(_kind(value), 'null')}")
    missing = [k for k in shape.keys if k not in value] if shape.kind == "object" else []
    if missing:
        raise ValueError(f"this set's cases expect {shape.describe()}; missing: {', '.join(missing)}")


def captured_defaults(session: Session, eval_set: EvalSet | None = None) -> dict[str, Any]:
    """Suggested input / expected for capturing a session: the conversation up to the last
    user message, and the last answer with the tool trajectory of that turn (in the shape of
    ``eval_set``'s expected values when given, see :func:`shaped_expected`)."""
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
        from apps.evals.services import load_target

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
        ValueError: An unknown split, an empty case id, or an expected value not in the shape
            of the set's cases (see :func:`check_expected`).
    """
    from evalcore.splits import validate_split

    validate_split(split)
    case_id = case_id.strip()
    if not case_id:
        raise ValueError("a case needs an id")
    check_expected(expected, expected_shape(eval_set))
    source = captured_defaults(session)
    metadata = {
        "source": "playground",
        "session_id": session.pk,
        "target_id": session.target_id,
        "variant": session.variant,
        "run_ids": source["run_ids"],
        "captured_by": getattr(user, "username", ""),
    }
    try:
        with transaction.atomic():
            if EvalCase.objects.filter(eval_set=eval_set, case_id=case_id).exists():
                raise DuplicateCaseError(f"set {eval_set.name} already has a case {case_id!r}")
            last = (
                EvalCase.objects.filter(eval_set=eval_set)
                .order_by("-position")
                .values_list("position", flat=True)
                .first()
            )
            case = EvalCase.objects.create(
                eval_set=eval_set,
                case_id=case_id,
                input=input,
                expected=expected,
                has_expected=expected is not None,
                tags=[t for t in tags if t],
                split=split,
                metadata=metadata,
                position=(last if last is not None else -1) + 1,
            )
            refresh_set_hashes([eval_set.pk])
            return case
    except IntegrityError:
        # Two captures racing for the same id: the unique constraint decides.
        raise DuplicateCaseError(f"set {eval_set.name} already has a case {case_id!r}") from None
