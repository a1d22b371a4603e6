"""Playground writes: sessions and chat turns (each one a traced ``Run``).

Capturing a conversation as an eval case is the evals app's (``apps.evals.sets.capture``): this
layer never imports ``evals``.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction

from apps.agents.examples import NO_INPUT, example_source
from apps.agents.models import Message, Session
from apps.agents.registry import load_target
from apps.traces.models import Run
from apps.traces.services import save_run
from evalcore.discovery import TargetSpec
from evalcore.errors import InvalidInputError
from evalcore.inference import run_case
from evalcore.redact import redact_text
from evalcore.types import Case


def start_session(*, user: Any, target_id: str, variant: str = "", input_mode: str = "conversation") -> Session:
    """A new playground session with a target (the target is resolved at each turn).

    ``input_mode`` is what the target receives each turn: ``conversation`` (the chat as
    ``[{role, content}]``), ``text`` (the message string) or ``json`` (the message parsed).
    """
    return Session.objects.create(
        user=user, target_id=target_id, variant=variant, input_mode=input_mode, title=f"chat with {target_id}"
    )


class BadInputError(InvalidInputError):
    """A message that cannot become the target's input (e.g. invalid JSON in ``json`` mode)."""


def _schema_template(schema: dict[str, Any]) -> Any:
    """An example value for a JSON-schema-like declaration (strings empty, numbers 0)."""
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if kind == "object" or "properties" in schema:
        return {k: _schema_template(v or {}) for k, v in (schema.get("properties") or {}).items()}
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "null": None}.get(str(kind), "")


def input_template(target_id: str, spec: TargetSpec | None = None) -> Any:
    """What a JSON target's input looks like, for the playground: from the target's declared
    ``input_schema``, else an example input (the evals app's: the first case of the set the
    target was last run on, else of its ``default_set``; see :mod:`apps.agents.examples`).
    ``None`` when nothing tells.
    """
    schema = spec.input_schema if spec is not None else None
    if schema:
        return _schema_template(schema)
    example = example_source().sample_input(target_id, spec)
    return None if example is NO_INPUT else example


def free_text_field(template: Any, spec: TargetSpec | None = None) -> str | None:
    """The one free-text field of a JSON input (an object with exactly one string value, or a
    schema with exactly one string property), which plain text fills; else ``None``."""
    schema = spec.input_schema if spec is not None else None
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


def as_text(value: Any) -> str:
    """A target's answer as chat text: strings as they are, other values as indented JSON."""
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
        # an error text is redacted (an endpoint may echo a key); the target's answer never is
        text = (
            redact_text(f"[error] {record.error.type}: {record.error.message}")
            if record.error
            else as_text(record.output)
        )
        reply = Message.objects.create(
            session=session,
            role=Message.Role.ASSISTANT,
            content=text,
            run=run,
            tool_calls=list(record.metadata.get("tool_calls") or []),
        )
    return Turn(user_message, reply, run)
