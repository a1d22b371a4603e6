"""Input, expected and output previews for the rows of a result table or a comparison.

One query per page whatever its size, and only for the rows shown: the ids of the page's
results select them, and each JSON column (the case's input, the expected value the result was
scored against, the trace's final answer) is read as the first
:data:`~evalcore.preview.PREVIEW_CHARS` characters of its text (``SUBSTR`` on SQLite, ``LEFT``
on PostgreSQL), never whole: a 5 MB output costs the page 600 characters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import OuterRef, Subquery, TextField
from django.db.models.functions import Cast, Left

from apps.evals.models import EvalCase, EvalResult
from evalcore.preview import PREVIEW_CHARS, Preview, preview_from_json


@dataclass(frozen=True, slots=True)
class RowPreview:
    """The three previews of one result row (see :class:`evalcore.preview.Preview`).

    Attributes:
        input: The case's input (empty when the case left the set).
        expected: The expected value the result was scored against (today's value of the case
            for results stored before expected values were recorded; empty when none).
        output: The target's final answer.
    """

    input: Preview
    expected: Preview
    output: Preview


def _prefix(expression: str) -> Left:
    return Left(Cast(expression, TextField()), PREVIEW_CHARS + 1)


def row_previews(results: Iterable[EvalResult]) -> dict[int, RowPreview]:
    """``{result id: RowPreview}`` for the given results, in one query (none when empty).

    Reads only the ids of ``results`` (any loaded columns do); the JSON columns are cut in the
    database. Results of several runs of one set may be mixed (a comparison page).
    """
    ids = [r.pk for r in results]
    if not ids:
        return {}
    case = EvalCase.objects.filter(eval_set_id=OuterRef("eval_run__eval_set_id"), case_id=OuterRef("case_id"))
    rows = (
        EvalResult.objects.filter(pk__in=ids)
        .annotate(
            input_text=Subquery(case.annotate(t=_prefix("input")).values("t")[:1]),
            case_expected_text=Subquery(case.filter(has_expected=True).annotate(t=_prefix("expected")).values("t")[:1]),
            expected_text=_prefix("expected"),
            output_text=_prefix("run__final_answer"),
        )
        .values_list("pk", "expected_hash", "input_text", "case_expected_text", "expected_text", "output_text")
    )
    out: dict[int, RowPreview] = {}
    for pk, expected_hash, input_text, case_expected, recorded, output in rows:
        result = EvalResult(expected_hash=expected_hash)
        if not result.expected_recorded:
            expected = preview_from_json(case_expected)
        elif result.expected_missing:
            expected = Preview()
        else:
            expected = preview_from_json(recorded)
        out[pk] = RowPreview(preview_from_json(input_text), expected, preview_from_json(output))
    return out


def attach_previews(results: Iterable[EvalResult]) -> None:
    """Set ``result.preview`` (a :class:`RowPreview`) on each of ``results`` (one query)."""
    listed = list(results)
    found = row_previews(listed)
    for result in listed:
        setattr(result, "preview", found.get(result.pk))  # noqa: B010 - a display attribute, not a model field
