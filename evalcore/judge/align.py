"""Aligning the rubric judge to people: improve on train labels, pick on dev, report on test.

Input: people's labels on judged outputs (:class:`HumanLabel`: the case's input, the output that
was graded, the majority pass/fail of people, their comments, the split of the case). Output: an
:class:`AlignmentReport` naming the chosen :class:`Candidate` and, on the locked test labels,
Cohen's kappa (Cohen 1960) of the judge against people before (the base judge) and after (the
chosen one), each with a 95% percentile-bootstrap interval over the test items (Efron & Tibshirani
1993, ch. 13; seeded, so a report is reproducible).

The candidates are built from train labels only, with no optimiser dependency:

* ``base``: the judge as it was;
* ``notes``: rubric notes drawn from people's comments (on the cases where the base judge disagreed
  with them, else every commented case);
* ``examples``: few-shot examples from people's corrections (the cases where the base judge
  disagreed, each with the person's verdict and comment);
* ``notes+examples``: both.

Each is judged on the dev labels; the highest kappa wins (ties go to the simpler candidate, in the
order above). Test labels are touched once, for the final report of ``base`` and the winner: the
caller guards and counts that touch (the lockbox).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalcore.judge.agreement import agreement
from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.judge.rubric import RubricJudge
from evalcore.scorers.base import ScoreContext, ScorerServices
from evalcore.types import Case, RunRecord

MAX_EXAMPLES = 6
"""Few-shot examples at most in an aligned rubric (prompt length)."""
MAX_NOTE_CHARS = 300
"""A comment or an example's text is cut to this many characters."""
BOOTSTRAP_RESAMPLES = 2000
MIN_LABELS_PER_SPLIT = 1


@dataclass(slots=True, frozen=True)
class HumanLabel:
    """One graded output with people's verdict.

    Attributes:
        key: An id for the item (e.g. the result id), unique among the labels.
        case_id: The case graded.
        split: ``train`` / ``dev`` / ``test``: the case's own split in its set.
        input: The case's input.
        expected: The case's expected value.
        output: The output people graded.
        passed: People's label (majority of pass/fail verdicts).
        comment: People's comments on it, joined ("" when none).
        judge_passed: The base judge's stored verdict on it, when known (saves a call on train).
    """

    key: str
    case_id: str
    split: str
    input: Any
    expected: Any
    output: Any
    passed: bool
    comment: str = ""
    judge_passed: bool | None = None


@dataclass(slots=True, frozen=True)
class Candidate:
    """A judge variant: its name and the rubric text it grades with (``None``: the base rubric)."""

    name: str
    rubric: str | None


@dataclass(slots=True, frozen=True)
class Kappa:
    """Cohen's kappa of a judge against people over ``n`` labels (``scored`` of them judged).

    Attributes:
        n: Labels in the split.
        scored: Labels the judge gave a verdict on (a judge error is left out, never a pass).
        kappa: Cohen's kappa over the scored labels (``None`` when none).
        low: 95% bootstrap lower bound (``None`` with fewer than 2 scored).
        high: 95% bootstrap upper bound.
        accuracy: Share of scored labels where the judge agrees.
    """

    n: int
    scored: int
    kappa: float | None
    low: float | None
    high: float | None
    accuracy: float | None


@dataclass(slots=True)
class AlignmentReport:
    """What an alignment found.

    Attributes:
        chosen: The candidate picked on dev.
        spec_args: The chosen judge's spec arguments (a new versioned judge spec).
        counts: Labels per split.
        dev: Per candidate name, its kappa on dev.
        before: The base judge on the test labels (``None``: test not read).
        after: The chosen judge on the test labels.
    """

    chosen: Candidate
    spec_args: dict[str, Any]
    counts: dict[str, int]
    dev: dict[str, Kappa] = field(default_factory=dict)
    before: Kappa | None = None
    after: Kappa | None = None


def _cut(text: Any) -> str:
    value = text if isinstance(text, str) else repr(text)
    value = " ".join(value.split())
    return value if len(value) <= MAX_NOTE_CHARS else value[: MAX_NOTE_CHARS - 1] + "…"


def candidates(
    base_rubric: str | None, train: Sequence[HumanLabel], train_verdicts: Sequence[bool | None]
) -> list[Candidate]:
    """The candidates built from the train labels (see the module doc), in tie-break order.

    Args:
        base_rubric: The base judge's own rubric notes.
        train: The train labels.
        train_verdicts: The base judge's verdict on each train label (``None``: no verdict).
    """
    corrections = [
        label
        for label, verdict in zip(train, train_verdicts, strict=True)
        if verdict is not None and verdict != label.passed
    ]
    commented = [label for label in (corrections or train) if label.comment.strip()]
    notes = ""
    if commented:
        lines = sorted({_cut(label.comment) for label in commented})
        notes = "Notes from people who reviewed this judge's grades:\n" + "\n".join(f"- {line}" for line in lines)
    examples = ""
    if corrections:
        shown = corrections[:MAX_EXAMPLES]
        parts = []
        for label in shown:
            verdict = "PASS" if label.passed else "FAIL"
            why = f" Why: {_cut(label.comment)}" if label.comment.strip() else ""
            parts.append(
                f"- Question: {_cut(label.input)}\n  Answer: {_cut(label.output)}\n  People's verdict: {verdict}.{why}"
            )
        examples = "Examples people graded (grade alike cases the same way):\n" + "\n".join(parts)
    base = (base_rubric or "").strip()

    def joined(*parts: str) -> str:
        return "\n\n".join(p for p in (base, *parts) if p)

    found = [Candidate("base", base_rubric)]
    if notes:
        found.append(Candidate("notes", joined(notes)))
    if examples:
        found.append(Candidate("examples", joined(examples)))
    if notes and examples:
        found.append(Candidate("notes+examples", joined(notes, examples)))
    return found


Verdicts = Callable[[Candidate, Sequence[HumanLabel]], Awaitable[list[bool | None]]]
"""Judges labels with a candidate: one verdict per label (``None``: the judge errored)."""


def kappa(labels: Sequence[HumanLabel], verdicts: Sequence[bool | None], *, seed: int = 0) -> Kappa:
    """Cohen's kappa of ``verdicts`` against the labels, with a seeded 95% percentile-bootstrap
    interval over the items (labels without a verdict are left out and counted in ``n``)."""
    pairs = [(v, label.passed) for label, v in zip(labels, verdicts, strict=True) if v is not None]
    if not pairs:
        return Kappa(len(labels), 0, None, None, None, None)
    figures = agreement(pairs)
    low = high = None
    if len(pairs) >= 2:
        rng = random.Random(seed)
        draws = sorted(
            agreement([pairs[rng.randrange(len(pairs))] for _ in pairs]).cohen_kappa for _ in range(BOOTSTRAP_RESAMPLES)
        )
        low, high = draws[int(0.025 * BOOTSTRAP_RESAMPLES)], draws[int(0.975 * BOOTSTRAP_RESAMPLES) - 1]
    return Kappa(len(labels), len(pairs), figures.cohen_kappa, low, high, figures.accuracy)


async def align(
    labels: Sequence[HumanLabel], base: RubricJudge, verdicts_of: Verdicts, *, read_test: bool
) -> AlignmentReport:
    """Build candidates on train, pick on dev, report before/after on test (when ``read_test``).

    Args:
        labels: Every human label, each with its split.
        base: The judge to improve (its spec args are the aligned spec's, rubric replaced).
        verdicts_of: Judges a list of labels with a candidate (e.g. :func:`judge_verdicts`).
        read_test: Open the lockbox: judge the test labels with ``base`` and the winner. The caller
            guards this (an explicit opt-in) and counts the touch.

    Raises:
        ValueError: No train or no dev labels (nothing to learn from or to choose on).
    """
    by_split: dict[str, list[HumanLabel]] = {"train": [], "dev": [], "test": []}
    for label in labels:
        if label.split in by_split:
            by_split[label.split].append(label)
    counts = {name: len(items) for name, items in by_split.items()}
    for name in ("train", "dev"):
        if len(by_split[name]) < MIN_LABELS_PER_SPLIT:
            raise ValueError(
                f"no human labels on the {name} split ({counts}): review results of {name} cases first "
                "(train to learn from, dev to choose on)"
            )
    train = by_split["train"]
    base_candidate = Candidate("base", base.rubric)
    known = [label.judge_passed for label in train]
    if any(v is None for v in known):
        asked = await verdicts_of(base_candidate, train)
        known = [v if v is not None else a for v, a in zip(known, asked, strict=True)]
    found = candidates(base.rubric, train, known)
    dev_figures: dict[str, Kappa] = {}
    for candidate in found:
        dev_figures[candidate.name] = kappa(by_split["dev"], await verdicts_of(candidate, by_split["dev"]))
    # highest kappa on dev; a candidate that scored nothing cannot win; ties keep the simpler one
    chosen = found[0]
    best = dev_figures["base"].kappa if dev_figures["base"].kappa is not None else -2.0
    for candidate in found[1:]:
        value = dev_figures[candidate.name].kappa
        if value is not None and value > best:
            chosen, best = candidate, value
    spec_args = dict(base.spec().args)
    spec_args["rubric"] = chosen.rubric
    report = AlignmentReport(chosen=chosen, spec_args=spec_args, counts=counts, dev=dev_figures)
    if read_test and by_split["test"]:
        test = by_split["test"]
        report.before = kappa(test, await verdicts_of(base_candidate, test))
        after = report.before if chosen.name == "base" else kappa(test, await verdicts_of(chosen, test))
        report.after = after
    return report


def judge_verdicts(base: RubricJudge, services: ScorerServices) -> Verdicts:
    """A :data:`Verdicts` asking ``base`` (its rubric replaced by each candidate's) through ``services``."""

    async def verdicts(candidate: Candidate, labels: Sequence[HumanLabel]) -> list[bool | None]:
        judge = dataclasses.replace(base, rubric=candidate.rubric, model=base.model, cache=base.cache)
        found: list[bool | None] = []
        for label in labels:
            case = Case(id=label.case_id, input=label.input, expected=label.expected)
            run = RunRecord(
                case_id=label.case_id, run_id=f"align:{label.key}", trace_id=f"align:{label.key}", output=label.output
            )
            ctx = ScoreContext(
                case=case, output=label.output, run=run, judge=services.judge, judge_cache=services.judge_cache
            )
            scores = await judge.score(ctx)
            verdict = next((s for s in scores if s.name == JUDGE_SCORE), None)
            found.append(verdict.passed if verdict is not None and verdict.error is None else None)
        return found

    return verdicts
