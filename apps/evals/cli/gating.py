"""The end of a CI run: compare with the baseline, check the gates, print the flips and write the
reports (JSON, JUnit, Markdown summary). Shared by ``evalsite eval`` and the pytest plugin.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from apps.evals.cli.console import UsageError, gate_line
from apps.evals.cli.simulating import simulator_account
from apps.evals.exports.report_files import run_info, write_report_files
from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries.costs import cost_figures, cost_latency
from apps.evals.queries.target_cache import cache_counts
from apps.evals.results.cost_figures import figures_record
from apps.evals.runs.baseline import BASELINE_HELP, Baseline, BaselineError, baseline_figures, check_baseline_gates
from apps.evals.runs.baseline import resolve_baseline as _resolve
from evalcore.gates import Gate, GateError, GateResult, check_gates, parse_gate
from evalcore.report import EvalReport
from evalcore.summary_md import render_summary

if TYPE_CHECKING:
    from evalcore.baseline import BaselineFigures

PRINTED_FLIPS = 50
"""Flips printed on the console (regressions first); the JSON report lists all of them."""


def add_ci_arguments(parser: argparse.ArgumentParser) -> None:
    """The report and baseline options of ``evalsite eval``: ``--json``, ``--junit``,
    ``--summary-md``, ``--portal-url`` and ``--baseline``."""
    parser.add_argument("--json", dest="json_path", help="write a strict-JSON report here")
    parser.add_argument("--junit", dest="junit_path", help="write JUnit XML here")
    parser.add_argument(
        "--summary-md",
        dest="summary_md",
        metavar="FILE",
        help="write a Markdown summary here (a pull-request comment; append it to $GITHUB_STEP_SUMMARY)",
    )
    parser.add_argument(
        "--portal-url",
        default=os.environ.get("EVALSITE_PORTAL_URL") or None,
        help="the portal's address, for links in the summary (default: $EVALSITE_PORTAL_URL)",
    )
    parser.add_argument("--baseline", metavar="RUN_ID|pinned|latest[:VARIANT]", help=BASELINE_HELP)


def parse_cli_gates(texts: list[str], baseline: str | None) -> list[Gate]:
    """Parse ``--gate`` options; baseline gates need ``--baseline``.

    Raises:
        UsageError: A malformed gate, or a baseline gate without a baseline (exit code 2).
    """
    try:
        gates = [parse_gate(t) for t in texts]
        check_baseline_gates(gates, baseline)
    except (GateError, BaselineError) as exc:
        raise UsageError(str(exc)) from None
    return gates


def check_report_paths(opts: dict[str, Any]) -> None:
    """Check the report files a run will write (``--json``, ``--junit``, ``--summary-md``) before it
    starts: a folder that is missing is created, a path that is a folder or cannot be written is
    refused, so a long run never ends in "cannot write report" with its gates unprinted.

    Raises:
        UsageError: A report path that cannot be written (exit code 2; nothing has run).
    """
    for flag, key in (("--json", "json_path"), ("--junit", "junit_path"), ("--summary-md", "summary_md")):
        text = opts.get(key)
        if not text:
            continue
        path = Path(text)
        if path.is_dir():
            raise UsageError(f"{flag} {text}: is a folder; give a file path")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{flag} {text}: cannot create its folder ({exc.strerror or exc})") from None
        target = path if path.exists() else path.parent
        if not os.access(target, os.W_OK):
            raise UsageError(f"{flag} {text}: not writable")


def resolve_baseline_option(
    text: str | None,
    *,
    eval_set: EvalSet | None = None,
    target_id: str | None = None,
    split: str | None = None,
    run: EvalRun | None = None,
) -> Baseline | None:
    """The ``--baseline`` run (``None`` without the option); see :func:`apps.evals.runs.baseline.resolve_baseline`.

    For a new run give its ``eval_set``, ``target_id`` and ``split``; for a resumed one, the
    ``run`` (its own set, target and split; never itself, and ``latest`` before it started).

    Raises:
        UsageError: The option names no usable run (exit code 2, before anything runs).
    """
    if not text:
        return None
    if run is not None:
        eval_set, target_id, split = run.eval_set, run.target_id, run.split
    assert eval_set is not None and target_id is not None and split is not None
    try:
        return _resolve(text, eval_set=eval_set, target_id=target_id, split=split, exclude=run)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None


@dataclass(slots=True)
class Conclusion:
    """What :func:`conclude` decided and printed.

    Attributes:
        gates: Every gate checked (baseline gates included).
        baseline: The comparison, when there was a baseline.
        lines: The console lines (rich markup): the baseline comparison, its flips and the gates.
        summary_md: The Markdown summary.
    """

    gates: list[GateResult]
    baseline: BaselineFigures | None
    lines: list[str] = field(default_factory=list)
    summary_md: str = ""

    @property
    def failed(self) -> bool:
        """A gate failed."""
        return any(not g.held for g in self.gates)


def conclude(
    eval_run: EvalRun,
    report: EvalReport,
    gates: list[Gate],
    baseline: Baseline | None,
    *,
    json_path: str | None = None,
    junit_path: str | None = None,
    summary_md: str | None = None,
    portal_url: str | None = None,
    append_summary: bool = False,
) -> Conclusion:
    """Compare with the baseline, check the gates and write the requested reports.

    Args:
        eval_run: The finished run.
        report: Its aggregate.
        gates: The gates (baseline gates fail without ``baseline``).
        baseline: The resolved ``--baseline``.
        json_path, junit_path, summary_md: Report files to write (each if given).
        portal_url: The portal's base URL, for links in the summary.
        append_summary: Append to ``summary_md`` instead of replacing it (several runs in one file).

    Raises:
        UsageError: A report file cannot be written.
    """
    figures = baseline_figures(baseline, eval_run) if baseline is not None else None
    costs = None
    if any(g.on_costs for g in gates):
        costs = cost_figures(eval_run.id, baseline.eval_run.id if baseline is not None else None)
    results = check_gates(report, gates, figures, costs)
    info = run_info(eval_run)
    text = render_summary(report, info=info, gates=results, baseline=figures, portal_url=portal_url)
    simulated = simulator_account(
        eval_run.id,
        baseline_id=figures.baseline_id if figures else None,
        flips=[(f.case_id, f.repeat_index, f.kind) for f in figures.flips] if figures else (),
    )
    try:
        if json_path or junit_path:  # the report's blocks are read (two queries) only for a report
            write_report_files(
                eval_run,
                report,
                json_path=json_path,
                junit_path=junit_path,
                extra={
                    **({"baseline": figures.to_record()} if figures else {}),
                    "gates": [_gate_record(g) for g in results],
                    **({"simulator": simulated.record} if simulated else {}),
                    "target_cache": cache_counts(eval_run.id).record(),
                    **_cost_record(eval_run.id),
                },
                flips={(f.case_id, f.repeat_index): f.kind for f in figures.flips} if figures else None,
                properties=_junit_properties(figures) if figures else None,
            )
        if summary_md:
            with Path(summary_md).open("a" if append_summary else "w", encoding="utf-8") as handle:
                handle.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write report: {exc}") from None
    lines = baseline_lines(figures) if figures is not None else []
    lines += simulated.lines if simulated else []
    lines += [gate_line(g) for g in results]
    return Conclusion(results, figures, lines, text)


def _cost_record(eval_run_id: str) -> dict[str, Any]:
    """The report's ``cost_latency`` block (:func:`apps.evals.results.cost_figures.figures_record`:
    cost per case with interval and coverage, target / judge / simulated user apart, p50 / p95),
    when the run was costed."""
    found = cost_latency([eval_run_id]).get(eval_run_id)
    return {"cost_latency": figures_record(found)} if found is not None and found.costed else {}


def _gate_record(result: GateResult) -> dict[str, Any]:
    return {"gate": result.gate.text, "actual": result.actual, "held": result.held}


def _junit_properties(figures: BaselineFigures) -> dict[str, str]:
    return {
        "evalsite.baseline": figures.baseline_id,
        "evalsite.regressions": str(figures.regressions),
        "evalsite.improvements": str(figures.improvements),
        "evalsite.worse_p": f"{figures.worse_p:.6g}",
    }


def baseline_lines(figures: BaselineFigures, limit: int = PRINTED_FLIPS) -> list[str]:
    """The console's account of the comparison: the baseline, the counts and tests, the flips."""
    counts = figures.counts
    delta = "n/a" if counts.delta is None else f"{counts.delta * 100:+.1f} pts"
    lines = [
        f"baseline [bold]{figures.baseline_id}[/]"
        + (f" ({figures.baseline_label})" if figures.baseline_label != figures.baseline_id else "")
        + f": {figures.shared_cases} shared case(s)"
        + (f" ({counts.n} case-repeat pairs)" if counts.n != figures.shared_cases else "")
        + ", "
        f"pass rate {_pct(counts.pass_rate_a)} -> {_pct(counts.pass_rate_b)} ({delta}); "
        f"[red]{figures.regressions} regression(s)[/], [green]{figures.improvements} improvement(s)[/]; "
        + ("McNemar" if figures.case_counts is None else "sign test over cases")
        + f" p={figures.verdict.p_value:.3g}, p(worse)={figures.worse_p:.3g}",
        f"  {escape(figures.verdict.text)}",
    ]
    if counts.n == 0:
        lines.append("  [yellow]no case in common with the baseline: every baseline gate fails[/]")
    for flip in figures.flips[:limit]:
        mark = "[red]regression[/] " if flip.kind == "regression" else "[green]improvement[/]"
        repeat = f" #{flip.repeat_index}" if flip.repeat_index else ""
        lines.append(f"  {mark} {escape(flip.case_id)}{repeat} ({escape(flip.split)}): {flip.arrow}")
    if len(figures.flips) > limit:
        lines.append(f"  ... and {len(figures.flips) - limit} more flip(s) (all in the JSON report)")
    return lines


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"
