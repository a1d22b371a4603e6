"""`evalsite import-run`: Inspect logs (written by inspect-ai itself, tests/fixtures/inspect_logs)
stored as finished eval runs, shown on the runs, run, trace and trends pages, and compared case
by case with an Evalsite run of the same set in the portal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet, SetVersion
from apps.traces.models import Event, Run
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests" / "fixtures" / "inspect_logs"
EVAL_LOG = LOGS / "biology_qa.eval"
JSON_LOG = LOGS / "biology_qa.json"
DATASET = LOGS / "biology_qa.jsonl"
EVALSITE = Path(sys.executable).with_name("evalsite")
MAP = ("--map", "input=question,expected=answer")

# An Evalsite target over the same questions: right on all but q4 (Inspect's mock is wrong on
# q3's first epoch and on q5, and errors on q7 in the .eval log).
AGENT = textwrap.dedent(
    """
    from evalcore.discovery import TargetSpec

    ANSWERS = {
        "Hansen's disease": "Leprosy", "Botany": "Plants", "What is the human body's largest": "Skin",
        "True or false: snails": "False", "What part of the human body": "Lower Jawbone",
        "How many bones": "206", "True or false: jellyfish": "False",
    }

    def kb(question):
        return next(a for q, a in ANSWERS.items() if question.startswith(q))

    kb_target = TargetSpec(id="kb", target=kb, scorers=["exact_match"])
    """
)


def import_dataset(path: Path = DATASET, *args: str) -> None:
    call_command("import", str(path), *MAP, *args)


@pytest.mark.django_db(transaction=True)
def test_an_eval_log_becomes_a_finished_run_with_results_scores_and_traces(capsys: pytest.CaptureFixture[str]) -> None:
    import_dataset()
    capsys.readouterr()
    call_command("import_run", str(EVAL_LOG))
    out = capsys.readouterr().out
    run = EvalRun.objects.get()
    assert f"-> run {run.pk} on set 'biology_qa': 14 results (9 passed, 3 failed, 2 errored, 0 unscored)" in out
    assert (run.status, run.target_id, run.variant, run.split, run.model) == (
        "finished",
        "inspect:biology_qa",
        "mockllm/model",
        "all",  # the set's cases are in train, dev and test
        "mockllm/model",
    )
    assert (run.n_total, run.n_done, run.n_passed, run.n_failed, run.n_errored) == (14, 14, 9, 3, 2)
    assert run.config["source"] == "inspect_log" and run.config["log_format"] == "eval"
    assert run.config["inspect_version"] == "0.3.285" and run.config["epochs"] == 2
    assert run.config["inspect_metrics"]["includes"]["accuracy"] == pytest.approx(0.75)
    assert len(run.config["sha256"]) == 64 and run.git_sha == "c634a32" and run.git_dirty
    assert run.started is not None and run.finished is not None and run.started.year == 2026
    assert run.summary["metrics"]["includes"]["mean"] == pytest.approx(0.75)  # = Inspect's accuracy
    assert run.set_version == SetVersion.objects.get(eval_set=run.eval_set)
    statuses = {(r.case_id, r.repeat_index): r.status for r in EvalResult.objects.filter(eval_run=run)}
    assert statuses[("q3", 0)] == "failed" and statuses[("q3", 1)] == "passed"
    assert statuses[("q7", 0)] == statuses[("q7", 1)] == "errored"
    q2 = EvalResult.objects.select_related("run").get(eval_run=run, case_id="q2", repeat_index=0)
    assert q2.run.run_id == f"{run.pk}:q2#0" and q2.run.final_answer == "Plants"
    assert (q2.run.tokens_in, q2.run.tokens_out, q2.run.target_id) == (37, 3, "inspect:biology_qa")
    assert q2.run.step_metrics["llm_calls"] == 2 and q2.run.step_metrics["tool_calls"] == 1
    assert q2.expected == "Plants" and q2.expected_hash
    assert [s["name"] for s in q2.scores] == ["includes", "brevity.ratio", "brevity.words"]
    kinds = list(Event.objects.filter(run=q2.run, type="span_begin").order_by("seq").values_list("payload", flat=True))
    assert [k["kind"] for k in kinds] == ["invoke_agent", "chat", "execute_tool", "chat"]
    q7 = EvalResult.objects.select_related("run").get(eval_run=run, case_id="q7", repeat_index=0)
    assert q7.run.error == {"type": "RuntimeError", "message": "mock model: upstream returned 503 for this sample"}


@pytest.mark.django_db(transaction=True)
def test_the_same_log_again_writes_nothing_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    import_dataset()
    call_command("import_run", str(JSON_LOG))
    run = EvalRun.objects.get()
    counts = (EvalResult.objects.count(), Run.objects.count(), Event.objects.count())
    capsys.readouterr()
    call_command("import_run", str(JSON_LOG))
    out = capsys.readouterr().out
    assert f"already imported as run {run.pk} on set 'biology_qa' (same file" in out and "nothing written" in out
    assert (EvalRun.objects.count(), EvalResult.objects.count(), Run.objects.count(), Event.objects.count()) == (
        1,
        *counts,
    )
    call_command("import_run", str(EVAL_LOG))  # another log of the same set: another run
    assert EvalRun.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_samples_without_a_case_are_refused_by_name_or_added_as_a_set_version(tmp_path: Path) -> None:
    partial = tmp_path / "biology_qa.jsonl"
    partial.write_text("".join(DATASET.read_text().splitlines(keepends=True)[:5]))
    import_dataset(partial)
    with pytest.raises(CommandError, match=r"2 sample id\(s\) are not cases of set 'biology_qa': q6, q7") as error:
        call_command("import_run", str(JSON_LOG))
    assert error.value.returncode == 2 and not EvalRun.objects.exists()
    assert SetVersion.objects.count() == 1

    call_command("import_run", str(JSON_LOG), "--add-cases")
    eval_set = EvalSet.objects.get()
    assert eval_set.cases.count() == 7
    added = EvalCase.objects.get(eval_set=eval_set, case_id="q7")
    assert (added.input, added.expected) == ("True or false: jellyfish have hearts", "False")
    latest = SetVersion.objects.filter(eval_set=eval_set).order_by("-number").first()
    assert latest is not None and (latest.number, latest.added) == (2, 2)
    assert latest.source.startswith("inspect log") and EvalRun.objects.get().set_version == latest
    assert EvalRun.objects.get().n_done == 7


@pytest.mark.django_db(transaction=True)
def test_no_set_is_refused_or_made_from_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CommandError, match="no eval set 'biology_qa': import the dataset the log was run on first"):
        call_command("import_run", str(EVAL_LOG))
    call_command("import_run", str(EVAL_LOG), "--set", "bio-from-log", "--add-cases", "--variant", "mock")
    assert "set 'bio-from-log' made from 7 sample(s) of the log" in capsys.readouterr().out
    run = EvalRun.objects.get()
    assert (run.eval_set.name, run.variant, run.n_done, run.eval_set.cases.count()) == ("bio-from-log", "mock", 14, 7)


@pytest.mark.django_db(transaction=True)
def test_a_set_imported_without_ids_is_matched_by_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [json.loads(line) for line in DATASET.read_text().splitlines()]
    no_ids = tmp_path / "biology_qa.jsonl"
    no_ids.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "id"}) + "\n" for r in rows))
    import_dataset(no_ids, "--auto-id")
    capsys.readouterr()
    call_command("import_run", str(JSON_LOG))
    assert "7 sample(s) matched to a case of another id by their input" in capsys.readouterr().out
    case_ids = set(EvalResult.objects.values_list("case_id", flat=True))
    assert case_ids == set(EvalCase.objects.values_list("case_id", flat=True)) and all(
        c.startswith("auto-") for c in case_ids
    )


@pytest.mark.django_db(transaction=True)
def test_a_bad_log_imports_nothing_and_names_the_place(tmp_path: Path) -> None:
    import_dataset()
    data = json.loads(JSON_LOG.read_text())
    data["samples"][3]["scores"]["includes"] = {"answer": "x"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=r"bad.json: field 'samples\[3\].scores.includes.value': field required"):
        call_command("import_run", str(bad))
    assert not EvalRun.objects.exists() and not Run.objects.exists()
    with pytest.raises(CommandError, match=r"is an Inspect log \(a run, not a case bank\): import it with evalsite"):
        call_command("import", str(EVAL_LOG))


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "kb.py").write_text(AGENT)
    return folder


def _stat(html: str, label: str) -> str:
    found = re.search(r"<b[^>]*>([^<]*)</b><span>" + re.escape(label), html)
    assert found, label
    return found.group(1)


@pytest.mark.django_db(transaction=True)
def test_an_imported_inspect_run_compares_with_an_evalsite_run_of_the_same_set(client, viewer, agents, capsys) -> None:
    import_dataset()
    call_command(
        "eval", str(agents), "--set", "biology_qa", "--split", "all", "--allow-test", "--repeat", "2", "--quiet"
    )
    call_command("import_run", str(EVAL_LOG))
    ours = EvalRun.objects.get(target_id="kb")
    theirs = EvalRun.objects.get(target_id="inspect:biology_qa")
    assert (ours.n_done, ours.n_passed) == (14, 12)
    client.force_login(viewer)

    html = client.get(f"/compare/?a={ours.pk}&b={theirs.pk}").content.decode()
    # pairs on (case, repeat): epoch 1 -> repeat 0, epoch 2 -> repeat 1, all 14 paired
    # (a page counting the 14 pairs as "cases" would claim twice the set's 7 cases)
    assert _stat(html, "(case, repeat) pairs in both, over 7 cases") == "14"
    assert not re.search(r"</b><span>cases in both", html)  # no stat counts the pairs as cases
    assert "below 10 cases in both, no interval and no verdict (too few cases)" in html  # 7 cases: no interval
    assert _stat(html, "pass rate A → B") == "85.7% → 64.3%"
    assert _stat(html, "pass → fail") == "5"  # q3 #0, q5 #0 #1, q7 #0 #1 (errored)
    assert _stat(html, "fail → pass") == "2"  # q4 #0 #1
    assert "only in A / only in B" not in html
    rows = re.findall(r'<tr class="(regression|improvement|same)">\s*<td class="mono"><a[^>]*>(q\d)</a>( #1)?', html)
    assert sorted((kind, case + rep) for kind, case, rep in rows if kind != "same") == [
        ("improvement", "q4"),
        ("improvement", "q4 #1"),
        ("regression", "q3"),
        ("regression", "q5"),
        ("regression", "q5 #1"),
        ("regression", "q7"),
        ("regression", "q7 #1"),
    ]

    runs = client.get("/runs/").content.decode()
    assert theirs.pk in runs and "inspect:biology_qa" in runs and ours.pk in runs
    page = client.get(f"/runs/{theirs.pk}/").content.decode()
    assert "imported from Inspect log" in page and "biology_qa.eval" in page and "inspect_ai 0.3.285" in page
    q2 = EvalResult.objects.get(eval_run=theirs, case_id="q2", repeat_index=0)
    case_page = client.get(f"/runs/{theirs.pk}/cases/{q2.pk}/").content.decode()
    assert "execute_tool" in case_page and "lookup" in case_page
    assert "Botany: the scientific study of plants." in case_page
    trends = client.get(f"/trends/?set={theirs.eval_set_id}").content.decode()
    assert "inspect:biology_qa/mockllm/model" in trends and "kb/" in trends
    trends_scorer = client.get(f"/trends/?set={theirs.eval_set_id}&scorer=includes").content.decode()
    assert "inspect:biology_qa/mockllm/model: 75.0%" in trends_scorer

    # the imported run is a baseline like any other: a CI gate on the flips against it
    capsys.readouterr()
    with pytest.raises(SystemExit) as gate:
        call_command(
            "eval", str(agents), "--set", "biology_qa", "--split", "all", "--allow-test", "--repeat", "2",
            "--baseline", theirs.pk, "--gate", "regressions<=0",
        )  # fmt: skip
    assert gate.value.code == 1
    assert "2 regression(s)" in capsys.readouterr().out  # q4 in both repeats: it passed in Inspect


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    return subprocess.run([str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)


def test_the_console_script_spells_it_import_run(tmp_path: Path) -> None:
    db = tmp_path / "cli.sqlite3"
    assert run_cli("import", str(DATASET), *MAP, db=db).returncode == 0
    first = run_cli("import-run", str(EVAL_LOG), str(JSON_LOG), db=db)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("on set 'biology_qa'") == 2 and "14 results (9 passed" in first.stdout
    again = run_cli("import-run", str(EVAL_LOG), db=db)
    assert again.returncode == 0 and "already imported" in again.stdout
    wrong = run_cli("import", str(EVAL_LOG), db=db)
    assert wrong.returncode == 2 and "evalsite import-run" in wrong.stderr
    usage = run_cli("import-run", "--help", db=db)
    assert usage.returncode == 0 and "usage: evalsite import-run" in usage.stdout and "--add-cases" in usage.stdout
