"""What a fresh user found after issue 25 landed: every writer of a case checks a scenario as the
file loaders do, a record cannot give both fixed turns and a simulated user, every CSV table of
run results refuses a conversation alike, and a run's name is one line of text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from apps.evals.exports.downloads import ExportFormatError, compare_download, queue_download, set_queue_download
from apps.evals.models import EvalCase, EvalRun, EvalSet
from apps.evals.runs.naming import check_name
from evalcore.errors import InvalidInputError
from evalcore.loaders import CaseBankError, load_cases
from tests.apps.factories import make_eval_set

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"


def post(user, payload: dict):
    client = Client()
    client.force_login(user)
    return client.post("/api/eval/cases", payload, content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("scenario", "field"),
    [
        ({"opening": "hi", "max_turns": 0}, "input.scenario.max_turns"),
        ({"opening": "hi", "max_turns": -1}, "input.scenario.max_turns"),
        ({"max_turns": 3}, "input.scenario.opening"),
        ({"opening": "hi", "script": "notalist"}, "input.scenario.script"),
    ],
)
def test_the_api_refuses_a_scenario_the_loaders_refuse(member, scenario, field):
    bank = make_eval_set("bank", 1)
    response = post(member, {"set_id": bank.pk, "case_id": "x5", "input": {"scenario": scenario}})
    assert response.status_code == 422, response.content
    assert field in response.content.decode()
    assert not EvalCase.objects.filter(eval_set=bank, case_id="x5").exists()
    good = post(
        member,
        {
            "set_id": bank.pk,
            "case_id": "ok",
            "input": {"scenario": {"opening": "hi", "goal": "a refund", "max_turns": 3}},
        },
    )
    assert good.status_code == 201, good.content


def test_a_record_with_fixed_turns_and_a_scenario_is_refused(tmp_path):
    path = tmp_path / "both.jsonl"
    path.write_text(json.dumps({"id": "r5", "scenario": {"opening": "hi", "script": ["a"]}, "turns": [{"user": "x"}]}))
    with pytest.raises(CaseBankError) as caught:
        load_cases(path)
    said = str(caught.value)
    assert "both.jsonl" in said and ":1" in said and "scenario" in said and "not both" in said


@pytest.mark.django_db(transaction=True)
def test_every_csv_table_of_run_results_refuses_a_conversation(tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    shutil.copy(REPROS / "bh-43-agents" / "targets.py", folder / "targets.py")
    call_command("import", str(REPROS / "bh-43-turns.evalset.json"))
    for target in ("late-caller", "on-time"):
        call_command(
            "eval", str(folder), "--set", "bh-43-turns", "--target", target,
            "--split", "all", "--allow-test", "--quiet",
        )  # fmt: skip
    a, b = EvalRun.objects.order_by("started")
    for refused in (
        lambda: compare_download(a, b, "csv"),
        lambda: queue_download(a, "csv"),
        lambda: set_queue_download(EvalSet.objects.get(name="bh-43-turns"), "csv", runs="all"),
    ):
        with pytest.raises(ExportFormatError, match="CSV cannot hold a conversation"):
            refused()
    assert b"".join(compare_download(a, b, "jsonl").chunks)  # the same tables as JSON Lines


@pytest.mark.parametrize("name", ["line1\nline2", "esc\x1b[31mred\x1b[0m", "tab\there", "bell\x07"])
def test_a_run_name_is_one_line_of_text(name):
    with pytest.raises(InvalidInputError, match="control character") as caught:
        check_name(name)
    assert caught.value.field == "name"
    assert check_name("  gsm8k · v2 · dev  ") == "gsm8k · v2 · dev"


@pytest.mark.django_db
def test_a_run_that_cannot_check_the_turns_rubrics_says_so(member):
    from apps.evals.runs.options import unchecked_rubric_notice
    from evalcore.judge import RubricJudge
    from evalcore.scorer_registry import resolve_scorers

    bank = make_eval_set("rubrics", 1)
    turns = {"turns": ["Switch off the lamp.", "Thanks!"]}
    expected = [{"final_response": "Done."}, {"rubric": "Must say you are welcome."}]
    response = post(member, {"set_id": bank.pk, "case_id": "r1", "input": turns, "expected": expected})
    assert response.status_code == 201, response.content
    split = EvalCase.objects.get(eval_set=bank, case_id="r1").split
    said = unchecked_rubric_notice(bank, split, resolve_scorers(["exact_match"]))
    assert said is not None and said.startswith("1 conversation case(s) state a per-turn rubric") and "--judge" in said
    assert unchecked_rubric_notice(bank, "all", resolve_scorers(["exact_match"])) == said
    other = "train" if split != "train" else "dev"
    assert unchecked_rubric_notice(bank, other, resolve_scorers(["exact_match"])) is None
    judge = RubricJudge.__new__(RubricJudge)  # a rubric judge reads the turns' rubrics: nothing unchecked
    assert unchecked_rubric_notice(bank, split, [judge]) is None
