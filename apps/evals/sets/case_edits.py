"""Writing one case by hand: the API's case routes (``POST`` / ``PUT``) and the admin's case form.

A case is checked as a case-bank record is (:mod:`evalcore.loaders`): a conversation case
(``input`` ``{"turns": [...], "initial_state": {...}}``, see :mod:`evalcore.conversations`)
must read as one, and an error names the JSON path at fault (``input.turns[1]``,
``expected[0].tool_calls[0].arguments``), so nothing malformed is stored to fail at run time.
Every write is one transaction with the set's content hash and next version
(:func:`apps.evals.sets.cases.refresh_set_hashes`).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from apps.evals.models import EvalCase, EvalSet
from apps.evals.sets.cases import refresh_set_hashes
from apps.traces.fields import non_finite_at
from evalcore.conversations import ConversationError, check_case_shape
from evalcore.errors import InvalidInputError
from evalcore.jsonvalue import MISSING
from evalcore.loaders import nul_at, surrogate_at
from evalcore.splits import validate_split


class DuplicateCaseError(InvalidInputError):
    """The set already has a case with that id."""

    field = "case_id"


class CaseShapeError(InvalidInputError):
    """A case value of the wrong shape; ``field`` is the JSON path at fault (``input.turns[1]``)."""


def check_case_values(input_value: Any, expected: Any) -> None:
    """Refuse a case's input / expected value no store or run could use.

    ``expected`` is ``None`` (or :data:`~evalcore.jsonvalue.MISSING`) for a case without one.

    Raises:
        CaseShapeError: A NaN / infinity, a NUL character or a lone surrogate in either value,
            or a conversation or scenario case that does not read as one
            (:func:`evalcore.conversations.check_case_shape`: a turn without a user message, an
            expected value of the wrong shape, an unknown field, a scenario's ``max_turns`` out of
            range); ``field`` is the JSON path, e.g. ``input.turns[1]``.
    """
    for name, value in (("input", input_value), ("expected", expected)):
        if value is MISSING:
            continue
        found = non_finite_at(value, "")
        if found is not None:
            raise CaseShapeError(f"{name}{found[0]}: {found[1]!r} is not valid JSON (NaN / Infinity)", field=name)
        where = nul_at(value)
        if where is not None:
            raise CaseShapeError(f"{name}{where}: text may not contain a NUL character (U+0000)", field=name)
        lone = surrogate_at(value)
        if lone is not None:
            raise CaseShapeError(f"{name}{lone[0]}: text may not contain a lone UTF-16 surrogate", field=name)
    try:
        check_case_shape(input_value, MISSING if expected is None else expected)
    except ConversationError as exc:
        raise CaseShapeError(f"{exc.field}: {exc.reason}", field=exc.field) from None


def _checked_common(*, split: str, input_value: Any, expected: Any, tags: list[str], metadata: Any) -> list[str]:
    validate_split(split)
    check_case_values(input_value, expected)
    if not isinstance(metadata, dict):
        raise CaseShapeError("metadata must be a JSON object", field="metadata")
    if non_finite_at(metadata, "") is not None:
        raise CaseShapeError("metadata: NaN / Infinity are not valid JSON", field="metadata")
    return [t.strip() for t in tags if t and t.strip()]


def create_case(
    *,
    eval_set: EvalSet,
    case_id: str,
    input_value: Any,
    expected: Any,
    tags: list[str],
    split: str,
    metadata: dict[str, Any],
    user: Any,
) -> EvalCase:
    """Add a case after the set's last one, in one transaction (``expected`` ``None``: none).

    Raises:
        DuplicateCaseError: The set already has ``case_id``.
        CaseShapeError: See :func:`check_case_values`; also a metadata value that is not an object.
        InvalidInputError: An empty case id or an unknown split.
    """
    case_id = case_id.strip()
    if not case_id:
        raise InvalidInputError("a case needs an id", field="case_id")
    tags = _checked_common(split=split, input_value=input_value, expected=expected, tags=tags, metadata=metadata)
    return append_case(
        eval_set=eval_set,
        case_id=case_id,
        input_value=input_value,
        expected=expected,
        tags=tags,
        split=split,
        metadata=metadata,
        user=user,
        source=f"api: case {case_id} added",
    )


def append_case(
    *,
    eval_set: EvalSet,
    case_id: str,
    input_value: Any,
    expected: Any,
    tags: list[str],
    split: str,
    metadata: dict[str, Any],
    user: Any,
    source: str,
) -> EvalCase:
    """Insert a checked case after the set's last one and record the set's new version (``source``
    says how), in one transaction: the one insert of the API and of the capture paths.

    Raises:
        DuplicateCaseError: The set already has ``case_id`` (also when two writers race for it:
            the unique constraint decides; any other integrity error is not reported as one).
    """
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
                input=input_value,
                expected=expected,
                has_expected=expected is not None,
                tags=tags,
                split=split,
                metadata=metadata,
                position=(last if last is not None else -1) + 1,
            )
            refresh_set_hashes([eval_set.pk], source=source, user=user)
            return case
    except IntegrityError:
        if EvalCase.objects.filter(eval_set=eval_set, case_id=case_id).exists():
            raise DuplicateCaseError(f"set {eval_set.name} already has a case {case_id!r}") from None
        raise


def update_case(
    *,
    case: EvalCase,
    input_value: Any,
    expected: Any,
    tags: list[str],
    split: str,
    metadata: dict[str, Any],
    user: Any,
) -> EvalCase:
    """Replace a case's input, expected value (``None``: none), tags, split and metadata, in one
    transaction; its id and position stay.

    Raises:
        CaseShapeError: See :func:`check_case_values`; also a metadata value that is not an object.
        InvalidInputError: An unknown split.
    """
    tags = _checked_common(split=split, input_value=input_value, expected=expected, tags=tags, metadata=metadata)
    with transaction.atomic():
        case.input = input_value
        case.expected = expected
        case.has_expected = expected is not None
        case.tags = tags
        case.split = split
        case.metadata = metadata
        case.save(update_fields=["input", "expected", "has_expected", "tags", "split", "metadata"])
        refresh_set_hashes([case.eval_set_id], source=f"api: case {case.case_id} edited", user=user)
    return case
