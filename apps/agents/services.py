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


def turn_input(session: Session, history: list[dict[str, str]], content: str) -> Any:
    """The target's input for a new message, per the session's input mode.

    Raises:
        BadInputError: ``json`` mode and the message is not valid JSON (position given).
    """
    if session.input_mode == "text":
        return content
    if session.input_mode == "json":
        try:
            return json.loads(content)
        except json.JSONDecodeError as exc:
            raise BadInputError(f"this session sends JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
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
    target_input = turn_input(session, history, content)
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


def captured_defaults(session: Session) -> dict[str, Any]:
    """Suggested input / expected for capturing a session: the conversation up to the last
    user message, and the last answer with the tool trajectory of that turn."""
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
        try:
            captured_input = json.loads(last_user)
        except json.JSONDecodeError:
            captured_input = last_user
    else:
        captured_input = turns
    return {
        "input": captured_input,
        "expected": {"answer": final, "tool_calls": tool_calls},
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
        ValueError: An unknown split or an empty case id.
    """
    from evalcore.splits import validate_split

    validate_split(split)
    case_id = case_id.strip()
    if not case_id:
        raise ValueError("a case needs an id")
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
