"""`evalsite eval --baseline RUN_ID|pinned|latest[:VARIANT]` (issue 14 §3): which run is the
baseline, the clear refusals, and the gate on the comparison with the flips in every report."""

from __future__ import annotations

import json
import textwrap
from datetime import timedelta
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalRun
from apps.evals.runs.baseline import BaselineError, baseline_figures, resolve_baseline
from apps.evals.runs.edits import pin_baseline
from tests.apps.factories import make_eval_run, make_eval_set

AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec

    def good(text):
        return text.upper()

    def worse(text):  # one regression: case q2 ("c")
        return "nope" if text == "c" else text.upper()

    echo = TargetSpec(id="echo", variants={"good": good, "worse": worse}, scorers=["exact_match"])
    """
)


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "echo.py").write_text(AGENT)
    return folder


@pytest.fixture
def qa_set(tmp_path: Path) -> Path:
    rows = [{"id": f"q{i}", "input": w, "expected": w.upper(), "split": "dev"} for i, w in enumerate("abcdefgh")]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def eval_cli(agents: Path, qa_set: Path, *args: str) -> int:
    """Run ``evalsite eval`` in process; its exit code (0 when it returns)."""
    try:
        call_command("eval", str(agents), "--set", str(qa_set), "--quiet", *args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.mark.django_db(transaction=True)
def test_one_flip_fails_regressions_le_0_and_every_report_names_it(tmp_path, agents, qa_set, capsys):
    assert eval_cli(agents, qa_set, "--variant", "good") == 0
    good = EvalRun.objects.get()
    out = tmp_path / "out"
    out.mkdir()
    code = eval_cli(
        agents,
        qa_set,
        "--variant",
        "worse",
        "--baseline",
        "latest:good",
        "--gate",
        "regressions<=0",
        "--gate",
        "delta:pass_rate>=-0.2",
        "--gate",
        "worse_p>=0.05",
        "--summary-md",
        str(out / "summary.md"),
        "--json",
        str(out / "report.json"),
        "--junit",
        str(out / "junit.xml"),
        "--portal-url",
        "https://evals.example.com",
    )
    assert code == 1
    printed = capsys.readouterr().out
    assert f"baseline {good.pk} (latest:good): 8 shared case(s)" in printed
    assert "1 regression(s), 0 improvement(s)" in printed
    assert "regression  q2 (dev): passed → failed" in printed
    assert "gate regressions<=0: FAIL (actual 1)" in printed
    assert "gate delta:pass_rate>=-0.2: PASS (actual -0.125)" in printed
    assert "gate worse_p>=0.05: PASS (actual 0.5)" in printed

    worse = EvalRun.objects.exclude(pk=good.pk).get()
    summary = (out / "summary.md").read_text()
    assert summary.startswith("## ❌ Evalsite: qa · echo · worse: 1 of 3 gate(s) failed: `regressions<=0`")
    link = f"[q2](https://evals.example.com/compare/case/?a={good.pk}&b={worse.pk}&case=q2&repeat=0)"
    assert f"| {link} | dev | 🔻 passed → failed | 1 | 0 |" in summary

    report = json.loads((out / "report.json").read_text())
    assert report["baseline"]["eval_run"] == good.pk and report["baseline"]["regressions"] == 1
    assert [f["case_id"] for f in report["baseline"]["flips"]] == ["q2"]
    assert {g["gate"]: g["held"] for g in report["gates"]} == {
        "regressions<=0": False,
        "delta:pass_rate>=-0.2": True,
        "worse_p>=0.05": True,
    }
    junit = ET.parse(out / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert props["evalsite.baseline"] == good.pk and props["evalsite.regressions"] == "1"
    q2 = next(c for c in junit.iter("testcase") if c.get("name") == "q2")
    assert q2.find("failure").get("message") == "regression: passed in the baseline"


@pytest.mark.django_db(transaction=True)
def test_the_same_run_again_holds_every_baseline_gate(agents, qa_set, capsys):
    assert eval_cli(agents, qa_set, "--variant", "good") == 0
    pin_baseline(EvalRun.objects.get())
    gates = ("--gate", "regressions<=0", "--gate", "worse_p>=0.05", "--gate", "delta:pass_rate>=0")
    assert eval_cli(agents, qa_set, "--variant", "good", "--baseline", "pinned", *gates) == 0
    assert "0 regression(s), 0 improvement(s)" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_baseline_refusals_are_usage_errors_before_anything_runs(tmp_path, agents, qa_set):
    with pytest.raises(CommandError, match="compares with a baseline: add --baseline") as no_option:
        call_command("eval", str(agents), "--set", str(qa_set), "--gate", "regressions<=0", "--quiet")
    assert no_option.value.returncode == 2
    with pytest.raises(CommandError, match="no run of set 'qa', target 'echo' is pinned"):
        call_command("eval", str(agents), "--set", str(qa_set), "--baseline", "pinned", "--quiet")
    with pytest.raises(CommandError, match="no finished run of set 'qa', target 'echo', split 'dev'"):
        call_command("eval", str(agents), "--set", str(qa_set), "--baseline", "latest", "--quiet")
    with pytest.raises(CommandError, match="'nope': no such eval run"):
        call_command("eval", str(agents), "--set", str(qa_set), "--baseline", "nope", "--quiet")
    assert not EvalRun.objects.exists()  # nothing was created by a refused command

    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "x", "input": "a", "expected": "A", "split": "dev"}\n')
    assert eval_cli(agents, other, "--variant", "good") == 0
    elsewhere = EvalRun.objects.get()
    with pytest.raises(CommandError, match="that run is on set 'other', this one on 'qa'"):
        call_command("eval", str(agents), "--set", str(qa_set), "--baseline", elsewhere.pk, "--quiet")
    assert EvalRun.objects.count() == 1


@pytest.mark.django_db
def test_pinned_and_latest_resolve_to_the_runs_compare_would_suggest():
    eval_set = make_eval_set(n_cases=4)
    old = make_eval_run(eval_set, [True, True, False, False], variant="a", split="dev")
    new = make_eval_run(eval_set, [True, False, False, False], variant="b", split="dev")
    EvalRun.objects.filter(pk=new.pk).update(started=old.started + timedelta(hours=1))
    make_eval_run(eval_set, [True] * 4, variant="c", split="dev", status="running")  # never a baseline
    make_eval_run(eval_set, [True] * 4, variant="d", split="train")  # another split
    make_eval_run(eval_set, [True] * 4, target_id="other", split="dev")  # another target

    def resolve(text: str, **kw):
        return resolve_baseline(text, eval_set=eval_set, target_id="echo", split="dev", **kw)

    assert resolve("latest").eval_run == new
    assert resolve("latest:a").eval_run == old
    assert resolve(old.pk).label == old.pk
    new.refresh_from_db()
    assert resolve("latest", exclude=new).eval_run == old  # before this one, never itself
    with pytest.raises(BaselineError, match="variant 'zz'"):
        resolve("latest:zz")
    with pytest.raises(BaselineError, match="is pinned"):
        resolve("pinned")
    pin_baseline(old)
    assert resolve("pinned").eval_run == old and resolve("pinned").label == "pinned"
    with pytest.raises(BaselineError, match="that is this run"):
        resolve(old.pk, exclude=old)
    running = EvalRun.objects.get(variant="c")
    with pytest.raises(BaselineError, match="is running"):
        resolve(running.pk)


@pytest.mark.django_db
def test_figures_list_every_flip_regressions_first():
    eval_set = make_eval_set(n_cases=600, splits=("dev",))
    base = make_eval_run(eval_set, [i % 2 == 0 for i in range(600)], split="dev")
    cand = make_eval_run(eval_set, [i % 3 == 0 for i in range(600)], split="dev", variant="v2")
    from apps.evals.runs.baseline import Baseline

    figures = baseline_figures(Baseline(base, base.pk), cand)
    regressions = sum(1 for i in range(600) if i % 2 == 0 and i % 3 != 0)
    improvements = sum(1 for i in range(600) if i % 3 == 0 and i % 2 != 0)
    assert (figures.regressions, figures.improvements) == (regressions, improvements)
    assert len(figures.flips) == regressions + improvements  # past the 500-row page
    kinds = [f.kind for f in figures.flips]
    assert kinds == ["regression"] * regressions + ["improvement"] * improvements
    assert figures.worse_p < 0.001
