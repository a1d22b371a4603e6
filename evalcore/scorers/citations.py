"""``citation_set``: the cited ids vs the expected ids, as set precision / recall / F1.

Ids are compared whole after normalisation. A shortened id may stand for a whole one only where
ids are *opaque*: the expected id is a hex string or a UUID (hex digits and hyphens, at least 16
hex digits, not all decimal digits, see :func:`is_opaque_id`), and the cited id is a prefix of at
least ``min_prefix`` (8) characters of exactly one such expected id. Titles, words and numbers
never prefix-match: citing ``Manchester`` is not citing ``Manchester United F.C.``. (The system
this design grows from matched 8-character prefixes against full UUIDs without the "exactly one"
check, so an ambiguous prefix silently counted as a hit; and a prefix rule applied to titles
turns a wrong article into a hit.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from evalcore.scorers.base import ScoreContext, Scorer, ScorerSpecError
from evalcore.types import Score

_DEFAULT_KEYS: tuple[str, ...] = ("citations", "cited")
# "[doc-1]" or "[1, 3]"; not a Markdown link's "[text](url)" and not a nested bracket.
_BRACKETS = re.compile(r"\[([^\[\]\n]+)\](?!\()")
_SPACES = re.compile(r"\s+")
_HEX_ID = re.compile(r"[0-9a-f]+(?:-[0-9a-f]+)*")
_MIN_OPAQUE_HEX = 16


def normalise_id(value: Any) -> str:
    """An id as compared: text, stripped, casefolded, inner whitespace collapsed to one space.

    A number id is written the way the text ``[3]`` reads: an integral float as an integer (a
    JSON ``3.0`` is the id ``3``, not ``3.0``). A bool is never an id (``True`` gives ``""``,
    which callers drop, rather than the id ``true``).
    """
    if isinstance(value, bool):
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _SPACES.sub(" ", str(value).strip()).casefold()


def is_opaque_id(norm: str) -> bool:
    """True for an id that names nothing by its spelling: a hex digest or a UUID.

    After :func:`normalise_id`: hex digits in hyphen-separated groups, at least 16 hex digits
    in all, and not only decimal digits (a long number is a number, not a hash). Only such ids
    may be cited by a shortened prefix.
    """
    if not _HEX_ID.fullmatch(norm):
        return False
    digits = norm.replace("-", "")
    return len(digits) >= _MIN_OPAQUE_HEX and not digits.isdigit()


def _ids_from_list(items: Iterable[Any]) -> list[str]:
    ids: list[str] = []
    for item in items:
        # A source may be a record {"id": ...} rather than a bare id.
        raw = item.get("id") if isinstance(item, dict) else item
        if raw is None or isinstance(raw, dict | list):
            continue
        norm = normalise_id(raw)
        if norm:
            ids.append(norm)
    return ids


def _ids_from_text(text: str) -> list[str]:
    stripped = text.strip()
    if stripped[:1] in ("[", "{"):
        # A string holding JSON ('{"citations": [...]}') is read as that JSON.
        try:
            return ids_from_value(json.loads(stripped), fields=_DEFAULT_KEYS)
        except (ValueError, TypeError):
            pass
    ids: list[str] = []
    for inner in _BRACKETS.findall(text):
        ids.extend(part for part in (normalise_id(p) for p in inner.split(",")) if part)
    return ids


def ids_from_value(value: Any, *, fields: Iterable[str]) -> list[str]:
    """Normalised ids (in order, duplicates kept) from a list, a dict or text.

    Args:
        value: A list of ids (or of ``{"id": ...}`` records); a dict whose first present key
            among ``fields`` holds such a list (or text); or text whose ``[bracketed]`` ids are
            taken (``[a, b]`` gives two ids; Markdown links ``[t](url)`` are not citations).
            ``None`` gives no ids.
        fields: Keys to look up, in order, when ``value`` is a dict.

    Returns:
        Normalised ids (see :func:`normalise_id`).

    Raises:
        ValueError: A dict holding none of ``fields``, or a value of another type.
    """
    if value is None:
        return []
    if isinstance(value, dict):
        keys = list(fields)
        for key in keys:
            if key in value:
                return ids_from_value(value[key], fields=keys)
        raise ValueError(f"no citation key {keys} in object with keys {sorted(value)}")
    if isinstance(value, list | tuple | set | frozenset):
        return _ids_from_list(value)
    if isinstance(value, str):
        return _ids_from_text(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return [normalise_id(value)]
    raise ValueError(f"cannot read citation ids from {type(value).__name__}")


@dataclass(slots=True, frozen=True)
class CitationMatch:
    """The outcome of matching cited ids against expected ids.

    Attributes:
        precision: Matched / distinct cited ids, 0..1.
        recall: Matched / distinct expected ids, 0..1.
        f1: Harmonic mean of precision and recall, 0..1.
        matched: Expected ids that were cited (whole or by a unique prefix), sorted.
        missing: Expected ids not cited, sorted.
        extra: Cited ids matching no expected id, sorted.
    """

    precision: float
    recall: float
    f1: float
    matched: list[str]
    missing: list[str]
    extra: list[str]


def match_citations(cited: Iterable[str], expected: Iterable[str], *, min_prefix: int = 8) -> CitationMatch:
    """Set precision / recall / F1 of cited ids against expected ids.

    Both sides are normalised and de-duplicated. A cited id equal to an expected id matches it;
    otherwise it matches an expected id it is a prefix of only when that expected id is opaque
    (hex / UUID-like, :func:`is_opaque_id`), the cited id has at least ``min_prefix``
    characters, and exactly one opaque expected id starts with it. Titles and words never
    prefix-match. Two cited forms of the same expected id (the full id and a prefix) count once.

    Empty sets: both empty gives precision = recall = F1 = 1.0 (nothing was asked and nothing
    was cited: a correct answer). Exactly one side empty gives 0.0 for all three: the sets share
    nothing, and a vacuous 1.0 would reward a model that never cites.

    Args:
        cited: Ids the output cites.
        expected: Ids the case expects.
        min_prefix: Shortest prefix (in characters, after normalisation) accepted as a match.

    Returns:
        The :class:`CitationMatch`.
    """
    expected_set = {normalise_id(e) for e in expected} - {""}
    cited_set = {normalise_id(c) for c in cited} - {""}
    opaque = [e for e in expected_set if is_opaque_id(e)]
    resolved: set[str] = set()
    for cite in cited_set:
        if cite in expected_set:
            resolved.add(cite)
            continue
        owners = [e for e in opaque if e.startswith(cite)] if len(cite) >= min_prefix else []
        resolved.add(owners[0] if len(owners) == 1 else cite)
    matched = resolved & expected_set
    if not expected_set and not resolved:
        precision = recall = 1.0
    elif not expected_set or not resolved:
        precision = recall = 0.0
    else:
        precision = len(matched) / len(resolved)
        recall = len(matched) / len(expected_set)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return CitationMatch(
        precision=precision,
        recall=recall,
        f1=f1,
        matched=sorted(matched),
        missing=sorted(expected_set - matched),
        extra=sorted(resolved - expected_set),
    )


@dataclass
class CitationSet(Scorer):
    """Cited ids vs expected ids: a pass/fail verdict plus precision, recall and F1.

    Emits four scores: ``citation_set`` (bool verdict: recall >= ``min_recall`` and precision
    >= ``min_precision``) and ``citation_set.precision`` / ``.recall`` / ``.f1`` (floats 0..1,
    measurements without a verdict). See :func:`match_citations` for the matching rules and
    :func:`ids_from_value` for where ids are read from.
    """

    name: ClassVar[str] = "citation_set"
    version: ClassVar[str] = "1"
    min_recall: float = 0.6
    """Lowest recall (0..1) that passes."""
    min_precision: float = 0.4
    """Lowest precision (0..1) that passes."""
    field: str | None = None
    """Key of the output object holding the citations (default: ``citations``, then ``cited``)."""
    expected_field: str | None = None
    """Key of the expected object holding the ids (default: ``citations``, then ``cited``)."""
    min_prefix: int = 8
    """Shortest id prefix, in characters, that may stand for a whole opaque (hex / UUID) id."""

    def __post_init__(self) -> None:
        for label, bound in (("min_recall", self.min_recall), ("min_precision", self.min_precision)):
            if isinstance(bound, bool) or not isinstance(bound, int | float) or not (0.0 <= bound <= 1.0):
                raise ScorerSpecError(f"citation_set: {label} must be a number in 0..1, got {bound!r}")
        if isinstance(self.min_prefix, bool) or not isinstance(self.min_prefix, int) or self.min_prefix < 1:
            raise ScorerSpecError(f"citation_set: min_prefix must be a positive integer, got {self.min_prefix!r}")

    @property
    def score_names(self) -> list[str]:
        """The verdict and the three measurements."""
        return [self.name, f"{self.name}.precision", f"{self.name}.recall", f"{self.name}.f1"]

    async def score(self, ctx: ScoreContext) -> list[Score]:
        """Score one case; raises ValueError when the expected ids are missing or unreadable."""
        if not ctx.case.has_expected:
            raise ValueError(f"case {ctx.case.id!r} has no expected value")
        expected = ids_from_value(ctx.case.expected, fields=self._keys(self.expected_field))
        unreadable = None  # pragma: no mutate  ("" reads the same: only its truth is tested)
        try:
            cited = ids_from_value(ctx.output, fields=self._keys(self.field))
        except ValueError as exc:
            # An output we cannot read cites nothing: that is a verdict on the answer, not a fault.
            cited, unreadable = [], str(exc)
        result = match_citations(cited, expected, min_prefix=self.min_prefix)
        ok = result.recall >= self.min_recall and result.precision >= self.min_precision
        explanation = f"precision {result.precision:.2f}, recall {result.recall:.2f}"
        if unreadable:
            explanation += f"; cannot read citations from output ({unreadable})"
        if result.missing:
            explanation += f"; missing {result.missing}"
        if result.extra:
            explanation += f"; not expected {result.extra}"
        meta: dict[str, Any] = {"matched": result.matched, "missing": result.missing, "extra": result.extra}
        return [
            Score(self.name, ok, explanation=explanation, metadata=meta),
            Score(f"{self.name}.precision", result.precision),
            Score(f"{self.name}.recall", result.recall),
            Score(f"{self.name}.f1", result.f1),
        ]

    @staticmethod
    def _keys(field: str | None) -> tuple[str, ...]:
        return (field,) if field is not None else _DEFAULT_KEYS
