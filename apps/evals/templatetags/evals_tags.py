"""Filters and tags of the evals pages: percentages, deltas, metrics rows, diffs."""

from __future__ import annotations

import json
from typing import Any

from django import template

from apps.core.dates import format_when
from apps.evals.charts.lines import points
from apps.evals.models import EvalRunStatus, ResultStatus
from apps.evals.queries import rules
from apps.evals.queries.costs import RunCostLatency, cost_latency
from apps.evals.queries.target_cache import cache_counts, used_cache
from apps.evals.worker.shards import shard_counts
from evalcore.diff import ValueDiff, diff_values, shown_text
from evalcore.report import MetricSummary
from evalcore.rules.scorer import ABSENT, HONOURED, IGNORED, JUDGE_ERROR
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers.base import ScorerSpecError
from evalcore.scorers.trajectory import ToolCalls
from evalcore.scorers.values import DEFAULT_RULES, ValueRules
from evalcore.stats import MIN_INTERVAL_CASES, TOO_FEW_CASES, FigureInterval, metric_interval, too_few_cases
from evalcore.valuetext import as_text

register = template.Library()


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    """0..1 -> ``"62.5%"``; ``—`` for missing."""
    if value is None or value == "":
        return "—"
    shown = round(float(value) * 100, int(digits))
    return f"{shown if shown != 0 else 0.0:.{int(digits)}f}%"  # never "-0.0%"


@register.filter
def no_interval(n: Any) -> str:
    """Why a figure over ``n`` cases has no interval: ``too few cases (n=1; an interval needs at
    least 10)`` (:func:`evalcore.stats.too_few_cases`); empty when it may have one."""
    return too_few_cases(int(n or 0)) or ""


@register.simple_tag
def min_interval_cases() -> int:
    """The fewest cases for a bootstrap interval or a standard error (:data:`evalcore.stats.MIN_INTERVAL_CASES`)."""
    return MIN_INTERVAL_CASES


@register.filter
def when(value: Any, arg: str = "") -> str:
    """A moment as every page and the admin show it: ``2026-12-05 18:31 UTC``
    (:func:`apps.core.dates.format_when`); ``when:"s"`` adds the seconds; ``—`` for missing."""
    return format_when(value or None, seconds=arg == "s")


@register.filter
def duration(value: Any) -> str:
    """A ``timedelta`` as people read a run's length: ``42.1 s``, ``3 min 05 s``, ``2 h 07 min``;
    ``—`` for missing (a run still going, or never started)."""
    if value is None or value == "":
        return "—"
    seconds = max(0.0, value.total_seconds())
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@register.filter
def count(value: Any) -> str:
    """A whole number with thousands separators (``12,345``); ``—`` for missing."""
    return "—" if value is None or value == "" else f"{int(value):,}"


@register.filter
def usd(value: Any) -> str:
    """US dollars, four decimals below $1 (``$0.0123``), else two (``$12.40``); ``—`` for
    missing: an unknown cost is never shown as 0."""
    if value is None or value == "":
        return "—"
    value = float(value)
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


@register.filter
def num(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals; ``—`` for missing."""
    if value is None or value == "":
        return "—"
    return f"{float(value):.{int(digits)}f}"


@register.filter
def pvalue(value: Any) -> str:
    """A p-value as people read it: ``0.0127``, ``<0.0001``; ``—`` for missing."""
    if value is None or value == "":
        return "—"
    value = float(value)
    return "<0.0001" if value < 0.0001 else f"{value:.4f}"


@register.filter
def ms(value: Any) -> str:
    """Milliseconds, humanised: ``840 ms`` / ``2.4 s``."""
    if value is None:
        return "—"
    value = float(value)
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


@register.filter
def pretty(value: Any) -> str:
    """A JSON value as indented text: strings as they are, multi-line strings inside a structure
    as indented text blocks (code keeps its indentation, no ``\\n``), keys in their own order."""
    return as_text(value, sort_keys=False)


@register.filter
def shown(value: Any) -> str:
    """Like ``pretty``, cut after ``evalcore.diff.DISPLAY_MAX_CHARS`` characters (and said so):
    for inputs and outputs on the case pages, which must render fast whatever their size."""
    return shown_text(value)


@register.filter
def multiline(value: Any) -> bool:
    """The value is a string of more than one line (a traceback): show it in a ``<pre>``."""
    return isinstance(value, str) and "\n" in value.strip()


@register.filter
def oneline(value: Any) -> str:
    """A JSON value as one compact line (for table cells; the full value is on the detail page)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return " ".join(text.split())


@register.filter
def short_sha(value: str) -> str:
    return (value or "")[:8]


@register.filter
def uses_rules(eval_run: Any) -> bool:
    """The run was scored with ``rule_adherence`` (its page then loads the per-rule block)."""
    return rules.uses_rules(eval_run)


@register.filter
def pill(status: str) -> str:
    """CSS class of a status pill: green / red / amber / grey."""
    return {
        ResultStatus.PASSED: "pill-green",
        EvalRunStatus.FINISHED: "pill-green",
        "ok": "pill-green",  # a trace's run status
        ResultStatus.FAILED: "pill-red",  # also EvalRunStatus.FAILED: the same word
        "regression": "pill-red",
        ResultStatus.ERRORED: "pill-amber",
        # nothing judged the case: neither a pass nor a failure, so neither green nor red
        ResultStatus.UNSCORED: "pill-grey",
        "error": "pill-amber",
        "timeout": "pill-amber",
        EvalRunStatus.INTERRUPTED: "pill-amber",
        EvalRunStatus.RUNNING: "pill-blue",
        EvalRunStatus.QUEUED: "pill-grey",
        "improvement": "pill-green",
        # a rule's outcome (evalcore.rules.scorer); not_applicable / unjudged stay grey
        HONOURED: "pill-green",
        IGNORED: "pill-red",
        ABSENT: "pill-red",
        JUDGE_ERROR: "pill-amber",
    }.get(str(status), "pill-grey")


@register.filter
def spread(metric: MetricSummary) -> str:
    """``{{ m|spread }}``: what follows a metric's mean: ``± 1.2%`` (standard error), ``95% CI
    34.2–100.0%`` (Wilson) or ``(too few cases)``; empty for labels. Never ``± 0.0%``
    (:func:`evalcore.stats.metric_interval`)."""
    interval = metric.interval
    if metric.mean is None:
        return ""
    if interval.method in ("wilson", "wilson_bound") and interval.low is not None and interval.high is not None:
        return f"95% CI {pct(interval.low)[:-1]}–{pct(interval.high)}"
    if interval.method == "normal" and metric.stderr is not None:
        return f"± {pct(metric.stderr)}"
    reason = interval.reason or ""
    return f"({TOO_FEW_CASES})" if reason.startswith(TOO_FEW_CASES) else f"({reason})" if reason else ""


def metric_rows(summary: dict[str, Any] | None) -> list[MetricSummary]:
    """The metrics of a stored ``EvalReport``-shaped dict (its ``metrics``), by name; empty while a
    run has no report. The one reader of stored metrics that accepts old rows: a summary stored
    before coverage counts every attempted case (``total``) as the group, one stored before
    intervals gets its interval from its standard error (never below the minimum n)."""
    rows = []
    for name, m in sorted(((summary or {}).get("metrics") or {}).items()):
        n, mean, stderr = int(m.get("n") or 0), m.get("mean"), m.get("stderr")
        if "interval_method" in m:
            interval = FigureInterval(m.get("low"), m.get("high"), m.get("interval_method"), m.get("interval_reason"))
        else:
            interval = metric_interval(n, mean, stderr, binary=False)
        rows.append(
            MetricSummary(
                name=name,
                n=n,
                total=int(m.get("total") or 0),
                errors=int(m.get("errors") or 0),
                mean=mean,
                stderr=stderr if interval.method == "normal" else None,
                passed=int(m.get("passed") or 0),
                labels=dict(m.get("labels") or {}),
                cases=int(m.get("cases") or m.get("total") or 0),
                binary=bool(m.get("binary")),
                low=interval.low,
                high=interval.high,
                interval_method=interval.method,
                interval_reason=interval.reason,
            )
        )
    return rows


@register.simple_tag
def run_metrics(eval_run: Any) -> list[MetricSummary]:
    """``{% run_metrics eval_run as metrics %}``: the per-scorer rows of a run's summary."""
    return metric_rows(getattr(eval_run, "summary", None))


@register.simple_tag
def split_rows(eval_run: Any) -> list[dict[str, Any]]:
    """``{% split_rows eval_run as splits %}``: per-split aggregates with their metric rows."""
    rows = []
    for name, group in ((getattr(eval_run, "summary", None) or {}).get("splits") or {}).items():
        rows.append({"name": name, **group, "metric_rows": metric_rows(group)})
    return rows


def _call_rules(eval_run: Any) -> ValueRules:
    """The value rules of the run's ``tool_calls`` scorer (its defaults when it has none)."""
    for spec in getattr(eval_run, "scorer_specs", None) or []:
        try:
            scorer = scorer_from_spec(spec)
        except (ScorerSpecError, TypeError, ValueError):
            continue
        if isinstance(scorer, ToolCalls):
            return ValueRules(scorer.strings, scorer.coerce_types)
    return DEFAULT_RULES


@register.simple_tag
def text_diff(expected: Any, actual: Any, eval_run: Any = None) -> ValueDiff:
    """``{% text_diff expected actual [eval_run] as diff %}``: the bounded diff that suits the
    values (:func:`evalcore.diff.diff_values`: JSON paths, tool calls, prose word by word, text
    lines then words, or none past a size or between shapes; ``diff.kind``, ``diff.mode`` and
    ``diff.note`` say which). With the run, a tool-call diff accepts what its ``tool_calls``
    scorer accepts (``strings=bfcl``...)."""
    return diff_values(expected, actual, call_rules=_call_rules(eval_run))


@register.filter
def score_value(score: dict[str, Any]) -> str:
    """A stored score's value for display (bools as pass/fail, numbers with 3 decimals)."""
    value = score.get("value")
    if score.get("error"):
        return "error"
    if isinstance(value, bool):
        return "pass" if value else "fail"
    if isinstance(value, int | float):
        return f"{value:.3f}"
    return "—" if value is None else str(value)


@register.filter
def score_class(score: dict[str, Any]) -> str:
    if score.get("error"):
        return "pill-amber"
    if score.get("passed") is True:
        return "pill-green"
    if score.get("passed") is False:
        return "pill-red"
    return "pill-grey"


@register.simple_tag
def shard_progress(eval_run: Any) -> dict[str, int] | None:
    """A sharded run's shards per status and the workers running them now (``None``: not sharded)."""
    return shard_counts(eval_run) if getattr(eval_run, "n_shards", 0) else None


@register.simple_tag
def target_cache_line(eval_run: Any) -> str | None:
    """``{% target_cache_line eval_run as cached %}``: how many of an ended run's cases were answered
    from the target response cache (``None``: a run without ``--cache-target``, a live run, or none)."""
    if not used_cache(getattr(eval_run, "config", None)) or getattr(eval_run, "status", "") in ("queued", "running"):
        return None
    return cache_counts(eval_run.pk).sentence()


@register.simple_tag
def run_costs(eval_run: Any) -> RunCostLatency | None:
    """``{% run_costs eval_run as costs %}``: an ended run's cost and latency figures (``None``: a
    live run, or one with no cost rows: stored before prices existed, ``evalsite reprice`` costs it)."""
    if getattr(eval_run, "status", "") in ("queued", "running"):
        return None
    figures = cost_latency([eval_run.pk]).get(eval_run.pk)
    return figures if figures is not None and figures.costed else None


# a chart's tooltip and the pages format a delta the same way (defined with the charts)
register.filter("points", points)
