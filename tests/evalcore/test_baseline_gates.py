"""Baseline gates (issue 14 §3): regressions, improvements, flips, delta:pass_rate and worse_p,
the one-sided McNemar p behind worse_p, and the Markdown summary a pull request shows."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from evalcore.baseline import BaselineFigures, Flip, ScoreChange
from evalcore.gates import GateError, check_gates, parse_gate
from evalcore.report import EvalReport, GroupSummary
from evalcore.stats import PairedCounts, bootstrap_pass_rate_delta, mcnemar_exact, mcnemar_worse_p, verdict
from evalcore.summary_md import md_escape, render_summary


def figures(both: int, a_only: int, b_only: int, neither: int, flips: list[Flip] | None = None) -> BaselineFigures:
    counts = PairedCounts(both, a_only, b_only, neither)
    interval = bootstrap_pass_rate_delta(counts) if counts.n else None
    return BaselineFigures("base1", "pinned", "cand1", counts, 0, 0, interval, verdict(counts, interval), flips or [])


def report(passed: int, failed: int) -> EvalReport:
    n = passed + failed
    group = GroupSummary(n, passed, failed, 0, passed / n, {})
    return EvalReport("cand1", n, passed, failed, 0, passed / n, {}, {"dev": group})


@pytest.mark.parametrize(
    ("text", "metric"),
    [
        ("regressions<=0", "regressions"),
        ("improvements>=1", "improvements"),
        ("flips<=3", "flips"),
        ("worse_p>=0.05", "worse_p"),
        ("delta:pass_rate>=-0.02", "delta:pass_rate"),
    ],
)
def test_baseline_gates_parse_and_need_a_baseline(text, metric):
    gate = parse_gate(text)
    assert gate.metric == metric and gate.needs_baseline
    assert not parse_gate("pass_rate>=0.5").needs_baseline


def test_an_unknown_delta_gate_is_refused_by_name():
    with pytest.raises(GateError, match="delta:pass_rate"):
        parse_gate("delta:score>=0")
    with pytest.raises(GateError, match="regressions"):  # the error lists the baseline metrics
        parse_gate("regresions<=0")


def test_one_flip_fails_regressions_le_0_and_the_other_gates_read_the_comparison():
    gates = [parse_gate(t) for t in ("regressions<=0", "delta:pass_rate>=-0.2", "worse_p>=0.05", "flips<=1")]
    results = check_gates(report(7, 1), gates, figures(7, 1, 0, 0))
    assert [(r.gate.metric, r.actual, r.held) for r in results] == [
        ("regressions", 1.0, False),
        ("delta:pass_rate", -0.125, True),
        ("worse_p", 0.5, True),
        ("flips", 1.0, True),
    ]


def test_worse_p_fails_when_the_candidate_is_significantly_worse_not_when_better():
    gate = [parse_gate("worse_p>=0.05")]
    assert not check_gates(report(0, 10), gate, figures(0, 10, 0, 0))[0].held  # p = 1/1024
    assert check_gates(report(10, 0), gate, figures(0, 0, 10, 0))[0].held  # 10 improvements: p = 1


def test_baseline_gates_fail_without_a_baseline_or_without_a_shared_case():
    gates = [parse_gate("regressions<=0"), parse_gate("worse_p>=0.05")]
    assert [r.held for r in check_gates(report(1, 0), gates, None)] == [False, False]
    assert [(r.actual, r.held) for r in check_gates(report(1, 0), gates, figures(0, 0, 0, 0))] == [
        (None, False),
        (None, False),
    ]


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [(0, 0, 1.0), (1, 0, 0.5), (5, 0, 1 / 32), (0, 5, 1.0), (3, 3, 42 / 64), (2, 1, 0.5), (1, 2, 7 / 8)],
)
def test_worse_p_is_the_one_sided_exact_binomial_tail(b, c, expected):
    assert mcnemar_worse_p(b, c) == pytest.approx(expected)


def exact_upper_tail(b: int, c: int) -> float:
    n = b + c
    return float(Fraction(sum(math.comb(n, i) for i in range(b, n + 1)), 2**n))


@pytest.mark.parametrize(("b", "c"), [(9, 3), (700, 600), (3_000, 2_900)])
def test_worse_p_matches_exact_arithmetic_in_both_directions(b, c):
    assert mcnemar_worse_p(b, c) == pytest.approx(exact_upper_tail(b, c), rel=1e-9)
    assert mcnemar_worse_p(c, b) == pytest.approx(exact_upper_tail(c, b), rel=1e-9)
    # regressions dominating: one tail of the two-sided test
    assert mcnemar_worse_p(b, c) == pytest.approx(mcnemar_exact(b, c) / 2, rel=1e-9)


def test_worse_p_refuses_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_worse_p(-1, 2)


def test_the_markdown_summary_names_the_failed_gate_and_the_flip_with_a_link():
    flip = Flip("q|2", 0, "regression", "dev", 1.0, 0.0, "passed", "failed")
    change = ScoreChange("exact_match", 8, 1.0, 0.875, -0.375, 0.0, 0.5, False)
    base = figures(7, 1, 0, 0, [flip])
    base.score_changes = [change]
    gates = check_gates(report(7, 1), [parse_gate("regressions<=0")], base)
    info = {
        "id": "cand1",
        "set": "qa",
        "target_id": "echo",
        "variant": "worse",
        "split": "dev",
        "git_sha": "abcdef123456",
    }
    text = render_summary(report(7, 1), info=info, gates=gates, baseline=base, portal_url="https://evals.example.com/")
    assert text.startswith("## ❌ Evalsite: qa · echo · worse: 1 of 1 gate(s) failed: `regressions<=0`")
    assert "**1 regression(s)**" in text
    # the case id is escaped (a | cannot break the table) and linked to the side-by-side page
    assert "[q\\|2](https://evals.example.com/compare/case/?a=base1&b=cand1&case=q%7C2&repeat=0)" in text
    assert "🔻 passed → failed" in text
    assert "(https://evals.example.com/runs/base1/)" in text
    assert "| `regressions<=0` | 1 | ❌ failed |" in text


def test_the_markdown_summary_without_gates_baseline_or_portal():
    info = {"id": "r1", "set": "qa", "target_id": "echo", "split": "dev"}
    text = render_summary(report(3, 1), info=info, gates=[])
    assert text.startswith("## Evalsite: qa · echo: 75.0% passed (no gates)")
    assert "](" not in text and "Flips" not in text


def test_top_flips_are_capped_and_say_so():
    flips = [Flip(f"c{i}", 0, "regression", "dev", 1.0, 0.0, "passed", "failed") for i in range(30)]
    info = {"id": "r1", "set": "qa", "target_id": "echo", "split": "dev"}
    text = render_summary(report(0, 30), info=info, gates=[], baseline=figures(0, 30, 0, 0, flips), top_flips=5)
    assert "the first 5 of 30" in text and "| c4 |" in text and "| c5 |" not in text


def test_md_escape_keeps_tables_and_links_intact():
    assert md_escape("a|b`c*d_e[f]\ng _x") == "a\\|b\\`c\\*d_e\\[f\\] g \\_x"
