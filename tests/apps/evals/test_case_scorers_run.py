"""Runs honour a case's own scorer specs: promptfoo files from examples/peers imported, then run;
each test's assertions checked, the unmapped ones still reported, and a re-score applies them again."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.evals.models import EvalResult, EvalRun

ROOT = Path(__file__).resolve().parents[3]
PEERS = ROOT / "examples" / "peers" / "promptfoo"

AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec

    ANSWERS = {
        "Yes": "Yarr",
        "I'm hungry": "Arr, I need grub",
        "Output the story of your life in JSON": '{"life": "at sea"}',
        "Hello world": "Ahoy, world",
        "The quick brown fox jumps over the lazy dog": "The fox jumps, arrr",
    }

    def pirate(text):
        if isinstance(text, dict):  # csv-tests: vars language, body, style_config
            return "Bonjour le monde" if text["language"] == "French" and text["body"] == "Hello world" else "j'ai faim"
        return ANSWERS[text]

    pirate_target = TargetSpec(id="pirate", target=pirate, scorers=[])
    """
)


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "pirate.py").write_text(AGENT)
    return folder


def outcomes(eval_run: EvalRun) -> dict[str, tuple[str, dict]]:
    rows = EvalResult.objects.filter(eval_run=eval_run).select_related("run")
    return {r.run.final_answer: (r.status, {s["name"]: s for s in r.scores}) for r in rows}


@pytest.mark.django_db(transaction=True)
def test_a_promptfoo_config_imported_then_run_is_checked_by_its_assertions(agents, capsys):
    call_command("import", str(PEERS / "simple-test/promptfooconfig.yaml"))
    call_command("eval", str(agents), "--set", "simple-test", "--split", "all", "--allow-test", "--quiet")
    eval_run = EvalRun.objects.get()
    assert {"name": "case_scorers", "args": {}, "version": "1"} in eval_run.scorer_specs
    found = outcomes(eval_run)
    assert found["Yarr"][0] == "passed" and found["Yarr"][1]["case.exact_match"]["passed"] is True
    assert found["Arr, I need grub"][1]["case.contains"]["passed"] is True
    assert found['{"life": "at sea"}'][1]["case.is_json"]["passed"] is True
    # javascript / python / similar have no Evalsite equivalent: named, and the case stays unscored
    status, scores = found["Ahoy, world"]
    assert status == "unscored" and scores["case.unchecked"]["value"] == "javascript, python, similar"
    # llm-rubric needs a judge; without one the score is an error, the $ref'd icontains still checks
    status, scores = found["The fox jumps, arrr"]
    assert status == "errored" and scores["case.contains"]["passed"] is True
    assert scores["case.rubric_judge"]["error"]

    # a re-score rebuilds the run's scorers from its stored specs: the cases' checks again
    call_command("rescore", eval_run.pk)
    again = EvalRun.objects.exclude(pk=eval_run.pk).get()
    assert {k: v[0] for k, v in outcomes(again).items()} == {k: v[0] for k, v in found.items()}


@pytest.mark.django_db(transaction=True)
def test_the_csv_tests_of_a_config_fail_where_the_output_misses_and_gates_see_case_scores(agents, capsys):
    call_command("import", str(PEERS / "csv-tests/promptfooconfig.yaml"))
    with pytest.raises(SystemExit) as gated:
        call_command(
            "eval",
            str(agents),
            "--set",
            "csv-tests",
            "--split",
            "all",
            "--allow-test",
            "--quiet",
            "--gate",
            "score:case.contains>=0.9",
        )
    assert gated.value.code == 1
    eval_run = EvalRun.objects.get()
    statuses = sorted(r.status for r in EvalResult.objects.filter(eval_run=eval_run))
    # French hello -> bonjour, French hungry -> faim pass; both pirate tests miss (Ahoy, grub)
    assert statuses == ["failed", "failed", "passed", "passed"]
    assert eval_run.summary["metrics"]["case.contains"]["mean"] == pytest.approx(0.5)
