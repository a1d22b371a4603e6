"""Gates: conditions on an eval run's aggregate that decide the CLI's exit code.

Syntax: ``<metric><op><number>`` with op one of ``>= <= > < == !=``. Metrics:
``pass_rate`` (``passed / n``, 0..1: unscored cases count against it), ``n``, ``passed``,
``failed``, ``errors`` / ``errored`` (errored cases), ``unscored``, ``error_rate`` (0..1),
``score:<name>`` (the mean of a score, 0..1, over the cases it covers) and ``coverage:<name>``
(the share of the run's cases that score covers, 0..1), e.g. ``pass_rate>=0.8``,
``score:numeric_match>=0.5``, ``errors<=0``, ``coverage:claims_ratio>=1``.

Baseline gates compare the run with a stored one on the cases both ran (``--baseline``, see
:class:`evalcore.baseline.BaselineFigures`): ``regressions`` (cases passing in the baseline and
not in the run), ``improvements``, ``flips`` (both), ``delta:pass_rate`` (the run's pass rate
minus the baseline's over the shared cases, -1..1) and ``worse_p`` (the one-sided exact McNemar
p that the run is worse: ``worse_p>=0.05`` fails when the paired test says so), e.g.
``regressions<=0``, ``delta:pass_rate>=-0.02``. Without a baseline they never hold.

Cost and latency gates read the run's stored cost figures (:class:`evalcore.costs.CostFigures`):
``cost_per_case`` (mean USD per priced case), ``p50_latency_ms`` / ``p95_latency_ms`` (the
target's wall time per case, nearest rank) and, with a baseline, ``delta:cost`` (the relative
change of the mean cost per case on the cases priced in both runs; a threshold may end in ``%``:
``delta:cost<=+10%`` is ``delta:cost<=0.1``), e.g. ``cost_per_case<=0.002``,
``p95_latency_ms<=2000``. Without cost figures they never hold.

A ``score:`` gate is evaluated on the mean the report shows. When that score does not cover
every case (a scorer errored, or the target did), the gate still holds or fails on that mean,
and its result says so (:attr:`GateResult.coverage_note`): add ``coverage:<name>>=1`` or
``errors<=0`` to make missing data fail the gate.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalcore.costs import COST_BASELINE_METRICS, COST_METRICS, CostFigures
from evalcore.report import EvalReport

if TYPE_CHECKING:  # annotations only: a run without --baseline never loads the comparison code
    from evalcore.baseline import BaselineFigures

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_GATE = re.compile(  # the threshold in ASCII digits: \d took "١" as 1, and 5,000 digits became infinity
    r"^\s*(?P<metric>[A-Za-z_][\w.:-]*)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>[-+]?[0-9]{1,18}(?:\.[0-9]{1,18})?)(?P<percent>%?)\s*$"
)
_SIMPLE = ("pass_rate", "n", "passed", "failed", "errors", "errored", "unscored", "error_rate")
_PREFIXES = ("score:", "coverage:")
BASELINE_METRICS = ("regressions", "improvements", "flips", "worse_p", "delta:pass_rate")
"""Gate metrics read from the comparison with a baseline run."""


class GateError(ValueError):
    """A gate expression that does not parse or names an unknown metric."""


@dataclass(slots=True, frozen=True)
class Gate:
    """A parsed gate: ``metric op threshold``."""

    metric: str
    op: str
    threshold: float
    text: str

    @property
    def needs_baseline(self) -> bool:
        """A gate on the comparison with a baseline run (``regressions``, ``worse_p``, ``delta:cost``...)."""
        return self.metric in BASELINE_METRICS or self.metric in COST_BASELINE_METRICS

    @property
    def on_costs(self) -> bool:
        """A gate on the run's cost and latency figures (``cost_per_case``, ``delta:cost``...)."""
        return self.metric in COST_METRICS or self.metric in COST_BASELINE_METRICS


@dataclass(slots=True, frozen=True)
class GateResult:
    """A gate checked against a report.

    Attributes:
        gate: The gate.
        actual: The metric's value, ``None`` when the metric is absent.
        held: The condition holds (an absent metric never holds).
        covered: For ``score:`` gates, cases the score has a value for (``k`` of ``n=k/N``).
        cases: For ``score:`` gates, every case of the run (``N``).
    """

    gate: Gate
    actual: float | None
    held: bool
    covered: int | None = None
    cases: int | None = None

    @property
    def partial(self) -> bool:
        """A ``score:`` gate whose score leaves some of the run's cases out."""
        return self.covered is not None and self.cases is not None and self.covered < self.cases

    @property
    def coverage_note(self) -> str | None:
        """``"on 1/2 cases: 1 not covered"`` for a partial score gate, else ``None``."""
        if not self.partial:
            return None
        assert self.covered is not None and self.cases is not None
        return f"on n={self.covered}/{self.cases} cases: {self.cases - self.covered} not covered"


def parse_gate(text: str) -> Gate:
    """Parse a gate expression.

    Raises:
        GateError: Malformed text or unknown metric (the message gives the syntax).
    """
    match = _GATE.match(text)
    if not match:
        raise GateError(
            f"bad gate {text!r}: expected <metric><op><number>, e.g. 'pass_rate>=0.8', "
            "'score:numeric_match>=0.5', 'errors<=0'"
        )
    metric = match["metric"]
    if metric.startswith("delta:") and metric not in BASELINE_METRICS + COST_BASELINE_METRICS:
        raise GateError(f"bad gate {text!r}: unknown metric {metric!r} (baseline deltas: delta:pass_rate, delta:cost)")
    if match["percent"] and metric not in COST_BASELINE_METRICS:
        raise GateError(f"bad gate {text!r}: a % threshold is for delta:cost only")
    known = metric in _SIMPLE or metric in BASELINE_METRICS or metric in COST_METRICS + COST_BASELINE_METRICS
    if not known and not any(metric.startswith(p) and len(metric) > len(p) for p in _PREFIXES):
        raise GateError(
            f"bad gate {text!r}: unknown metric {metric!r} (use {', '.join(_SIMPLE)}, score:<name>, "
            f"coverage:<name>, {', '.join(COST_METRICS)}, or with --baseline "
            f"{', '.join(BASELINE_METRICS + COST_BASELINE_METRICS)})"
        )
    threshold = float(match["value"]) / (100.0 if match["percent"] else 1.0)
    return Gate(metric, match["op"], threshold, text.strip())


def metric_value(report: EvalReport, metric: str) -> float | None:
    """The value of a gate metric in a report, or ``None`` when absent (e.g. an unknown score)."""
    if metric == "pass_rate":
        return report.pass_rate
    if metric == "n":
        return float(report.n)
    if metric == "passed":
        return float(report.passed)
    if metric == "failed":
        return float(report.failed)
    if metric in ("errors", "errored"):
        return float(report.errored)
    if metric == "unscored":
        return float(report.unscored)
    if metric == "error_rate":
        return report.errored / report.n if report.n else 0.0
    if metric.startswith("coverage:"):
        found = report.metrics.get(metric.removeprefix("coverage:"))
        if found is None:
            return 0.0 if report.n else None
        # a score found means a case was scored, so report.n > 0: the guard never decides
        return found.n / report.n if report.n else None  # pragma: no mutate
    return report.metric_mean(metric.removeprefix("score:"))


def check_gates(
    report: EvalReport,
    gates: list[Gate],
    baseline: BaselineFigures | None = None,
    costs: CostFigures | None = None,
) -> list[GateResult]:
    """Check every gate; a gate on an absent metric fails (it cannot be shown to hold), and so
    does a baseline gate without ``baseline`` and a cost gate without ``costs``.

    A ``score:`` gate carries the score's coverage (``covered`` of ``cases``) so the caller can
    say when it was decided on part of the run; so does a cost gate (cases priced, or timed, of
    the run's cases).
    """
    results = []
    for gate in gates:
        if gate.on_costs:
            actual = costs.metric(gate.metric) if costs is not None else None
            held = actual is not None and _OPS[gate.op](actual, gate.threshold)
            priced = costs.coverage(gate.metric) if costs is not None else 0
            results.append(GateResult(gate, actual, held, priced, costs.n_cases if costs is not None else report.n))
            continue
        if gate.needs_baseline:
            actual = baseline.metric(gate.metric) if baseline is not None else None
        else:
            actual = metric_value(report, gate.metric)
        held = actual is not None and _OPS[gate.op](actual, gate.threshold)
        covered = cases = None
        if gate.metric.startswith("score:"):
            found = report.metrics.get(gate.metric.removeprefix("score:"))
            covered, cases = (found.n if found else 0), report.n
        results.append(GateResult(gate, actual, held, covered, cases))
    return results
