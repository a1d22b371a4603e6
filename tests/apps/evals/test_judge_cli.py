"""`evalsite eval --judge` and `evalsite rescore --judge` against the local stand-in endpoint."""

from __future__ import annotations

import json
import textwrap

import pytest
from django.core.management import call_command

from apps.evals.models import EvalResult, EvalRun
from apps.traces.models import Event
from tests.support.stand_in_llm import StandInLLM, completion_body

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = {
    axis: {"score": 4, "reason": "fine"} for axis in ("completeness", "grounding", "hazard_avoidance", "calibration")
}


def responder(body: dict) -> dict:
    """Grades by looking at the answer in the prompt; answers prose for the 'riddle' case."""
    prompt = json.dumps(body["messages"])
    if "riddle" in prompt:
        return completion_body("I think this answer is quite good overall, well done!", usage=(50, 12))
    accuracy = 1 if "ROME" in prompt else 5
    return completion_body(json.dumps({"accuracy": {"score": accuracy, "reason": "checked"}, **GOOD}), usage=(40, 20))


@pytest.fixture
def suite(tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "a.py").write_text(
        textwrap.dedent(
            """
            from evalcore.discovery import TargetSpec
            def answer(q):
                return q.upper()
            spec = TargetSpec(id="upper", target=answer, scorers=["exact_match"])
            """
        )
    )
    rows = [
        {"id": f"c{i}", "input": "paris", "expected": "PARIS", "split": "dev", "metadata": {"ok": True}}
        for i in range(8)
    ]
    rows.append({"id": "wrong", "input": "rome", "expected": "PARIS", "split": "dev", "metadata": {"ok": False}})
    rows.append({"id": "riddle", "input": "riddle", "expected": "PARIS", "split": "dev"})
    path = tmp_path / "capitals.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder, path


def test_judge_run_records_nine_verdicts_one_judge_error_and_agreement(suite, capsys, monkeypatch):
    folder, path = suite
    monkeypatch.setenv("STAND_IN_KEY", "sk-secret-never-stored")
    monkeypatch.setenv("EVALSITE_MODEL_API_KEY_ENV", "STAND_IN_KEY")
    with StandInLLM(responder=responder) as llm:
        call_command(
            "eval",
            str(folder),
            "--set",
            str(path),
            "--quiet",
            "--judge",
            "--judge-model",
            "stand-in-model",
            "--judge-base-url",
            llm.base_url,
            "--judge-retries",
            "1",
            "--judge-label",
            "ok",
            "--no-judge-cache",
        )
        requests = llm.chat_requests
    out = capsys.readouterr().out
    eval_run = EvalRun.objects.get()
    metric = eval_run.summary["metrics"]["rubric_judge.accuracy"]
    assert (metric["n"], metric["total"], metric["errors"]) == (9, 10, 1)
    assert "n=9/10" in out
    judge = eval_run.summary["judge"]
    assert judge["verdicts"] == 9 and judge["errors"] == 1
    assert judge["agreement"]["n"] == 9 and judge["agreement"]["accuracy"] == 1.0
    assert judge["calls"] == 11  # nine answers + the prose case asked twice (one retry)
    assert all(r.body["temperature"] == 0 and r.body["seed"] == 0 for r in requests)
    riddle = EvalResult.objects.get(eval_run=eval_run, case_id="riddle")
    verdict = next(s for s in riddle.scores if s["name"] == "rubric_judge")
    assert verdict["error"] and "quite good" in verdict["metadata"]["raw"]
    # exact_match already says fail, so the judge's error cannot change the outcome: failed, not errored
    assert (riddle.status, riddle.reason) == ("failed", "failed_scorer_errored")
    # the judge's calls are spans in the case's own trace
    assert Event.objects.filter(run=riddle.run, type="span_begin", name__startswith="judge:").count() == 2
    stored = json.dumps([eval_run.config, eval_run.scorer_specs])
    assert "sk-secret" not in stored and "stand-in-model" in stored


def test_rescore_with_judge_uses_stored_outputs_and_the_cache(suite, tmp_path, settings):
    folder, path = suite
    settings.DATA_DIR = tmp_path
    call_command("eval", str(folder), "--set", str(path), "--quiet")
    source = EvalRun.objects.get()
    with StandInLLM(responder=responder) as llm:
        args = ["--judge", "--judge-model", "stand-in-model", "--judge-base-url", llm.base_url, "--judge-retries", "0"]
        call_command("rescore", source.id, *args)
        first = len(llm.chat_requests)
        call_command("rescore", source.id, *args)
        assert len(llm.chat_requests) - first == 1  # only the unparseable case is asked again
    runs = EvalRun.objects.exclude(pk=source.pk).order_by("started")
    assert [r.source_eval_run_id for r in runs] == [source.id, source.id]
    assert runs[1].summary["judge"]["cache_hits"] == 9


def strict_responder(body: dict) -> dict:
    """Another endpoint serving a model of the same name, which fails every answer."""
    return completion_body(json.dumps({"accuracy": {"score": 1, "reason": "wrong"}, **GOOD}), usage=(40, 20))


def test_judge_cache_is_per_endpoint_not_per_model_name(suite, tmp_path, settings):
    """Same --judge-model, another --judge-base-url: the other endpoint is asked, not the cache."""
    folder, path = suite
    settings.DATA_DIR = tmp_path
    call_command("eval", str(folder), "--set", str(path), "--quiet")
    source = EvalRun.objects.get()
    with StandInLLM(responder=responder) as lenient, StandInLLM(responder=strict_responder) as strict:

        def rescore(base_url: str) -> EvalRun:
            call_command(
                "rescore", source.id, "--judge", "--judge-model", "stand-in-model", "--judge-base-url", base_url,
                "--judge-retries", "0",
            )  # fmt: skip
            return EvalRun.objects.exclude(pk=source.pk).order_by("-started").first()

        first = rescore(lenient.base_url)
        second = rescore(strict.base_url)
        assert len(strict.chat_requests) == 10
        assert second.summary["judge"]["cache_hits"] == 0
        assert first.summary["metrics"]["rubric_judge"]["mean"] > 0.5
        assert second.summary["metrics"]["rubric_judge"]["mean"] == 0.0
        # credentials in the URL never change the answer: the first endpoint's entries are reused
        asked = len(lenient.chat_requests)
        third = rescore(lenient.base_url.replace("://", "://bob:hunter2-pass@"))
        assert third.summary["judge"]["cache_hits"] == 9
        assert len(lenient.chat_requests) - asked == 1  # only the unparseable case again


def test_rescore_measures_the_judge_against_peoples_reviews(suite, tmp_path, settings, django_user_model):
    """--judge-label reviews: the source run's reviews (majority pass/fail) are the labels."""
    from django.core.management.base import CommandError

    from apps.evals.runs.reviews import save_review

    folder, path = suite
    settings.DATA_DIR = tmp_path
    call_command("eval", str(folder), "--set", str(path), "--quiet")
    source = EvalRun.objects.get()
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    results = {r.case_id: r for r in EvalResult.objects.filter(eval_run=source)}
    save_review(results["c0"], alice, verdict="pass")
    save_review(results["c1"], alice, verdict="fail")  # the judge passes c1: a disagreement
    save_review(results["wrong"], alice, verdict="fail")
    save_review(results["wrong"], bob, verdict="fail")
    save_review(results["c2"], alice, verdict="unsure")  # no label
    with StandInLLM(responder=responder) as llm:
        args = ["--judge", "--judge-model", "stand-in-model", "--judge-base-url", llm.base_url, "--judge-retries", "0"]
        call_command("rescore", source.id, *args, "--judge-label", "reviews", "--no-judge-cache")
        with pytest.raises(CommandError, match="evalsite rescore RUN_ID --judge --judge-label reviews"):
            call_command("eval", str(folder), "--set", str(path), "--quiet", *args, "--judge-label", "reviews")
    rescored = EvalRun.objects.exclude(pk=source.pk).get()
    figures = rescored.summary["judge"]["agreement"]
    assert (figures["label"], figures["n"]) == ("reviews", 3)
    assert figures["accuracy"] == pytest.approx(2 / 3)


def test_a_judged_run_resumes_only_with_its_own_judge_and_its_resume_line_names_it(suite, tmp_path):
    """A resume accepted another judge model, mixing two judges' scores under the run's one judge
    record; and the printed resume command lacked the --judge options the resume then demanded."""
    from django.core.management.base import CommandError

    from apps.evals.cli.console import resume_command

    folder, path = suite
    with StandInLLM(responder=responder) as llm:
        judge = ["--judge", "--judge-model", "stand-in-model", "--judge-base-url", llm.base_url, "--no-judge-cache"]
        call_command("eval", str(folder), "--set", str(path), "--quiet", *judge)
        eval_run = EvalRun.objects.get()
        EvalResult.objects.filter(eval_run=eval_run, case_id__in=["c0", "c1"]).delete()
        EvalRun.objects.filter(pk=eval_run.pk).update(status="interrupted")
        other = ["--judge", "--judge-model", "other-model", "--judge-base-url", llm.base_url, "--no-judge-cache"]
        with pytest.raises(CommandError) as caught:
            call_command("eval", str(folder), "--resume", eval_run.id, "--quiet", *other)
        said = str(caught.value)
        assert "graded by another judge (model differ)" in said
        assert f"--judge --judge-model stand-in-model --judge-base-url {llm.base_url}" in said
        line = resume_command(str(folder), eval_run.id, EvalRun.objects.get().config["judge"])
        assert line.endswith(
            f"--resume {eval_run.id} --judge --judge-model stand-in-model --judge-base-url {llm.base_url}"
        )
        call_command("eval", str(folder), "--resume", eval_run.id, "--quiet", *judge)  # the same judge: resumed
    eval_run.refresh_from_db()
    assert eval_run.status == "finished" and EvalResult.objects.filter(eval_run=eval_run).count() == 10
    assert eval_run.config["judge"]["model"] == "stand-in-model"


def test_a_run_graded_without_the_judge_is_not_resumed_with_one(suite):
    from django.core.management.base import CommandError

    folder, path = suite
    call_command("eval", str(folder), "--set", str(path), "--quiet")
    eval_run = EvalRun.objects.get()
    EvalResult.objects.filter(eval_run=eval_run, case_id="c0").delete()
    EvalRun.objects.filter(pk=eval_run.pk).update(status="interrupted")
    with pytest.raises(CommandError, match="graded without the LLM judge; drop --judge"):
        call_command("eval", str(folder), "--resume", eval_run.id, "--quiet", "--judge", "--judge-model", "m")
