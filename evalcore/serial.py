"""One way between engine values and their stored JSON records: pydantic ``TypeAdapter``s over the dataclasses.

:func:`to_record` turns a :class:`~evalcore.types.Case`, :class:`~evalcore.types.Score`,
:class:`~evalcore.scorers.base.ScorerSpec`, :class:`~evalcore.judge.parsing.JudgeVerdict`,
:class:`~evalcore.report.EvalReport` (any engine dataclass) into the dict stored in the database,
the judge cache or a case-bank file; :func:`from_record` validates such a dict back into the value.
The records keep the shapes already stored (field order, keys, ``expected`` left out of a case
record when the case has none), so existing databases read the same.

Arbitrary user values (a target's output, a trace payload) have no schema: they go through
:func:`evalcore.jsonvalue.to_json`, which refuses NaN and foreign objects by name.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import TypeAdapter

_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def adapter[T](cls: type[T]) -> TypeAdapter[T]:
    """The (cached) ``TypeAdapter`` of an engine dataclass."""
    found = _ADAPTERS.get(cls)
    if found is None:
        found = _ADAPTERS[cls] = TypeAdapter(cls)
    return cast(TypeAdapter[T], found)


def to_record(value: Any, *, json_mode: bool = False) -> dict[str, Any]:
    """An engine dataclass as its stored record (a new dict: mutating it never touches ``value``).

    Args:
        value: A dataclass instance (``Case``, ``Score``, ``ScorerSpec``, ``JudgeVerdict``, ...).
        json_mode: Convert nested values to JSON types too (tuples to lists, enums to their
            values), as a report stored in a JSON column needs; by default they are kept as they
            are (a NaN then still fails a strict ``json.dumps`` instead of becoming ``null``).

    Raises:
        pydantic_core.PydanticSerializationError: ``value`` holds something with no JSON form
            (only with ``json_mode``).
    """
    return cast(dict[str, Any], adapter(type(value)).dump_python(value, mode="json" if json_mode else "python"))


def from_record[T](cls: type[T], data: Any) -> T:
    """Validate a stored record back into ``cls`` (the inverse of :func:`to_record`).

    Raises:
        pydantic.ValidationError: (a ``ValueError``) ``data`` does not have the record's shape.
    """
    return adapter(cls).validate_python(data)


def score_records(scores: list[Any]) -> list[dict[str, Any]]:
    """The stored records of a case's scores: ``[to_record(s) for s in scores]``, the same dicts,
    built directly for plain :class:`~evalcore.types.Score` objects (a result writer's per-case
    path; pydantic's ``dump_python`` costs several microseconds a score)."""
    from evalcore.types import Score

    records: list[dict[str, Any]] = []
    for score in scores:
        if type(score) is Score:
            records.append(
                {
                    "name": score.name,
                    "value": score.value,
                    "passed": score.passed,
                    "explanation": score.explanation,
                    "error": score.error,
                    "metadata": dict(score.metadata),
                }
            )
        else:
            records.append(to_record(score))
    return records
