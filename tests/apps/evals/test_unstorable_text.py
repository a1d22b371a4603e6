"""Text Python holds and UTF-8 cannot encode (a lone UTF-16 surrogate, ``"\\ud83d"``: half an
emoji) in what a target produces is stored with U+FFFD in its place and costs no other case: the
result writer died with ``UnicodeEncodeError``, the run ended ``failed`` at half its cases (exit 3)
and ``--resume`` failed the same way (apps.core.storable)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.core.storable import REPLACEMENT as R
from apps.evals.models import EvalResult, EvalRun
from apps.traces.models import Event

SURROGATE = "\ud83d"

AGENT = '''
import os
from evalcore.discovery import target
from evalcore.types import TargetOutput

H = "\\ud83d"  # the first half of U+1F600, alone


@target(id="halves", scorers=["exact_match"])
def halves(x, ctx):
    """Cases named half-* answer with a lone surrogate everywhere a target can put text; the case
    named stop presses Ctrl-C on the first pass (STOP_ONCE set)."""
    if x == "stop" and os.environ.get("STOP_ONCE"):
        import signal, time
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    if x.startswith("half"):
        if x == "half-error":
            raise ValueError(f"bad {H} value")
        with ctx.tracer.span("execute_tool", f"tool{H}", arguments={f"k{H}": [f"v{H}"]}) as span:
            span.set(result=f"r{H}")
        return TargetOutput(
            output=f"{x} {H} cut", model=f"m{H}", metadata={"finish_reason": f"st{H}op", f"note{H}": "\\udc80"}
        )
    return ctx.case.expected
'''


def write_agents(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "halves.py").write_text(AGENT)
    inputs = ["a", "half-1", "b", "stop", "half-2", "half-error", "c"]
    rows = [{"id": f"c{i}-{x}", "input": x, "expected": x, "split": "dev"} for i, x in enumerate(inputs)]
    cases = tmp_path / "halves.jsonl"
    cases.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder, cases


def stored(eval_run: EvalRun) -> dict[str, tuple[str, object]]:
    return {r.case_id: (r.status, r.run.final_answer) for r in EvalResult.objects.filter(eval_run=eval_run)}


@pytest.mark.django_db(transaction=True)
def test_a_run_with_lone_surrogates_stores_every_case_and_the_marker_also_on_resume(tmp_path, client, member):
    folder, cases = write_agents(tmp_path)
    os.environ["STOP_ONCE"] = "1"
    # Python's own Ctrl-C handler, even when this process started with SIGINT ignored (nohup, CI)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # the stop case ends the first pass (Ctrl-C: exit 130, the run interrupted); the
        # surrogate case before it is stored, the ones after it run only on resume
        with pytest.raises(SystemExit) as ended:
            call_command("eval", str(folder), "--set", str(cases), "--quiet", "--concurrency", "1")
        assert ended.value.code == 130
    finally:
        signal.signal(signal.SIGINT, previous)
        del os.environ["STOP_ONCE"]
    eval_run = EvalRun.objects.get()
    first = stored(eval_run)
    assert first["c1-half-1"] == ("failed", f"half-1 {R} cut")
    assert {"c0-a", "c1-half-1", "c2-b"} <= set(first) and "c4-half-2" not in first

    call_command("eval", str(folder), "--resume", eval_run.id, "--quiet")
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.n_done, eval_run.n_passed, eval_run.n_errored) == ("finished", 7, 4, 1)
    results = stored(eval_run)
    assert results["c4-half-2"] == ("failed", f"half-2 {R} cut")
    assert results["c3-stop"][0] == results["c6-c"][0] == "passed"
    errored = EvalResult.objects.get(eval_run=eval_run, case_id="c5-half-error")
    assert errored.status == "errored" and errored.run.error["message"] == f"bad {R} value"
    half = EvalResult.objects.get(eval_run=eval_run, case_id="c4-half-2")
    assert (half.run.model, half.run.finish_reason) == (f"m{R}", f"st{R}op")
    assert half.run.metadata[f"note{R}"] == R
    tool = Event.objects.get(run=half.run, type="span_begin", name=f"tool{R}")
    assert tool.payload["arguments"] == {f"k{R}": [f"v{R}"]}
    assert half.scores[0]["explanation"] == "output 'half-2 \\ud83d cut' != expected 'half-2'"  # repr's escape

    # the case page shows the marker where the surrogate was
    client.force_login(member)
    page = client.get(reverse("evals:result", args=[eval_run.id, half.pk]))
    assert page.status_code == 200
    assert f"half-2 {R} cut" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_report_files_of_such_a_run_are_well_formed(tmp_path):
    folder, cases = write_agents(tmp_path)
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    call_command("eval", str(folder), "--set", str(cases), "--quiet", "--json", str(report), "--junit", str(junit))
    document = json.loads(report.read_text(encoding="utf-8"))
    outputs = {case["case_id"]: case["output"] for case in document["cases"]}
    assert outputs["c1-half-1"] == f"half-1 {R} cut" and outputs["c0-a"] == "a"
    assert junit.read_bytes().decode("utf-8").count("<testcase") == 7


def test_a_case_bank_holding_one_is_refused_by_the_cli_naming_line_and_field(tmp_path):
    import subprocess
    import sys

    from tests.support.databases import subprocess_db_env

    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"id": "a", "input": "x"}\n{"id": "b", "input": {"q": "half \\ud83d"}}\n')
    done = subprocess.run(
        [str(Path(sys.executable).with_name("evalsite")), "import", str(bank)],
        capture_output=True,
        text=True,
        env={**os.environ, **subprocess_db_env(tmp_path / "db.sqlite3")},
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "bank.jsonl:2: field 'input': holds a lone UTF-16 surrogate (U+D83D) at input.q" in done.stderr


# -- where such text comes in from outside a run -----------------------------------------------------


@pytest.mark.django_db
def test_the_api_refuses_a_lone_surrogate_naming_the_field(client, member):
    """A JSON body's ``"\\ud83d"`` escape alone (a review comment, an axis name) was a 500 on every
    database; it is a 422 naming the field, as a NUL character is."""
    from apps.evals.models import Review
    from tests.apps.factories import make_eval_run, make_eval_set

    run = make_eval_run(make_eval_set(n_cases=2), [True, False])
    client.force_login(member)
    url = f"/api/eval/runs/{run.pk}/cases/c0/reviews"
    for body, field in (
        ('{"verdict": "pass", "comment": "fine \\ud83d"}', "comment"),
        ('{"verdict": "pass", "axis_scores": {"accu\\udc00racy": 3}}', "axis_scores.accu\udc00racy"),
    ):
        answer = client.post(url, body, content_type="application/json")
        assert answer.status_code == 422, answer.content
        assert answer.json()["field"] == field and "lone UTF-16 surrogate" in answer.json()["message"]
    assert not Review.objects.exists()


@pytest.mark.django_db
def test_the_case_form_refuses_a_lone_surrogate_in_json_fields(client, staff):
    from apps.evals.models import EvalCase
    from tests.apps.factories import make_eval_set

    client.force_login(staff)
    eval_set = make_eval_set("halfform", 1)
    case = EvalCase.objects.get(eval_set=eval_set)
    form = {
        "eval_set": eval_set.pk,
        "case_id": case.case_id,
        "input": '{"q": "half \\ud83d"}',
        "expected": json.dumps(case.expected),
        "has_expected": "on",
        "split": case.split,
        "tags": "[]",
        "metadata": "{}",
        "position": case.position,
    }
    answer = client.post(reverse("admin:evals_evalcase_change", args=[case.pk]), form)
    assert answer.status_code == 200  # the form again, with the error (it was a 500)
    assert "A lone UTF-16 surrogate (U+D83D) at input.q" in answer.content.decode()
    case.refresh_from_db()
    assert case.input != {"q": f"half {SURROGATE}"}


@pytest.mark.django_db(transaction=True)
def test_an_inspect_log_holding_one_stores_its_outputs_with_the_marker_and_refuses_it_as_a_new_case(tmp_path):
    from django.core.management.base import CommandError

    from apps.evals.models import EvalCase

    logs = Path(__file__).resolve().parents[2] / "fixtures" / "inspect_logs"
    call_command("import", str(logs / "biology_qa.jsonl"), "--map", "input=question,expected=answer")
    data = json.loads((logs / "biology_qa.json").read_text())
    data["samples"][0]["output"]["completion"] = f"Lep{SURROGATE}rosy"
    data["samples"][0]["output"]["choices"][0]["message"]["content"] = f"Lep{SURROGATE}rosy"
    log = tmp_path / "biology_qa.json"
    log.write_text(json.dumps(data))  # json.dumps writes the lone half as its \ud83d escape
    call_command("import_run", str(log))
    first = EvalResult.objects.get(case_id=data["samples"][0]["id"], repeat_index=0)
    assert R in json.dumps(first.run.final_answer, ensure_ascii=False)

    data["samples"][1]["id"] = "new-one"
    data["samples"][1]["input"] = f"a new question {SURROGATE}"
    log.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=r"sample 'new-one': its input holds a lone UTF-16 surrogate \(U\+D83D\)"):
        call_command("import_run", str(log), "--add-cases", "--variant", "again")
    assert not EvalCase.objects.filter(case_id="new-one").exists()


def test_a_target_printing_one_does_not_error_its_case(tmp_path):
    """``print`` of a lone surrogate raised ``UnicodeEncodeError`` in the target (every case
    errored); the CLI's standard output writes it as its escape (or the run captures it)."""
    import subprocess
    import sys

    from tests.support.databases import subprocess_db_env

    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "printer.py").write_text(
        "from evalcore.discovery import target\n"
        "@target(id='printer', scorers=['exact_match'])\n"
        "def printer(x):\n"
        "    print('half \\ud83d said')\n"
        "    return x\n"
    )
    cases = tmp_path / "c.jsonl"
    cases.write_text('{"id": "a", "input": "x", "expected": "x", "split": "dev"}\n')
    report = tmp_path / "r.json"
    evalsite = str(Path(sys.executable).with_name("evalsite"))
    done = subprocess.run(
        [evalsite, "eval", str(folder), "--set", str(cases), "--json", str(report)],
        capture_output=True,
        env={**os.environ, **subprocess_db_env(tmp_path / "db.sqlite3")},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (case,) = json.loads(report.read_text())["cases"]
    assert case["status"] == "passed" and case["error"] is None


@pytest.mark.django_db(transaction=True)
def test_a_judge_answer_holding_one_is_stored_with_the_marker(tmp_path):
    """The judge's JSON answer escapes half an emoji in a reason (``"\\ud83d"``): the verdict is
    kept, its reason stored with U+FFFD, and every case stored."""
    from tests.support.stand_in_llm import StandInLLM, completion_body

    axes = ("accuracy", "completeness", "grounding", "hazard_avoidance", "calibration")

    def responder(body: dict) -> dict:
        answer = {axis: {"score": 4, "reason": f"fine {SURROGATE}"} for axis in axes}
        return completion_body(json.dumps(answer))  # json.dumps writes the half as its escape

    folder, cases = write_agents(tmp_path)
    with StandInLLM(responder=responder) as llm:
        call_command(
            "eval",
            str(folder),
            "--set",
            str(cases),
            "--quiet",
            "--judge",
            "--judge-model",
            "stand-in-model",
            "--judge-base-url",
            llm.base_url,
            "--judge-retries",
            "0",
        )
    eval_run = EvalRun.objects.get()
    assert eval_run.status == "finished" and eval_run.n_done == 7
    judged = EvalResult.objects.get(eval_run=eval_run, case_id="c0-a")
    verdict = next(s for s in judged.scores if s["name"] == "rubric_judge.accuracy")
    assert verdict["value"] == 0.8 and f"fine {R}" in json.dumps(judged.scores, ensure_ascii=False)
