"""``numeric_match``: the final number of an answer vs the expected number (GSM8K style).

Extraction follows the GSM8K conventions (openai/grade-school-math): reference answers end with
``#### 72`` and model solutions with ``A: 72``. :func:`extract_final_number` takes the number
after the last ``####``, else after the last ``A:`` / ``Answer:``, else the last number in the
text. This rule reproduces OpenAI's own ``is_correct`` labels in ``example_model_solutions.jsonl``
exactly (286 / 515 / 458 / 742 of 1,319 for the four models; see ``tests/evalcore/test_gsm8k_labels.py``).

Numbers are parsed as :class:`decimal.Decimal` so a run-away answer of 400 digits compares
exactly instead of overflowing a float.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from evalcore.scorers.base import ScoreContext, Scorer, ScorerSpecError
from evalcore.scorers.jsonmatch import canonical_text
from evalcore.types import Score

# A number as written in prose: optional minus (ASCII or U+2212) not glued to a preceding word
# or digit (so "16-3" reads as 16 and 3, not 16 and -3), optional currency sign, digits with
# comma thousands groups ("1,234,567") or plain digits, optional decimals, optional "%".
# "5." at a sentence end stays 5: the fraction needs at least one digit after the point.
_NUMBER = re.compile(
    r"""
    (?<![\w.])
    (?P<sign>[-\u2212])?
    \$?
    (?P<sign2>[-\u2212])?
    (?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)?
    (?P<frac>\.\d+)?
    (?P<pct>%)?
    """,
    re.VERBOSE,
)
_HASH_MARKER = re.compile(r"####")
_ANSWER_MARKER = re.compile(r"(?:(?<=\s)|^)(?:final\s+answer|answer|a)\s*:", re.IGNORECASE | re.MULTILINE)


@dataclass(slots=True, frozen=True)
class ExtractedNumber:
    """A number found in text.

    Attributes:
        value: The number (commas, currency sign and percent sign dropped: "50%" is 50).
        text: The matched text as written, e.g. ``"$1,234.50"``.
        rule: Which rule found it: ``"####"``, ``"answer"`` (after ``A:`` / ``Answer:``),
            ``"last"`` (last number in the text) or ``"value"`` (given as a number).
    """

    value: Decimal
    text: str
    rule: str


def find_numbers(text: str) -> list[tuple[Decimal, str]]:
    """Every number in ``text``, in order, as ``(value, text as written)`` pairs.

    Handles ``1,234.5`` (comma thousands groups), ``$18``, ``-$5``, ``$-5``, ``50%``, ``-3``,
    ``.5`` and ``5.`` at a sentence end (read as 5). A minus glued to a preceding word or digit
    is an operator, not a sign (``16-3`` gives 16 and 3).
    """
    found: list[tuple[Decimal, str]] = []
    for match in _NUMBER.finditer(text):
        int_part, frac = match.group("int"), match.group("frac")
        if not int_part and not frac:
            continue
        negative = bool(match.group("sign") or match.group("sign2"))
        digits = (int_part or "0").replace(",", "") + (frac or "")
        try:
            value = Decimal(digits)
        except InvalidOperation:  # pragma: no cover - the pattern only admits valid digits
            continue  # pragma: no mutate (unreachable, as above)
        found.append((-value if negative else value, match.group(0)))
    return found


def _first_after(text: str, marker: re.Pattern[str]) -> tuple[Decimal, str] | None:
    # The last marker wins (a solution may quote "A:" earlier); the first number after it is
    # the answer ("A: 9999 cents + 9 cents" means 9999).
    last = None
    for last in marker.finditer(text):  # noqa: B007 - we want the final match
        pass
    if last is None:
        return None
    numbers = find_numbers(text[last.end() :])
    return numbers[0] if numbers else None


def extract_final_number(value: Any) -> ExtractedNumber | None:
    """The final answer number of a text (or a number given as such), GSM8K style.

    Rules, in order: the first number after the last ``####``; else the first number after the
    last ``A:`` / ``Answer:`` / ``Final answer:`` (case-insensitive, at a line start or after
    whitespace); else the last number anywhere in the text.

    Args:
        value: Text, or an ``int`` / ``float`` / ``Decimal`` (returned as is). Other values are
            read as their canonical JSON text.

    Returns:
        The number, or ``None`` when there is none.

    Raises:
        ValueError: ``value`` is a non-finite float (NaN, infinity) or a bool.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a boolean, not a number")
    if isinstance(value, int | float | Decimal):
        number = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
        if not number.is_finite():
            raise ValueError(f"{value!r} is not a finite number")
        return ExtractedNumber(number, str(value), "value")
    text = canonical_text(value)
    for marker, rule in ((_HASH_MARKER, "####"), (_ANSWER_MARKER, "answer")):
        hit = _first_after(text, marker)
        if hit is not None:
            return ExtractedNumber(hit[0], hit[1], rule)
    numbers = find_numbers(text)
    if not numbers:
        return None
    return ExtractedNumber(numbers[-1][0], numbers[-1][1], "last")


def _fmt(number: Decimal) -> str:
    # Show 18 rather than 18.00 or 1.8E+1; a run-away 400-digit answer in scientific form.
    text = format(number.normalize(), "f")
    return text if len(text) <= 40 else format(number, ".10e")


@dataclass
class NumericMatch(Scorer):
    """The output's final number equals the expected number within a tolerance.

    Pass when ``|actual - expected| <= tolerance`` or, if ``rel_tolerance`` is set,
    ``|actual - expected| <= rel_tolerance * |expected|``. Both the output and the expected value
    go through :func:`extract_final_number`, so a GSM8K ``answer`` field (ending ``#### 72``)
    works as the expected value unchanged.

    An output without any number fails; an expected value without one raises (a case fault).
    """

    name: ClassVar[str] = "numeric_match"
    version: ClassVar[str] = "1"
    tolerance: float = 1e-6
    """Absolute tolerance, in the answer's own units."""
    rel_tolerance: float | None = None
    """Relative tolerance as a fraction of ``|expected|`` (0.01 = 1 %); ``None`` for none."""
    field: str | None = None
    """When the output is an object, read the answer from this key."""

    def __post_init__(self) -> None:
        for label, tol in (("tolerance", self.tolerance), ("rel_tolerance", self.rel_tolerance)):
            if tol is None and label == "rel_tolerance":
                continue  # pragma: no mutate (rel_tolerance is the last item: break ends the loop alike)
            if isinstance(tol, bool) or not isinstance(tol, int | float) or not math.isfinite(tol) or tol < 0:
                raise ScorerSpecError(f"numeric_match: {label} must be a finite number >= 0, got {tol!r}")

    async def score(self, ctx: ScoreContext) -> Score:
        """Compare the final numbers; raises ValueError when the expected value has no number."""
        if not ctx.case.has_expected:
            raise ValueError(f"case {ctx.case.id!r} has no expected value")
        expected = extract_final_number(ctx.case.expected)
        if expected is None:
            raise ValueError(f"case {ctx.case.id!r}: no number in expected value {ctx.case.expected!r}")
        output = ctx.output
        if self.field is not None and isinstance(output, dict):
            if self.field not in output:
                return Score(self.name, False, explanation=f"output has no field {self.field!r}")
            output = output[self.field]
        try:
            actual = extract_final_number(output)
        except ValueError as exc:
            return Score(self.name, False, explanation=f"output is not a usable number: {exc}")
        meta: dict[str, Any] = {"expected": _fmt(expected.value), "expected_rule": expected.rule}
        if actual is None:
            return Score(
                self.name,
                False,
                explanation=f"no number found in output (expected {_fmt(expected.value)})",
                metadata=meta,
            )
        meta.update(actual=_fmt(actual.value), actual_rule=actual.rule)
        diff = abs(actual.value - expected.value)
        ok = diff <= Decimal(str(self.tolerance))
        if not ok and self.rel_tolerance is not None:
            ok = diff <= Decimal(str(self.rel_tolerance)) * abs(expected.value)
        relation = "==" if ok else "!="
        explanation = (
            f"extracted {_fmt(actual.value)} (from {actual.text!r}, rule {actual.rule}) "
            f"{relation} expected {_fmt(expected.value)} (rule {expected.rule})"
        )
        return Score(self.name, ok, explanation=explanation, metadata=meta)
