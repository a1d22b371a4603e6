"""Aligning the judge to people (issue 28): labels split by the set's splits, notes and examples
from train, chosen on dev, kappa before/after on the locked test labels beside people's alpha;
the aligned spec re-judges an old run (``rejudge --judge NAME@vN``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.management import call_command

from apps.evals.cli.console import UsageError
from apps.evals.models import EvalResult, EvalRun, JudgeSpecVersion
from apps.evals.runs.reviews import save_review
from evalcore.judge.align import HumanLabel, candidates, kappa
from tests.apps.factories import make_eval_run, make_eval_set
from tests.support.stand_in_llm import Scripted, StandInLLM, completion_body

pytestmark = pytest.mark.django_db(transaction=True)

OTHER = {
    axis: {"score": 4, "reason": "fine"} for axis in ("completeness", "grounding", "hazard_avoidance", "calibration")
}
N = 18  # six cases per split (the factory cycles train, dev, test)
COMMENT = "a hedged answer is a fail, however right the number"


def hedged(i: int) -> bool:
    return (i // 3) % 2 == 0  # three hedged and three plain answers on each split


class RubricReader(StandInLLM):
    """A judge that passes everything unless its rubric speaks of hedging, then fails answers
    saying 'maybe' (the prompt holds 'maybe' only through the answer, or through examples)."""

    def _next_answer(self, body: Any) -> Scripted:
        prompt = json.dumps(body["messages"])
        accuracy = 1 if "hedged" in prompt and "maybe" in prompt else 5
        content = json.dumps({"accuracy": {"score": accuracy, "reason": "read"}, **OTHER})
        return Scripted(200, json.dumps(completion_body(content, usage=(40, 20))).encode())


@pytest.fixture
def reviewed(django_user_model: Any) -> Iterator[tuple[EvalRun, RubricReader]]:
    eval_set = make_eval_set("qa", n_cases=N)
    outputs = [f"maybe {2 * i}" if hedged(i) else str(2 * i) for i in range(N)]
    run = make_eval_run(eval_set, [True] * N, outputs=outputs)
    people: list[AbstractBaseUser] = [django_user_model.objects.create_user(f"p{i}") for i in (1, 2)]
    for result in EvalResult.objects.filter(eval_run=run):
        i = int(result.case_id[1:])
        for n, person in enumerate(people):
            verdict = "fail" if hedged(i) else "pass"
            if n == 1 and i == 17:  # the second person differs once, on a test case
                verdict = "fail"
            save_review(result, person, verdict=verdict, comment=COMMENT if hedged(i) and n == 0 else "")
    llm = RubricReader()
    llm.start()
    yield run, llm
    llm.stop()


def test_alignment_reports_kappa_before_after_on_locked_test_labels(
    reviewed: tuple[EvalRun, RubricReader], capsys: pytest.CaptureFixture[str]
) -> None:
    run, llm = reviewed
    judge = ["--judge-model", "stand-in-model", "--judge-base-url", llm.base_url, "--no-judge-cache"]
    with pytest.raises(UsageError, match="test split"):
        call_command("align_judge", "qa", "--name", "qa-judge", *judge)
    assert not JudgeSpecVersion.objects.exists()  # the lockbox stayed shut: nothing judged, nothing stored
    call_command("align_judge", "qa", "--name", "qa-judge", "--allow-test", *judge)
    out = capsys.readouterr().out
    stored = JudgeSpecVersion.objects.get()
    report = stored.report
    assert (stored.label, report["chosen"]) == ("qa-judge@v1", "notes")
    assert report["counts"] == {"train": 6, "dev": 6, "test": 5}  # c17's two people tie: no label
    assert report["before"]["kappa"] == 0.0 and report["after"]["kappa"] == 1.0
    assert report["after"]["low"] is not None and report["after"]["scored"] == 5
    assert report["alpha"] is not None and report["alpha"] < 1 and report["alpha_n"] == 6
    assert report["test_read"] and report["test_reads"] == 1
    assert "hedged" in stored.spec["args"]["rubric"]
    assert "test before: κ 0.00" in out and "test after:  κ 1.00" in out and "Krippendorff" in out
    # the aligned spec re-judges the old run into a new one; both kept
    before = set(EvalRun.objects.values_list("pk", flat=True))
    call_command("rejudge", run.pk, "--judge", "qa-judge@v1", "--judge-base-url", llm.base_url, "--no-judge-cache")
    new = EvalRun.objects.exclude(pk__in=before).get()
    judged = {
        r.case_id: next(s["passed"] for s in r.scores if s["name"] == "rubric_judge")
        for r in EvalResult.objects.filter(eval_run=new)
    }
    assert judged == {f"c{i}": not hedged(i) for i in range(N)}


def test_candidates_and_kappa_on_plain_values() -> None:
    labels = [
        HumanLabel(str(i), f"c{i}", "train", "q", None, "maybe" if i % 2 else "x", passed=not i % 2, comment="hedge")
        for i in range(4)
    ]
    found = candidates(None, labels, [True] * 4)
    assert [c.name for c in found] == ["base", "notes", "examples", "notes+examples"]
    assert kappa(labels, [None] * 4).kappa is None
    figures = kappa(labels, [not i % 2 for i in range(4)])
    assert (figures.kappa, figures.scored, figures.accuracy) == (1.0, 4, 1.0)
