"""Cases written through the API, conversation cases included (mounted at ``/api/eval/`` by
``evalsite.api``, before the other evals routers).

* ``POST /cases`` adds a case to a set (``set_id`` in the body), ``PUT /cases/{id}`` replaces a
  case's content (``id``: the case's row id, as ``EvalCaseOut`` gives it; paths apart from the
  sets router's ``/sets/{id}/cases``, since only the first router matching a path answers it).
  A conversation case (``input`` ``{"turns": [...], "initial_state": {...}}`` with a per-turn
  ``expected``, or the turn-by-turn ``turns`` of a JSON Lines record: see
  :mod:`evalcore.conversations`) is checked as the loaders check it; a malformed one is a 422
  whose ``field`` is the JSON path at fault (``input.turns[1]``, ``expected[0].tool_calls``).
* ``POST /cases/from-session`` captures a playground session (``session_id``) or a trace
  (``trace_id``: a playground turn's trace captures its session, an ingested OTLP trace itself) as
  a case: a conversation of two or more turns becomes ONE conversation case, each turn's answer
  and tool calls offered as its expected value (:func:`apps.evals.sets.capture.captured_defaults`).

No ``from __future__ import annotations``: ninja reads the operations' annotations at import.
"""

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.responses import Status
from pydantic import Field

from apps.agents.models import Message, Session
from apps.core import access
from apps.evals.api.common import ERRORS
from apps.evals.api.common import get_or_404 as _get_or_404
from apps.evals.api.common import require as _require
from apps.evals.api.schemas import ApiError, EvalCaseOut
from apps.evals.models import EvalCase, EvalSet, Split
from apps.evals.sets.capture import add_captured_case, capture_session_as_case, captured_defaults
from apps.evals.sets.case_edits import CaseShapeError, create_case, update_case
from apps.evals.sets.trace_capture import is_ingested, trace_case_metadata, trace_defaults
from apps.traces.access import readable_runs
from apps.traces.models import Run
from evalcore.conversations import ConversationError, record_to_fields
from evalcore.jsonvalue import MISSING

router = Router(tags=["eval"])


class CaseIn(Schema):
    """A case to add. Give ``input`` (and ``expected``), or a conversation turn by turn:
    ``turns`` (``[{"user", "final_response", "tool_calls", "rubric"}]``) with optional
    ``initial_state`` / ``final_state``. ``expected`` left out or ``null``: no expected value."""

    set_id: int
    case_id: str = Field(min_length=1, max_length=300)
    input: Any = None
    expected: Any = None
    turns: list[Any] | None = None
    initial_state: dict[str, Any] | None = None
    final_state: dict[str, Any] | None = None
    tags: list[str] = []
    split: Split = Split.DEV
    metadata: dict[str, Any] = {}


class CaseUpdateIn(Schema):
    """A case's new content (its id stays): the fields of :class:`CaseIn` but ``case_id``."""

    input: Any = None
    expected: Any = None
    turns: list[Any] | None = None
    initial_state: dict[str, Any] | None = None
    final_state: dict[str, Any] | None = None
    tags: list[str] = []
    split: Split = Split.DEV
    metadata: dict[str, Any] = {}


class FromSessionIn(Schema):
    """Capture a playground session (``session_id``) or a trace (``trace_id``) as a case.

    ``input`` / ``expected`` left out take the captured conversation: a session of two or more
    turns as one conversation case (every user turn; each turn's answer and tool calls as its
    expected value), else the last answer with its tool trajectory; an explicit ``null``
    ``expected`` is kept (no reference answer). ``case_id`` defaults to ``session-<id>`` /
    ``trace-<trace id prefix>``.
    """

    session_id: int | None = None
    trace_id: str | None = Field(None, min_length=1, max_length=512)
    set_id: int
    split: Split = Split.TRAIN
    tags: list[str] = []
    case_id: str | None = Field(None, max_length=300)
    input: Any = None
    expected: Any = None


def _case_values(data: CaseIn | CaseUpdateIn) -> tuple[Any, Any]:
    """``(input, expected)`` of a request: as given, or built from its ``turns``.

    Raises:
        ApiError: 422 naming the field: ``turns`` beside ``input`` / ``expected``, a malformed
            turn (``turns[1].user``), or no input at all.
    """
    given = data.model_fields_set
    conversation_keys = {"turns", "initial_state", "final_state"} & given
    if conversation_keys:
        if {"input", "expected"} & given:
            raise ApiError(422, "turns: give a conversation as 'turns' or as 'input' / 'expected', not both", "turns")
        record = {key: getattr(data, key) for key in conversation_keys}
        try:
            input_value, expected = record_to_fields(record)
        except ConversationError as exc:
            raise ApiError(422, f"{exc.field}: {exc.reason}", exc.field) from None
        return input_value, None if expected is MISSING else expected
    if "input" not in given:
        raise ApiError(422, "input: a case needs an input (or a conversation's 'turns')", "input")
    return data.input, data.expected


@router.post("/cases", response={201: EvalCaseOut, **ERRORS}, summary="Add a case (conversation cases included)")
def add_case(request: HttpRequest, data: CaseIn) -> Any:
    user = _require(request, access.can_capture, "add cases")
    eval_set = _get_or_404(EvalSet, "set_id", pk=data.set_id)
    input_value, expected = _case_values(data)
    try:
        case = create_case(  # DuplicateCaseError, an unknown split: 400
            eval_set=eval_set,
            case_id=data.case_id,
            input_value=input_value,
            expected=expected,
            tags=data.tags,
            split=data.split,
            metadata=data.metadata,
            user=user,
        )
    except CaseShapeError as exc:
        raise ApiError(422, exc.message, exc.field) from None
    return Status(201, case)


@router.put(
    "/cases/{int:case_pk}",
    response={200: EvalCaseOut, **ERRORS},
    summary="Replace a case's content (conversation cases included)",
)
def replace_case(request: HttpRequest, case_pk: int, data: CaseUpdateIn) -> Any:
    user = _require(request, access.can_capture, "edit cases")
    case = _get_or_404(EvalCase.objects.select_related("eval_set"), "id", pk=case_pk)
    input_value, expected = _case_values(data)
    try:
        return update_case(
            case=case,
            input_value=input_value,
            expected=expected,
            tags=data.tags,
            split=data.split,
            metadata=data.metadata,
            user=user,
        )
    except CaseShapeError as exc:
        raise ApiError(422, exc.message, exc.field) from None


@router.post(
    "/cases/from-session",
    response={201: EvalCaseOut, **ERRORS},
    summary="Capture a session as a case",
    # the operation id it had in api/routes.py, whose route this one replaces (same path)
    operation_id="apps_evals_api_routes_capture_case",
)
def capture_case(request: HttpRequest, data: FromSessionIn) -> Any:
    user = _require(request, access.can_capture, "capture cases")
    if (data.session_id is None) == (data.trace_id is None):
        raise ApiError(422, "give a playground session_id or a trace_id (one of them)", "session_id")
    eval_set = _get_or_404(EvalSet, "set_id", pk=data.set_id)
    given = data.model_fields_set
    session_pk, field = data.session_id, "session_id"
    if data.trace_id is not None:
        run = _get_or_404(readable_runs(user).order_by("started", "pk"), "trace_id", trace_id=data.trace_id)
        session_pk = Message.objects.filter(run=run).values_list("session_id", flat=True).first()
        field = "trace_id"
        if session_pk is None:  # not a playground turn: an ingested trace is a case of its own
            return Status(201, _capture_trace(run, eval_set, data, user))
    # a member captures only their own conversations (staff any), as on the playground page
    owned = {} if user.is_staff else {"user": user}
    session = _get_or_404(Session, field, pk=session_pk, **owned)
    # Omitted input / expected take the captured conversation; an explicit "expected": null is
    # kept as given and means "no reference answer" (the only way to say so in this route).
    defaults = captured_defaults(session, eval_set)
    try:
        case = capture_session_as_case(  # DuplicateCaseError, a bad expected value: 400
            session=session,
            eval_set=eval_set,
            split=data.split,
            tags=data.tags,
            case_id=data.case_id or f"session-{session.pk}",
            input=data.input if "input" in given else defaults["input"],
            expected=data.expected if "expected" in given else defaults["expected"],
            user=user,
        )
    except CaseShapeError as exc:
        raise ApiError(422, exc.message, exc.field) from None
    return Status(201, case)


def _capture_trace(run: Run, eval_set: EvalSet, data: FromSessionIn, user: Any) -> EvalCase:
    """An ingested (OTLP) trace as a case (:mod:`apps.evals.sets.trace_capture`).

    Raises:
        ApiError: 400 for a trace that did not come in over OTLP; 422 for a malformed
            conversation given as its input.
    """
    if not is_ingested(run):
        raise ApiError(400, f"trace {data.trace_id!r} is neither a playground turn nor an ingested trace", "trace_id")
    defaults = trace_defaults(run, eval_set)
    given = data.model_fields_set
    try:
        return add_captured_case(
            eval_set=eval_set,
            split=data.split,
            tags=data.tags,
            case_id=data.case_id or f"trace-{run.trace_id[:16]}",
            input=data.input if "input" in given else defaults["input"],
            expected=data.expected if "expected" in given else defaults["expected"],
            metadata=trace_case_metadata(run, user),
            user=user,
        )
    except CaseShapeError as exc:
        raise ApiError(422, exc.message, exc.field) from None
