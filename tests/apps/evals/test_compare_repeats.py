"""Repeats are not cases (`--repeat`): the minimum n counts distinct cases and, with repeats, the
paired statistics run on per-case aggregates (each case's pass share / mean score), in the CLI
baseline, the JSON report, the PR summary, the compare page and API, scorer deltas and slices."""

from __future__ import annotations

import json
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from apps.evals.models import EvalResult, EvalRun
from apps.evals.queries.figures import trend_series
from evalcore.slices import PairedCase, compare_slices
from evalcore.stats import bootstrap_mean_delta, bootstrap_pass_rate_delta, mcnemar_exact, wilson_interval

AGENT = textwrap.dedent(
    """
    import itertools

    from evalcore.discovery import TargetSpec

    _calls = itertools.count()

    def careful(text):
        return text.upper()

    def hasty(text):
        # case "a" always wrong; cases "e".."l" wrong on about every other call (repeats differ)
        if text == "a":
            return "nope"
        if text >= "e" and next(_calls) % 2 == 0:
            return "nope"
        return text.upper()

    calculator = TargetSpec(id="calculator", variants={"careful": careful, "hasty": hasty}, scorers=["exact_match"])
    """
)


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "calculator.py").write_text(AGENT)
    return folder


def write_set(tmp_path: Path, letters: str) -> Path:
    path = tmp_path / f"set{len(letters)}.jsonl"
    rows = [{"id": f"q{i}", "input": w, "expected": w.upper(), "split": "dev"} for i, w in enumerate(letters)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def eval_cli(agents: Path, cases: Path, *args: str) -> int:
    try:
        call_command("eval", str(agents), "--set", str(cases), "--target", "calculator", "--quiet", *args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def run_pair(tmp_path: Path, agents: Path, cases: Path, repeat: int) -> tuple[EvalRun, EvalRun, dict, str]:
    assert eval_cli(agents, cases, "--variant", "careful", "--repeat", str(repeat)) == 0
    careful = EvalRun.objects.get(variant="careful")
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    eval_cli(
        agents,
        cases,
        "--variant",
        "hasty",
        "--repeat",
        str(repeat),
        "--baseline",
        "latest:careful",
        "--json",
        str(out / "report.json"),
        "--summary-md",
        str(out / "summary.md"),
    )
    hasty = EvalRun.objects.get(variant="hasty")
    return careful, hasty, json.loads((out / "report.json").read_text()), (out / "summary.md").read_text()


def shares(run_a: EvalRun, run_b: EvalRun) -> list[tuple[float, float]]:
    """Per-case pass shares, computed here from the stored results, independently of the code."""
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    b = {(r.case_id, r.repeat_index): r.passed for r in EvalResult.objects.filter(eval_run=run_b)}
    for r in EvalResult.objects.filter(eval_run=run_a):
        if (r.case_id, r.repeat_index) in b:
            t = tally[r.case_id]
            t[0] += bool(r.passed)
            t[1] += bool(b[(r.case_id, r.repeat_index)])
            t[2] += 1
    return [(a / n, bb / n) for a, bb, n in tally.values()]


@pytest.mark.django_db(transaction=True)
def test_two_cases_repeated_ten_times_are_too_few_everywhere(tmp_path, agents, viewer, capsys):
    careful, hasty, report, summary = run_pair(tmp_path, agents, write_set(tmp_path, "ab"), 10)
    printed = capsys.readouterr().out
    assert hasty.n_done == 20
    assert "B is worse" not in printed and "excludes 0" not in printed
    assert "too few cases to compare: 2 in common" in printed
    assert "2 shared case(s) (20 case-repeat pairs)" in printed

    block = report["baseline"]
    assert block["shared_cases"] == 2 and block["shared_pairs"] == 20
    assert block["interval"] is None and block["interval_reason"].startswith("too few cases (n=2;")
    assert block["verdict"] == "too_few_cases" and block["test"] == "sign_test_over_cases"
    assert "(pass share fell on 1, rose on 0)" in block["verdict_text"]
    assert all(not c["significant"] and c["low"] is None and c["n"] == 2 for c in block["score_changes"])
    # the run's own pass-rate interval has n = 2 cases (Wilson 1/2), not 20 repeats
    metric = report["report"]["metrics"]["exact_match"]
    assert (metric["low"], metric["high"]) == wilson_interval(1, 2)  # not Wilson(10, 20)
    assert metric["interval_method"] == "wilson"

    # the set's trend chart: the pass-rate band of a repeated run is over its 2 cases too
    (point,) = next(s for s in trend_series(hasty.eval_set, "pass_rate")[0] if s.name.endswith("hasty")).points
    assert (point.low, point.high) == wilson_interval(1, 2)

    assert "B is worse" not in summary and "2 shared case(s) (20 case-repeat pairs)" in summary
    assert "20 shared case(s)" not in summary

    client = Client()
    client.force_login(viewer)
    html = client.get(f"/compare/?a={careful.pk}&b={hasty.pk}").content.decode()
    assert "B is worse" not in html
    assert "too few cases to compare: 2 in common" in html
    scorers = client.get(f"/compare/scorers/?a={careful.pk}&b={hasty.pk}").content.decode()
    assert "exact_match" in scorers and "B lower" not in scorers and "too few cases" in scorers
    data = json.loads(client.get(f"/api/eval/compare?a={careful.pk}&b={hasty.pk}&scorers=true").content)
    assert data["verdict"]["outcome"] == "too_few_cases" and not data["verdict"]["significant"]
    assert data["pass_rate_interval"] is None and data["pass_rate_interval_reason"].startswith("too few cases (n=2;")
    assert all(d["interval"] is None for d in data["scorer_deltas"])


@pytest.mark.django_db(transaction=True)
def test_twelve_cases_three_repeats_test_the_per_case_aggregates(tmp_path, agents, viewer):
    careful, hasty, report, summary = run_pair(tmp_path, agents, write_set(tmp_path, "abcdefghijkl"), 3)
    per_case = shares(careful, hasty)
    assert len(per_case) == 12
    assert any(0 < b < 1 for _, b in per_case)  # some case passed on some repeats only
    differences = [b - a for a, b in per_case]
    expected = bootstrap_mean_delta(differences)
    assert expected is not None
    expected_p = mcnemar_exact(sum(d < 0 for d in differences), sum(d > 0 for d in differences))

    block = report["baseline"]
    assert block["shared_cases"] == 12 and block["shared_pairs"] == 36
    assert (block["interval"]["low"], block["interval"]["high"]) == (expected.low, expected.high)
    assert block["mcnemar_p"] == expected_p
    assert "12 shared case(s) (36 case-repeat pairs)" in summary
    assert "Sign test over 12 cases' pass shares" in summary
    (change,) = block["score_changes"]
    assert change["n"] == 12 and (change["low"], change["high"]) == (expected.low, expected.high)

    client = Client()
    client.force_login(viewer)
    data = json.loads(client.get(f"/api/eval/compare?a={careful.pk}&b={hasty.pk}").content)
    assert data["verdict"]["p_value"] == expected_p
    interval = data["pass_rate_interval"]
    assert (interval["low"], interval["high"]) == (expected.low, expected.high)


def test_slices_with_repeats_count_and_test_distinct_cases():
    # 4 cases in slice x, each repeated 5 times, all regressions: 20 pairs, but 4 cases
    paired = [
        PairedCase(True, False, tags=["x"] if i < 4 else ["y"], case_id=f"c{i}") for i in range(12) for _ in range(5)
    ]
    rows = {r.label: r for r in compare_slices(paired)}
    x = rows["tag=x"]
    assert x.n_cases == 4 and x.counts.n == 20
    assert x.interval is None and not x.significant
    assert x.p_value == mcnemar_exact(4, 0)
    # one repeat per case: as before
    single = compare_slices([PairedCase(True, False, tags=["x"] if i < 4 else ["y"]) for i in range(12)])
    assert {r.label: r.n_cases for r in single} == {"tag=x": 4, "tag=y": 8}
    y = next(r for r in single if r.label == "tag=y")
    assert y.counts.n == 8 and y.interval is None


def test_single_repeat_case_level_equals_mcnemar():
    # with one repeat the sign test over cases is McNemar's test on the 2x2 table
    from evalcore.stats import PairedCounts, case_level_pass_delta

    shares_ = [(1.0, 0.0)] * 6 + [(0.0, 1.0)] * 1 + [(1.0, 1.0)] * 5
    signs, interval = case_level_pass_delta(shares_)
    assert (signs.a_only, signs.b_only, signs.n) == (6, 1, 12)
    assert interval is not None
    assert bootstrap_pass_rate_delta(PairedCounts(5, 6, 1, 0)) is not None
