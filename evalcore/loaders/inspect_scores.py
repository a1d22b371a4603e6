"""Inspect scores as Evalsite scores: the one place an Inspect value becomes a verdict and a 0..1 score.

Each scorer of a sample gives one :class:`~evalcore.types.Score` named after the scorer (a dict
or list value gives one per key or index, named ``scorer.key``). The value is read as Inspect's
own ``value_to_float`` reads it, so the pass rate Evalsite shows is Inspect's ``accuracy``
whenever the scorer gives verdicts:

=======================================  ==================  ==========  =========================
Inspect value                            Evalsite value       verdict     note
=======================================  ==================  ==========  =========================
``"C"`` (CORRECT)                        ``True`` (1.0)       pass
``"I"`` (INCORRECT)                      ``False`` (0.0)      fail
``"P"`` (PARTIAL)                        ``0.5``              fail        partial credit is not a pass
``"N"`` (NOANSWER)                       ``0.0``              fail        Inspect counts it as 0
``true`` / ``false``; ``"yes"`` /        ``True`` / ``False`` pass / fail
``"no"`` / ``"true"`` / ``"false"``
a number in 0..1 (or numeric text)       that number          none        a measurement (as any 0..1
                                                                          score without a threshold)
a number of a score that goes outside    the number as text   none        a label, in every sample
0..1 anywhere in the log (a count, a                                      (see below)
1-10 grade)
other text                               the text             none        a label
``null``, NaN                            none                 none        explanation says so
=======================================  ==================  ==========  =========================

Evalsite's numeric scores are on 0..1. A score whose numbers leave 0..1 in any sample of the log
(:func:`off_scale_names` over every sample first) is kept as text in *every* sample, so one
score never mixes numbers and labels within a run; the number stays in ``inspect_value``, and
Inspect's own metric values (its means included) are kept with the run.

A case passes when a verdict says pass and none says fail (:func:`evalcore.types.case_outcome`),
so a sample scored only by measurements (e.g. ``f1``) is *unscored* in Evalsite; its mean is
still charted per scorer. The score's ``answer`` and Inspect's own ``value`` are kept in the
score's metadata (``inspect_answer``, ``inspect_value``), its ``metadata`` under ``inspect``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from evalcore.loaders.inspect_log import InspectScore
from evalcore.types import Score

__all__ = ["evalsite_scores", "off_scale_names", "read_value"]

_LETTERS: dict[str, tuple[bool | float, bool]] = {
    "C": (True, True),
    "I": (False, False),
    "P": (0.5, False),
    "N": (0.0, False),
}
_WORDS = {"yes": True, "true": True, "no": False, "false": False}


def _number(value: Any) -> float | None:
    """``value`` as a finite number when it is one (or numeric text other than a letter), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if value in _LETTERS:
            return None
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def read_value(value: Any, *, off_scale: bool = False) -> tuple[bool | float | str | None, bool | None, str | None]:
    """One Inspect value (not a dict or list) as ``(value, verdict, note)`` per the module's table.

    ``off_scale``: the score's numbers leave 0..1 somewhere in the log, so a number is kept as
    text. ``note`` says why a value was not read as it is (``None`` when it was).
    """
    if isinstance(value, bool):
        return value, value, None
    if isinstance(value, int | float):
        number = float(value)
        if not math.isfinite(number):
            return None, None, f"Inspect value {value!r} is not a finite number"
        if 0.0 <= number <= 1.0 and not off_scale:
            return number, None, None
        return f"{value:g}", None, "its numbers go outside 0..1 in this log: kept as text"
    if isinstance(value, str):
        if value in _LETTERS:
            read, verdict = _LETTERS[value]
            return read, verdict, None
        word = _WORDS.get(value.strip().lower())
        if word is not None:
            return word, word, None
        try:
            number = float(value)
        except ValueError:
            return value, None, None
        if not math.isfinite(number):  # "NaN" / "Infinity": how a log's NaN literal is read
            return None, None, f"Inspect value {value!r} is not a finite number"
        return read_value(number, off_scale=off_scale)
    if value is None:
        return None, None, "Inspect gave no value"
    return str(value), None, "a value of no known kind: kept as text"


def _one(name: str, value: Any, score: InspectScore, off_scale: Collection[str]) -> Score:
    read, verdict, note = read_value(value, off_scale=name in off_scale)
    metadata: dict[str, Any] = {"inspect_value": value}
    if score.answer is not None:
        metadata["inspect_answer"] = score.answer
    if score.metadata:
        metadata["inspect"] = score.metadata
    explanation = score.explanation
    if note:
        explanation = f"{explanation} ({note})" if explanation else note
    return Score(name=name, value=read, passed=verdict, explanation=explanation, metadata=metadata)


def _parts(score: InspectScore) -> list[tuple[str, Any]]:
    """``(score name, value)`` of each part: one per key / index of a dict / list value."""
    value = score.value
    if isinstance(value, dict):
        return [(f"{score.scorer}.{key}", item) for key, item in value.items()]
    if isinstance(value, list):
        return [(f"{score.scorer}.{index}", item) for index, item in enumerate(value)]
    return [(score.scorer, value)]


def off_scale_names(score: InspectScore) -> set[str]:
    """The score names of ``score`` whose value here is a number outside 0..1."""
    out = set()
    for name, value in _parts(score):
        number = _number(value)
        if number is not None and not 0.0 <= number <= 1.0:
            out.add(name)
    return out


def evalsite_scores(score: InspectScore, *, off_scale: Collection[str] = ()) -> list[Score]:
    """The Evalsite scores of one Inspect score (one, or one per key / index of a dict / list).

    Args:
        score: The Inspect score.
        off_scale: Score names whose numbers leave 0..1 somewhere in the log (kept as text).
    """
    return [_one(name, value, score, off_scale) for name, value in _parts(score)]
