"""Aligning the judge to people on a set (issue 28): people's labels split by the set's own
splits, candidates built on train, chosen on dev, reported on the locked test labels beside the
inter-rater ceiling; the result is a new :class:`~apps.evals.models.JudgeSpecVersion`.

The test labels are a lockbox, as the test split is: they are read only with ``allow_test``, and
every reading is counted on the set (``test_reads`` in each version's report: how many alignments
of this set had read its test labels, this one included), so a judge tuned by peeking shows it.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max

from apps.evals.models import EvalSet, JudgeSpecVersion
from apps.evals.queries.reviews import alignment_labels, people_alpha
from evalcore.judge.align import AlignmentReport, align, judge_verdicts
from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.judge.rubric import RubricJudge
from evalcore.scorers.base import ScorerServices
from evalcore.splits import HeldOutError


@dataclass(slots=True)
class Aligned:
    """A stored aligned judge and its report (:attr:`version`'s ``report`` holds the same)."""

    version: JudgeSpecVersion
    report: AlignmentReport
    alpha: float | None
    alpha_n: int
    test_reads: int


def test_reads(eval_set: EvalSet) -> int:
    """How many alignments of ``eval_set`` read its test labels so far."""
    return sum(
        1
        for r in JudgeSpecVersion.objects.filter(eval_set=eval_set).values_list("report", flat=True)
        if isinstance(r, dict) and r.get("test_read")
    )


def align_judge(
    eval_set: EvalSet,
    *,
    name: str,
    base: RubricJudge,
    services: ScorerServices,
    allow_test: bool = False,
) -> Aligned:
    """Align ``base`` to people's labels on ``eval_set`` and store the result as ``name`` v(N+1).

    Raises:
        HeldOutError: The set has test labels and ``allow_test`` is false (they are the lockbox:
            nothing is judged or stored).
        ValueError: No train or no dev labels.
    """
    labels = alignment_labels(eval_set)
    test_keys = [int(label.key) for label in labels if label.split == "test"]
    if test_keys and not allow_test:
        raise HeldOutError(
            f"{len(test_keys)} human label(s) of set {eval_set.name!r} are on the test split: the report on them "
            "opens the lockbox; pass --allow-test (every reading is counted on the set)",
            split="test",
        )
    report = asyncio.run(align(labels, base, judge_verdicts(base, services), read_test=allow_test))
    alpha, alpha_n = people_alpha(eval_set, "test") if allow_test else (None, 0)
    with transaction.atomic():
        reads = test_reads(eval_set) + (1 if report.before is not None else 0)
        latest = JudgeSpecVersion.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0
        version = JudgeSpecVersion.objects.create(
            name=name,
            version=latest + 1,
            spec={"name": JUDGE_SCORE, "args": report.spec_args, "version": RubricJudge.version},
            eval_set=eval_set,
            report=_report_record(report, alpha, alpha_n, reads),
        )
    return Aligned(version, report, alpha, alpha_n, reads)


def _report_record(report: AlignmentReport, alpha: float | None, alpha_n: int, reads: int) -> dict[str, Any]:
    return {
        "chosen": report.chosen.name,
        "counts": report.counts,
        "dev": {name: asdict(k) for name, k in report.dev.items()},
        "before": asdict(report.before) if report.before else None,
        "after": asdict(report.after) if report.after else None,
        "alpha": alpha,
        "alpha_n": alpha_n,
        "test_read": report.before is not None,
        "test_reads": reads,
    }
