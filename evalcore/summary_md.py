"""A Markdown summary of an eval run for a pull-request comment or a CI job summary.

GitHub renders it as is in ``$GITHUB_STEP_SUMMARY`` and in a PR comment; GitLab in a merge
request note. Sections: the headline verdict (every gate held, or which failed), the per-split
table, the comparison with the baseline when there is one (pass rates, flips, the paired tests),
the gates, the significant changes, and the top flips, each linked to the portal's side-by-side
page of the case when the portal's URL is known.

Every string that comes from data (case ids, set and target names) is escaped, so a ``|`` or a
backtick in a case id cannot break the table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from evalcore.gates import GateResult
from evalcore.report import EvalReport, GroupSummary
from evalcore.stats import TOO_FEW_CASES

if TYPE_CHECKING:  # annotations only: a summary without a baseline never loads the comparison code
    from evalcore.baseline import BaselineFigures, Flip

TOP_FLIPS = 20
"""Flips listed in the summary (regressions first); the JSON report has all of them."""

_SPECIAL = re.compile(r"([\\`*{}\[\]<>|#!~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def md_escape(text: object) -> str:
    """``text`` with Markdown's special characters backslash-escaped and newlines as spaces (an
    underscore inside a word, as in ``gsm8k_test``, stays: it emphasises nothing in GFM)."""
    return _SPECIAL.sub(r"\\\1", str(text)).replace("\r", " ").replace("\n", " ")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def _points(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.1f} pts"


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else f"{value:.3g}"


def run_url(portal_url: str | None, eval_run_id: str) -> str | None:
    """The portal page of an eval run, ``None`` without a portal URL."""
    return f"{portal_url.rstrip('/')}/runs/{eval_run_id}/" if portal_url else None


def flip_url(portal_url: str | None, baseline_id: str, candidate_id: str, flip: Flip) -> str | None:
    """The portal's side-by-side page of one flipped case, ``None`` without a portal URL."""
    if not portal_url:
        return None
    query = urlencode({"a": baseline_id, "b": candidate_id, "case": flip.case_id, "repeat": flip.repeat_index})
    return f"{portal_url.rstrip('/')}/compare/case/?{query}"


def _link(text: str, url: str | None) -> str:
    return f"[{text}]({url})" if url else text


def _split_rows(report: EvalReport) -> list[tuple[str, GroupSummary]]:
    whole = GroupSummary(report.n, report.passed, report.failed, report.errored, report.pass_rate, {}, report.unscored)
    rows = [("all", whole)]
    if len(report.splits) > 1:
        rows += list(report.splits.items())
    return rows


def render_summary(
    report: EvalReport,
    *,
    info: dict[str, Any],
    gates: Sequence[GateResult],
    baseline: BaselineFigures | None = None,
    portal_url: str | None = None,
    top_flips: int = TOP_FLIPS,
) -> str:
    """The Markdown summary of one eval run.

    Args:
        report: The run's aggregate.
        info: The run's provenance (``id``, ``set``, ``target_id``, ``variant``, ``split``,
            ``git_sha``: the JSON report's ``eval_run`` block).
        gates: The checked gates (baseline gates included).
        baseline: The comparison with the baseline run, if any.
        portal_url: The portal's base URL (e.g. ``https://evals.example.com``) for links.
        top_flips: How many flips to list.

    Returns:
        The Markdown text, ending in a newline.
    """
    failed = [g for g in gates if not g.held]
    who = " · ".join(md_escape(x) for x in (info.get("set"), info.get("target_id"), info.get("variant")) if x)
    if not gates:
        head = f"## Evalsite: {who}: {_pct(report.pass_rate)} passed (no gates)"
    elif failed:
        names = ", ".join(f"`{g.gate.text}`" for g in failed)
        head = f"## ❌ Evalsite: {who}: {len(failed)} of {len(gates)} gate(s) failed: {names}"
    else:
        head = f"## ✅ Evalsite: {who}: all {len(gates)} gate(s) held"
    run_id = str(info.get("id", ""))
    sha = str(info.get("git_sha") or "")[:10]
    lines = [
        head,
        "",
        f"Eval run {_link(f'`{run_id}`', run_url(portal_url, run_id))}, split `{info.get('split', '')}`, "
        f"{report.n} case(s)" + (f", git `{sha}`" + (" (dirty)" if info.get("git_dirty") else "") if sha else ""),
        "",
        "| split | n | passed | failed | errored | unscored | pass rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, group in _split_rows(report):
        lines.append(
            f"| {md_escape(name)} | {group.n} | {group.passed} | {group.failed} | {group.errored} | "
            f"{group.unscored} | {_pct(group.pass_rate)} |"
        )
    if baseline is not None:
        lines += ["", *_baseline_section(baseline, portal_url)]
    if gates:
        lines += ["", "### Gates", "", "| gate | actual | result |", "|---|---:|---|"]
        for result in gates:
            actual = "absent" if result.actual is None else f"{result.actual:.4g}"
            mark = "✅ held" if result.held else "❌ failed"
            note = f" ({md_escape(result.coverage_note)})" if result.coverage_note else ""
            lines.append(f"| `{result.gate.text}` | {actual} | {mark}{note} |")
    if baseline is not None:
        lines += ["", *_flips_section(baseline, portal_url, top_flips)]
    return "\n".join(lines) + "\n"


_NO_INTERVAL = f" ({TOO_FEW_CASES})"


def _baseline_section(baseline: BaselineFigures, portal_url: str | None) -> list[str]:
    counts = baseline.counts
    chosen = md_escape(baseline.baseline_label)
    base = _link(f"`{baseline.baseline_id}`", run_url(portal_url, baseline.baseline_id))
    lines = [
        f"### Against the baseline {base} ({chosen})",
        "",
        f"{baseline.shared_cases} shared case(s)"
        + (f" ({counts.n} case-repeat pairs)" if counts.n != baseline.shared_cases else "")
        + (f"; {baseline.only_baseline} only in the baseline" if baseline.only_baseline else "")
        + (f"; {baseline.only_candidate} only in this run" if baseline.only_candidate else "")
        + ".",
        "",
        "| | baseline | this run | change |",
        "|---|---:|---:|---:|",
    ]
    interval = baseline.interval
    # below the minimum n, no interval: say so rather than leave a bare delta that reads as certain
    ci = f" [{_points(interval.low)}, {_points(interval.high)}]" if interval is not None else _NO_INTERVAL
    lines.append(
        f"| pass rate | {_pct(counts.pass_rate_a)} | {_pct(counts.pass_rate_b)} | {_points(counts.delta)}{ci} |"
    )
    for change in baseline.score_changes:
        interval_text = (
            f" [{change.low:+.3g}, {change.high:+.3g}]"
            if change.low is not None and change.high is not None
            else _NO_INTERVAL
        )
        delta = "–" if change.delta is None else f"{change.delta:+.3g}"
        lines.append(
            f"| {md_escape(change.name)} (mean) | {_score(change.mean_a)} | {_score(change.mean_b)} | "
            f"{delta}{interval_text} |"
        )
    lines += [
        "",
        f"**{baseline.regressions} regression(s)** (pass → fail), {baseline.improvements} improvement(s) "
        + (
            f"(fail → pass). McNemar exact p={_p(baseline.verdict.p_value)} (two-sided), "
            if baseline.case_counts is None
            else f"(fail → pass) among case-repeat pairs. Sign test over {baseline.shared_cases} cases' "
            f"pass shares p={_p(baseline.verdict.p_value)} (two-sided), "
        )
        + f"p(worse)={_p(baseline.worse_p)} (one-sided).",
    ]
    significant = [c for c in baseline.score_changes if c.significant]
    lines += ["", "### Significant changes", ""]
    if baseline.verdict.significant:
        lines.append(f"- pass rate: {md_escape(baseline.verdict.text)}")
    for change in significant:
        word = "up" if (change.delta or 0) > 0 else "down"
        lines.append(
            f"- {md_escape(change.name)}: {word} {change.delta:+.3g} (Holm p={_p(change.p_holm)}, "
            f"interval [{change.low:+.3g}, {change.high:+.3g}] excludes 0)"
        )
    if not baseline.verdict.significant and not significant:
        lines.append(f"None: {md_escape(baseline.verdict.text)}.")
    return lines


def _flips_section(baseline: BaselineFigures, portal_url: str | None, top: int) -> list[str]:
    flips = baseline.flips
    if not flips:
        return ["### Flips", "", "No case changed verdict."]
    shown = flips[:top]
    more = f" (the first {len(shown)} of {len(flips)}; the JSON report lists all)" if len(flips) > len(shown) else ""
    lines = [
        f"### Flips{more}",
        "",
        "| case | split | change | baseline score | this run's score |",
        "|---|---|---|---:|---:|",
    ]
    for flip in shown:
        mark = "🔻" if flip.kind == "regression" else "🔺"
        name = md_escape(flip.case_id) + (f" #{flip.repeat_index}" if flip.repeat_index else "")
        url = flip_url(portal_url, baseline.baseline_id, baseline.candidate_id, flip)
        lines.append(
            f"| {_link(name, url)} | {md_escape(flip.split)} | {mark} {flip.arrow} | "
            f"{_score(flip.score_a)} | {_score(flip.score_b)} |"
        )
    return lines
