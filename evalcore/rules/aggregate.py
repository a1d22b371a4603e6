"""Per-rule aggregates over a run, and per-rule flips between two runs (pure functions).

Both read the details the ``rule_adherence`` scorer stores on its ``rule_adherence`` score
(``metadata["rules"]``, also kept on its failure form), as :class:`~evalcore.types.Score` objects
or their stored dict form.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalcore.rules.scorer import ABSENT, DECIDED, HONOURED, IGNORED, NOT_APPLICABLE, OUTCOMES, SCORE_NAME
from evalcore.types import Score


def rule_rows(score: Score | Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The per-rule detail rows of one ``rule_adherence`` score (``[]`` for anything else)."""
    if score is None:
        return []
    name = score.name if isinstance(score, Score) else score.get("name")
    metadata = score.metadata if isinstance(score, Score) else score.get("metadata")
    if name != SCORE_NAME or not isinstance(metadata, Mapping):
        return []
    rows = metadata.get("rules")
    return [row for row in rows if isinstance(row, dict) and "id" in row] if isinstance(rows, list) else []


@dataclass(slots=True)
class RuleAggregate:
    """One rule across a run.

    Attributes:
        rule_id: The rule's id.
        text: Its text (the last one seen: a case may override it).
        cases: Cases whose score lists the rule: the ``N`` of ``n=k/N``.
        decided: Cases with a decided outcome (honoured, ignored, absent, not applicable): ``k``.
        counts: Cases per outcome (every outcome of :data:`~evalcore.rules.scorer.OUTCOMES`).
        absent_rate, ignored_rate, honoured_rate, not_applicable_rate: Shares (0..1) of the
            decided cases; ``None`` when none is decided (unjudged and judge errors never count).
        dropped: Cases where the rule was present in early turns, then dropped.
    """

    rule_id: str
    text: str = ""
    cases: int = 0
    decided: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    absent_rate: float | None = None
    ignored_rate: float | None = None
    honoured_rate: float | None = None
    not_applicable_rate: float | None = None
    dropped: int = 0

    @property
    def coverage(self) -> str:
        """``"k/N"``: decided cases over cases that list the rule."""
        return f"{self.decided}/{self.cases}"


def rule_aggregates(scores: Iterable[Score | Mapping[str, Any] | None]) -> list[RuleAggregate]:
    """Per rule across a run, in first-seen order.

    Args:
        scores: Each case's ``rule_adherence`` score (other scores and ``None`` are skipped, so a
            case's whole score list may be passed flattened).

    Returns:
        One :class:`RuleAggregate` per rule id.
    """
    found: dict[str, RuleAggregate] = {}
    tallies: dict[str, Counter[str]] = {}
    for score in scores:
        for row in rule_rows(score):
            rule_id = str(row["id"])
            agg = found.get(rule_id)
            if agg is None:
                agg = found[rule_id] = RuleAggregate(rule_id)
                tallies[rule_id] = Counter()
            agg.text = str(row.get("text") or agg.text)
            agg.cases += 1
            outcome = str(row.get("outcome"))
            tallies[rule_id][outcome] += 1
            if row.get("presence") == "dropped":
                agg.dropped += 1
    for rule_id, agg in found.items():
        tally = tallies[rule_id]
        agg.counts = {outcome: tally[outcome] for outcome in OUTCOMES}
        agg.decided = sum(tally[o] for o in DECIDED)
        if agg.decided:
            agg.absent_rate = tally[ABSENT] / agg.decided
            agg.ignored_rate = tally[IGNORED] / agg.decided
            agg.honoured_rate = tally[HONOURED] / agg.decided
            agg.not_applicable_rate = tally[NOT_APPLICABLE] / agg.decided
    return list(found.values())


@dataclass(slots=True, frozen=True)
class RuleFlip:
    """One rule whose outcome differs between run A and run B on the same case."""

    case_key: str
    rule_id: str
    before: str
    after: str

    @property
    def label(self) -> str:
        """``"honoured → rule_absent"``."""
        return f"{self.before} → {self.after}"


MISSING_RULE = "missing"
"""The outcome shown for a rule one run's case does not list (e.g. the rule was added in B)."""


def rule_flips(
    a: Mapping[str, Score | Mapping[str, Any] | None], b: Mapping[str, Score | Mapping[str, Any] | None]
) -> list[RuleFlip]:
    """Per case and rule, outcomes that differ between two runs.

    Args:
        a: Case key (e.g. ``"<case id>#<repeat>"``) -> run A's ``rule_adherence`` score.
        b: The same for run B. Only keys in both are compared.

    Returns:
        The flips, ordered by case key then by the rule's position in A (rules only in B last);
        a rule listed on one side only flips from or to :data:`MISSING_RULE`.
    """
    flips: list[RuleFlip] = []
    for key in sorted(set(a) & set(b)):
        before = {str(r["id"]): str(r.get("outcome")) for r in rule_rows(a[key])}
        after = {str(r["id"]): str(r.get("outcome")) for r in rule_rows(b[key])}
        for rule_id in [*before, *(r for r in after if r not in before)]:
            old, new = before.get(rule_id, MISSING_RULE), after.get(rule_id, MISSING_RULE)
            if old != new:
                flips.append(RuleFlip(key, rule_id, old, new))
    return flips


def flip_counts(flips: Iterable[RuleFlip]) -> dict[str, dict[str, int]]:
    """Rule id -> ``"before → after"`` -> cases, for a compare page's summary."""
    counts: dict[str, Counter[str]] = {}
    for flip in flips:
        counts.setdefault(flip.rule_id, Counter())[flip.label] += 1
    return {rule_id: dict(counter.most_common()) for rule_id, counter in counts.items()}
