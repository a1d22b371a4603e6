"""The resume rules (``apps.evals.runs.resume``), shared by ``evalsite eval --resume`` and the worker."""

from __future__ import annotations

import os

import pytest

from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.runs.config import RunConfig, read_run_config
from apps.evals.runs.liveness import RunBusy
from apps.evals.runs.resume import ResumeRefused, check_resumable, claim_resume
from evalcore.discovery import TargetSpec
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def interrupted() -> EvalRun:
    eval_set = make_eval_set("resumable", 4)
    eval_run = make_eval_run(eval_set, [True, False], status=EvalRunStatus.INTERRUPTED)
    EvalRun.objects.filter(pk=eval_run.pk).update(
        set_hash=eval_set.content_hash, scorer_specs=[{"name": "exact_match", "args": {}}], config={"repeat": 1}
    )
    eval_run.refresh_from_db()
    return eval_run


def test_an_interrupted_run_resumes(interrupted):
    check_resumable(interrupted, judge_available=False)


@pytest.mark.parametrize("status", [EvalRunStatus.FINISHED, EvalRunStatus.QUEUED, EvalRunStatus.RUNNING])
def test_only_interrupted_or_failed_runs_resume(interrupted, status):
    EvalRun.objects.filter(pk=interrupted.pk).update(status=status)
    interrupted.refresh_from_db()
    with pytest.raises(RunBusy):
        check_resumable(interrupted, judge_available=False)


def test_a_changed_set_a_rescored_run_and_a_missing_judge_are_refused(interrupted):
    interrupted.eval_set.content_hash = "changed"
    interrupted.eval_set.save()
    with pytest.raises(ResumeRefused, match="changed since the run started"):
        check_resumable(interrupted, judge_available=False)
    interrupted.eval_set.content_hash = interrupted.set_hash
    interrupted.eval_set.save()
    interrupted.config = {"judge": {"model": "m"}}
    with pytest.raises(ResumeRefused, match="LLM judge"):
        check_resumable(interrupted, judge_available=False)
    check_resumable(interrupted, judge_available=True)
    interrupted.config = {}
    interrupted.source_eval_run = make_eval_run(interrupted.eval_set, [True])
    with pytest.raises(ResumeRefused, match="re-scored run cannot be resumed"):
        check_resumable(interrupted, judge_available=False)


def test_claiming_takes_the_run_merges_the_config_and_counts_what_is_done(interrupted):
    spec = TargetSpec(id="echo", target=lambda x: x)
    plan = claim_resume(interrupted, spec, judge_scorers=[], config={"scorer_timeout_s": 5.0})
    assert plan.done == 2 and plan.spec is spec
    assert [s.name for s in plan.scorers] == ["exact_match"]
    row = EvalRun.objects.get(pk=interrupted.pk)
    assert row.status == EvalRunStatus.RUNNING and row.executor_pid == os.getpid()
    assert read_run_config(row.config) == RunConfig(repeat=1, scorer_timeout_s=5.0)
    with pytest.raises(RunBusy, match="already being resumed"):  # a second resume is refused
        claim_resume(row, spec, judge_scorers=[], config={})
