"""Reads of the rule-adherence lens (issue 15): per-rule aggregates of a run, per-rule flips
between two runs, and one case's per-rule outcomes.

The figures come from the engine's pure functions (:func:`evalcore.rules.rule_aggregates`,
:func:`evalcore.rules.rule_flips`, :func:`evalcore.rules.flip_counts`) over the
``rule_adherence`` score each result stores (its ``metadata["rules"]`` rows, see
:mod:`evalcore.rules.scorer`). A run's aggregates and a pair's flips read that score of every
result (one streamed query per run, the rest of the scores list dropped as it is read), so they
are cached while the runs do not change (keyed by id, ``n_done`` and status), like the
compare page's per-scorer deltas.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from apps.evals.models import EvalResult, EvalRun
from apps.evals.queries.cached import while_unchanged
from apps.evals.queries.compare import check_comparable
from evalcore.rules import RuleAggregate, RuleFlip, flip_counts, rule_aggregates, rule_flips, rule_rows
from evalcore.rules.scorer import SCORE_NAME


def uses_rules(eval_run: EvalRun) -> bool:
    """The run was scored with a ``rule_adherence`` scorer (its stored scorer specs say so)."""
    return any(isinstance(spec, Mapping) and spec.get("name") == SCORE_NAME for spec in eval_run.scorer_specs or [])


def _rule_scores(eval_run: EvalRun) -> Iterator[tuple[int, str, int, dict[str, Any] | None]]:
    """``(result id, case id, repeat index, its rule_adherence score record or None)`` per result."""
    rows = EvalResult.objects.filter(eval_run=eval_run).order_by("id")
    for pk, case_id, repeat_index, scores in rows.values_list("pk", "case_id", "repeat_index", "scores").iterator(
        chunk_size=2000  # pragma: no mutate (batch size only: the rows read are the same)
    ):
        found = next((s for s in scores or [] if isinstance(s, dict) and s.get("name") == SCORE_NAME), None)
        yield pk, case_id, repeat_index, found


def run_rule_aggregates(eval_run: EvalRun) -> list[RuleAggregate]:
    """Per rule across the run (absent / ignored / honoured / not-applicable shares of the decided
    cases, coverage ``k/N``), in the order the rules first appear; ``[]`` for a run scored without
    ``rule_adherence``. Cached while the run does not change."""
    if not uses_rules(eval_run):
        return []
    return while_unchanged(
        "rule-aggregates", (eval_run,), lambda: rule_aggregates(score for _, _, _, score in _rule_scores(eval_run))
    )


@dataclass(slots=True, frozen=True)
class RuleFlipCase:
    """One case whose rule outcome flipped, with both runs' results (for links).

    Attributes:
        case_id, repeat_index: The case.
        a_result_id, b_result_id: Its ``EvalResult`` in run A and in run B.
    """

    case_id: str
    repeat_index: int
    a_result_id: int
    b_result_id: int


@dataclass(slots=True, frozen=True)
class RuleFlipRow:
    """One flip: a rule's outcome on one case in A (``before``) and in B (``after``)."""

    rule_id: str
    before: str
    after: str
    case: RuleFlipCase

    @property
    def label(self) -> str:
        """``"honoured → rule_absent"``."""
        return f"{self.before} → {self.after}"


@dataclass(slots=True)
class RuleFlipGroup:
    """The cases where one rule went from one outcome to another.

    Attributes:
        rule_id, before, after: The rule and the two outcomes (``missing``: the case's score in
            that run does not list the rule).
        n: How many cases.
        cases: The cases (all of them; a page shows the first few).
    """

    rule_id: str
    before: str
    after: str
    n: int = 0
    cases: list[RuleFlipCase] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``"honoured → rule_absent"``."""
        return f"{self.before} → {self.after}"


@dataclass(slots=True)
class RuleCompare:
    """Per-rule flips between run A (baseline) and run B over the cases both ran.

    Attributes:
        run_a, run_b: The runs.
        groups: One per (rule, before, after), rules in first-seen order, the commonest flip of
            a rule first (:func:`evalcore.rules.flip_counts`).
        flips: Every flip, by case then rule (:func:`evalcore.rules.rule_flips`).
        uses_rules: Either run was scored with ``rule_adherence`` (else there is nothing to show).
    """

    run_a: EvalRun
    run_b: EvalRun
    groups: list[RuleFlipGroup]
    flips: list[RuleFlipRow]
    uses_rules: bool


def _flip_rows(run_a: EvalRun, run_b: EvalRun) -> list[RuleFlipRow]:
    scores_a: dict[str, dict[str, Any] | None] = {}
    cases: dict[str, tuple[str, int, int]] = {}
    for pk, case_id, repeat_index, score in _rule_scores(run_a):
        key = f"{case_id}#{repeat_index}"
        scores_a[key] = score
        cases[key] = (case_id, repeat_index, pk)
    scores_b: dict[str, dict[str, Any] | None] = {}
    b_ids: dict[str, int] = {}
    for pk, case_id, repeat_index, score in _rule_scores(run_b):
        key = f"{case_id}#{repeat_index}"
        if key in scores_a:  # rule_flips compares the cases both runs hold
            scores_b[key] = score
            b_ids[key] = pk
    flips: list[RuleFlip] = rule_flips(scores_a, scores_b)
    return [
        RuleFlipRow(
            f.rule_id,
            f.before,
            f.after,
            RuleFlipCase(cases[f.case_key][0], cases[f.case_key][1], cases[f.case_key][2], b_ids[f.case_key]),
        )
        for f in flips
    ]


def compare_rules(run_a: EvalRun, run_b: EvalRun) -> RuleCompare:
    """Per-rule flips between two runs of one set (A is the baseline), grouped and counted.

    Cached while neither run changes.

    Raises:
        CompareError: Runs of different sets, or the same run twice.
    """
    check_comparable(run_a, run_b)
    used = uses_rules(run_a) or uses_rules(run_b)
    if not used:
        return RuleCompare(run_a, run_b, [], [], False)
    rows = while_unchanged("rule-flips", (run_a, run_b), lambda: _flip_rows(run_a, run_b))
    # flip_counts reads only the rule and the two outcomes (the case id is not used)
    counts = flip_counts(RuleFlip(r.case.case_id, r.rule_id, r.before, r.after) for r in rows)  # pragma: no mutate
    groups: dict[tuple[str, str], RuleFlipGroup] = {}
    for row in rows:
        group = groups.get((row.rule_id, row.label))
        if group is None:
            group = groups[(row.rule_id, row.label)] = RuleFlipGroup(row.rule_id, row.before, row.after)
        group.cases.append(row.case)
    ordered = []
    for rule_id, labels in counts.items():
        for label, n in labels.items():
            group = groups[(rule_id, label)]
            group.n = n
            ordered.append(group)
    return RuleCompare(run_a, run_b, ordered, rows, True)


@dataclass(slots=True, frozen=True)
class CaseRule:
    """One rule's outcome on one case, as the case page shows it.

    Attributes:
        id, text, source: The rule (``source``: ``target``, ``file`` or ``case``).
        outcome: ``honoured``, ``rule_ignored``, ``rule_absent``, ``not_applicable``,
            ``unjudged`` or ``judge_error``.
        turns: 1-based model requests (turns) whose text held the rule.
        n_turns: Model requests of the case.
        presence: ``every``, ``dropped``, ``partial`` or ``none``.
        dropped_after: With ``dropped``: the last turn that held it.
        match, similarity: How it matched (``exact``/``template``/``fuzzy``, 0..100).
        reason: The judge's reason, or why the rule is absent.
        judge_error: ``{"kind", "detail", "raw", "attempts"}`` when the judge gave no verdict.
    """

    id: str
    text: str
    source: str
    outcome: str
    turns: list[int]
    n_turns: int
    presence: str
    dropped_after: int | None
    match: str | None
    similarity: float | None
    reason: str | None
    judge_error: dict[str, Any] | None


def result_rules(result: EvalResult) -> list[CaseRule]:
    """The per-rule outcomes of one result's ``rule_adherence`` score (``[]`` when it has none)."""
    score = next((s for s in result.scores or [] if isinstance(s, dict) and s.get("name") == SCORE_NAME), None)
    out = []
    for row in rule_rows(score):
        turns = row.get("turns")
        out.append(
            CaseRule(
                id=str(row["id"]),
                text=str(row.get("text") or ""),
                source=str(row.get("source") or ""),
                outcome=str(row.get("outcome") or ""),
                turns=[int(t) for t in turns] if isinstance(turns, list) else [],
                n_turns=int(row.get("n_turns") or 0),
                presence=str(row.get("presence") or ""),
                dropped_after=row.get("dropped_after"),
                match=row.get("match"),
                similarity=row.get("similarity"),
                reason=row.get("reason"),
                judge_error=row.get("judge_error"),
            )
        )
    return out
