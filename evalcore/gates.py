"""Gates: conditions on an eval run's aggregate that decide the CLI's exit code.

Syntax: ``<metric><op><number>`` with op one of ``>= <= > < == !=``. Metrics:
``pass_rate`` (0..1), ``n``, ``passed``, ``failed``, ``errors`` / ``errored`` (errored cases),
``error_rate`` (0..1), and ``score:<name>`` (the mean of a score, 0..1), e.g.
``pass_rate>=0.8``, ``score:numeric_match>=0.5``, ``errors<=0``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from evalcore.report import EvalReport

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_GATE = re.compile(r"^\s*(?P<metric>[A-Za-z_][\w.:-]*)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>[-+]?\d+(?:\.\d+)?)\s*$")
_SIMPLE = ("pass_rate", "n", "passed", "failed", "errors", "errored", "error_rate")


class GateError(ValueError):
    """A gate expression that does not parse or names an unknown metric."""


@dataclass(slots=True, frozen=True)
class Gate:
    """A parsed gate: ``metric op threshold``."""

    metric: str
    op: str
    threshold: float
    text: str


@dataclass(slots=True, frozen=True)
class GateResult:
    """A gate checked against a report. ``actual`` is ``None`` when the metric is absent."""

    gate: Gate
    actual: float | None
    held: bool


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
    if metric not in _SIMPLE and not (metric.startswith("score:") and len(metric) > 6):
        raise GateError(f"bad gate {text!r}: unknown metric {metric!r} (use {', '.join(_SIMPLE)} or score:<name>)")
    return Gate(metric, match["op"], float(match["value"]), text.strip())


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
    if metric == "error_rate":
        return report.errored / report.n if report.n else 0.0
    return report.metric_mean(metric.removeprefix("score:"))


def check_gates(report: EvalReport, gates: list[Gate]) -> list[GateResult]:
    """Check every gate; a gate on an absent metric fails (it cannot be shown to hold)."""
    results = []
    for gate in gates:
        actual = metric_value(report, gate.metric)
        held = actual is not None and _OPS[gate.op](actual, gate.threshold)
        results.append(GateResult(gate, actual, held))
    return results
