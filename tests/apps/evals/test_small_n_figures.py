"""Figures at tiny n on every surface (issue 23, "figures that claim certainty they do not have"):
a 2-case run prints no ``1.000 ± 0.000`` (CLI) or ``100.0% ± 0.0%`` (run page), and a 1-case
comparison no ``CI -100.0 … -100.0`` nor a verdict (CLI, PR summary, compare page, API): a pass
rate gets its Wilson interval, the rest says "too few cases"."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.evals.models import EvalRun

AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec

    def closeness(output, expected):
        return 0.5  # a measurement: the same value for every case

    def good(text):
        return text.upper()

    def worse(text):
        return "nope"

    echo = TargetSpec(id="echo", variants={"good": good, "worse": worse}, scorers=["exact_match", closeness])
    """
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "echo.py").write_text(AGENT)
    return folder


def case_file(tmp_path: Path, words: str) -> Path:
    path = tmp_path / f"{words}.jsonl"
    rows = [{"id": f"q{i}", "input": w, "expected": w.upper(), "split": "dev"} for i, w in enumerate(words)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def eval_cli(agents: Path, cases: Path, *args: str) -> int:
    try:
        call_command("eval", str(agents), "--set", str(cases), *args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_two_cases_print_a_wilson_interval_and_too_few_cases(tmp_path, agents, capsys, client, viewer):
    assert eval_cli(agents, case_file(tmp_path, "ab"), "--variant", "good") == 0
    printed = capsys.readouterr().out
    assert "± 0.000" not in printed and "±" not in printed
    assert "1.000 [0.342, 1.000]" in printed  # exact_match 2/2: Wilson (Wilson 1927)
    assert "0.500 (too few cases)" in printed  # closeness: 2 equal values, no standard error
    run = EvalRun.objects.get()
    metrics = run.summary["metrics"]
    assert metrics["exact_match"]["stderr"] is None and metrics["exact_match"]["interval_method"] == "wilson"
    assert metrics["closeness"]["low"] is None
    assert metrics["closeness"]["interval_reason"] == "too few cases (n=2; an interval needs at least 10)"

    client.force_login(viewer)
    page = client.get(reverse("evals:eval_run", args=[run.pk])).content.decode()
    assert "± 0.0%" not in page and "100.0% ± " not in page
    assert "100.0% 95% CI 34.2–100.0%" in page
    assert "50.0% (too few cases)" in page
    api = client.get(f"/api/eval/runs/{run.pk}").json()
    assert api["summary"]["metrics"]["closeness"]["interval_reason"].startswith("too few cases")


def test_a_one_case_comparison_claims_no_evidence(tmp_path, agents, capsys, client, viewer):
    one = case_file(tmp_path, "a")
    assert eval_cli(agents, one, "--variant", "good", "--quiet") == 0
    summary = tmp_path / "summary.md"
    report = tmp_path / "report.json"
    code = eval_cli(
        agents,
        one,
        "--variant",
        "worse",
        "--baseline",
        "latest:good",
        "--summary-md",
        str(summary),
        "--json",
        str(report),
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "too few cases to compare: 1 in common (1 pass → fail, 0 fail → pass)" in printed
    assert "[-100.0" not in printed and "excludes 0" not in printed  # the delta itself (-100.0 pts) is a fact
    markdown = summary.read_text()
    assert "| pass rate | 100.0% | 0.0% | -100.0 pts (too few cases) |" in markdown
    assert "[-100.0" not in markdown and "None: too few cases to compare" in markdown
    baseline = json.loads(report.read_text())["baseline"]
    assert baseline["interval"] is None and baseline["verdict"] == "too_few_cases"
    assert baseline["interval_reason"] == "too few cases (n=1; an interval needs at least 10)"

    good, worse = EvalRun.objects.order_by("started")
    client.force_login(viewer)
    page = client.get(reverse("evals:compare"), {"a": good.pk, "b": worse.pk}).content.decode()
    assert "CI -100.0" not in page and "95% CI" not in page.split('id="verdict"')[1].split("</div>")[0]
    assert '<div class="verdict too_few_cases" id="verdict">too few cases to compare' in page
    assert "(too few cases (n=1; an interval needs at least 10))" in page
    scorers = client.get(reverse("evals:compare_scorers"), {"a": good.pk, "b": worse.pk}).content.decode()
    assert "too few cases" in scorers and "B lower" not in scorers
    api = client.get("/api/eval/compare", {"a": good.pk, "b": worse.pk, "scorers": "true"}).json()
    assert api["pass_rate_interval"] is None and api["verdict"]["outcome"] == "too_few_cases"
    assert api["pass_rate_interval_reason"] == "too few cases (n=1; an interval needs at least 10)"
    assert all(d["interval"] is None and d["significant"] is False for d in api["scorer_deltas"])
