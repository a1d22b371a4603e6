"""A run compared with its baseline, as the figures the baseline gates and the CI reports read.

The comparison itself (which cases, how they are paired) is made by the portal's compare query;
this module only holds its outcome in plain data, so the gates (:mod:`evalcore.gates`) and the
report writers (:mod:`evalcore.summary_md`, :mod:`evalcore.report_files`) stay free of Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalcore.stats import ConfidenceInterval, PairedCounts, Verdict, mcnemar_worse_p, too_few_cases

REGRESSION = "regression"
IMPROVEMENT = "improvement"


@dataclass(frozen=True, slots=True)
class Flip:
    """A case whose verdict changed between the baseline and the candidate.

    Attributes:
        case_id, repeat_index: The case (and repeat).
        kind: ``regression`` (passed in the baseline, not in the candidate) or ``improvement``.
        split: The case's split.
        score_a, score_b: The case's mean score in the baseline / candidate (0..1), when scored.
        status_a, status_b: The case's status in each run (passed / failed / errored / unscored).
    """

    case_id: str
    repeat_index: int
    kind: str
    split: str = ""
    score_a: float | None = None
    score_b: float | None = None
    status_a: str = ""
    status_b: str = ""

    @property
    def arrow(self) -> str:
        """``"passed → failed"``: the change in words."""
        return f"{self.status_a or '?'} → {self.status_b or '?'}"


@dataclass(frozen=True, slots=True)
class ScoreChange:
    """One score's paired mean change (candidate minus baseline) with its interval and Holm p.

    Attributes:
        name: The score.
        n: Cases scored in both runs.
        mean_a, mean_b: Means over those cases (0..1).
        low, high: Bootstrap interval of the delta (``None`` below
            :data:`~evalcore.stats.MIN_INTERVAL_CASES` pairs: too few cases).
        p_holm: Sign-flip p-value, Holm-corrected over the scores of the comparison.
        significant: ``p_holm < 0.05`` and the interval excludes 0.
    """

    name: str
    n: int
    mean_a: float | None
    mean_b: float | None
    low: float | None
    high: float | None
    p_holm: float
    significant: bool

    @property
    def delta(self) -> float | None:
        """``mean_b - mean_a``, ``None`` when either is missing."""
        return None if self.mean_a is None or self.mean_b is None else self.mean_b - self.mean_a


@dataclass(slots=True)
class BaselineFigures:
    """The candidate run against its baseline on the cases both ran.

    Attributes:
        baseline_id: The baseline eval run's id.
        baseline_label: How it was chosen, e.g. ``"pinned"``, ``"latest:6b"`` or the id given.
        candidate_id: The new run's id.
        counts: The 2x2 pass/fail table over the shared cases (A = baseline).
        only_baseline, only_candidate: Results present in one run only (not compared).
        interval: Bootstrap interval of the pass-rate delta, ``None`` below
            :data:`~evalcore.stats.MIN_INTERVAL_CASES` shared cases (too few cases).
        verdict: The McNemar + interval reading (two-sided).
        flips: Every flipped case, regressions first (largest score change first).
        score_changes: Per-score paired deltas.
        baseline_info: The baseline's provenance (variant, split, git sha, started...).
        cases: Distinct shared cases (``None``: as many as ``counts.n``, one repeat per case).
            Every minimum-n rule counts these, never (case, repeat) pairs.
        case_counts: With repeats, the sign table over distinct cases (pass share fell / rose /
            unchanged) the verdict and ``worse_p`` read (the case is the unit of inference);
            ``None`` with one repeat per case.
    """

    baseline_id: str
    baseline_label: str
    candidate_id: str
    counts: PairedCounts
    only_baseline: int
    only_candidate: int
    interval: ConfidenceInterval | None
    verdict: Verdict
    flips: list[Flip] = field(default_factory=list)
    score_changes: list[ScoreChange] = field(default_factory=list)
    baseline_info: dict[str, Any] = field(default_factory=dict)
    cases: int | None = None
    case_counts: PairedCounts | None = None

    @property
    def shared_cases(self) -> int:
        """Distinct cases in both runs (the n of every minimum-n rule)."""
        return self.counts.n if self.cases is None else self.cases

    @property
    def regressions(self) -> int:
        """Cases passing in the baseline and not in the candidate."""
        return self.counts.a_only

    @property
    def improvements(self) -> int:
        """Cases passing in the candidate and not in the baseline."""
        return self.counts.b_only

    @property
    def worse_p(self) -> float:
        """One-sided exact McNemar p that the candidate is worse (:func:`mcnemar_worse_p`); with
        repeats, the same exact binomial over cases (sign test on per-case pass shares)."""
        table = self.case_counts or self.counts
        return mcnemar_worse_p(table.a_only, table.b_only)

    def metric(self, name: str) -> float | None:
        """The value of a baseline gate metric (``regressions``, ``improvements``, ``flips``,
        ``worse_p``, ``delta:pass_rate``), ``None`` when it cannot be computed: an unknown name,
        or no shared case (then every baseline gate fails: a comparison on nothing proves nothing)."""
        if self.counts.n == 0:
            return None
        if name == "regressions":
            return float(self.regressions)
        if name == "improvements":
            return float(self.improvements)
        if name == "flips":
            return float(self.regressions + self.improvements)
        if name == "worse_p":
            return self.worse_p
        if name == "delta:pass_rate":
            return self.counts.delta
        return None

    def to_record(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict (the JSON report's ``baseline`` block)."""
        interval = self.interval
        return {
            "eval_run": self.baseline_id,
            "chosen_as": self.baseline_label,
            "info": self.baseline_info,
            "shared_cases": self.shared_cases,
            "shared_pairs": self.counts.n,
            "only_baseline": self.only_baseline,
            "only_candidate": self.only_candidate,
            "pass_rate_baseline": self.counts.pass_rate_a,
            "pass_rate_candidate": self.counts.pass_rate_b,
            "delta_pass_rate": self.counts.delta,
            "interval": None
            if interval is None
            else {
                "low": interval.low,
                "high": interval.high,
                "confidence": interval.confidence,
                "method": interval.method,
            },
            "interval_reason": None if interval is not None else too_few_cases(self.shared_cases),
            "regressions": self.regressions,
            "improvements": self.improvements,
            "mcnemar_p": self.verdict.p_value,
            # with repeats the p above is the exact sign test over the cases' pass shares
            "test": "mcnemar" if self.case_counts is None else "sign_test_over_cases",
            "worse_p": self.worse_p,
            "verdict": self.verdict.outcome,
            "verdict_text": self.verdict.text,
            "flips": [
                {
                    "case_id": f.case_id,
                    "repeat_index": f.repeat_index,
                    "kind": f.kind,
                    "split": f.split,
                    "status_baseline": f.status_a,
                    "status_candidate": f.status_b,
                    "score_baseline": f.score_a,
                    "score_candidate": f.score_b,
                }
                for f in self.flips
            ],
            "score_changes": [
                {
                    "name": s.name,
                    "n": s.n,
                    "mean_baseline": s.mean_a,
                    "mean_candidate": s.mean_b,
                    "delta": s.delta,
                    "low": s.low,
                    "high": s.high,
                    "p_holm": s.p_holm,
                    "significant": s.significant,
                }
                for s in self.score_changes
            ],
        }
