"""What the command line asks of a run (``apps.evals.runs.options``): the defaults chosen, the
options a resume keeps or changes, the judge a resume repeats, the held-out notice."""

from __future__ import annotations

import math
import os

import pytest

from apps.evals.models import EvalRun
from apps.evals.runs.config import JudgeConfig, RunConfig, read_run_config
from apps.evals.runs.options import (
    RunOptionError,
    RunOptions,
    check_resume_keeps,
    held_out_notice,
    judge_flags,
    new_run_config,
    new_run_split,
    refuse_another_judge,
    resume_changes,
)
from evalcore.splits import HeldOutError
from tests.apps.factories import make_eval_run, make_eval_set


def test_a_new_run_takes_the_defaults_of_what_is_not_given():
    config = new_run_config(RunOptions(concurrency=3))
    assert (config.concurrency, config.timeout_s, config.repeat) == (3, RunConfig().timeout_s, 1)
    assert (config.executor, config.pid) == ("cli", os.getpid())


def test_a_queue_run_records_its_executor_and_shard_size_and_a_process_run_no_shard_size():
    queued = new_run_config(RunOptions(executor="queue", shard_size=5))
    assert (queued.executor, queued.shard_size) == ("queue", 5)
    assert new_run_config(RunOptions(executor="process", shard_size=5)).shard_size is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (RunOptions(timeout_s=math.nan), "--timeout must be > 0 seconds (a finite number), got nan"),
        (RunOptions(scorer_timeout_s=-1.0), "--scorer-timeout must be > 0 seconds (a finite number), got -1.0"),
        (RunOptions(concurrency=0), "--concurrency must be >= 1, got 0"),
        (RunOptions(repeat=0), "--repeat must be >= 1, got 0"),
        (RunOptions(executor="queue", shard_size=0), "--shard-size must be >= 1, got 0"),
        (RunOptions(executor="queue", judge=True), "--judge runs in this process only; drop --executor queue"),
    ],
)
def test_an_option_out_of_range_is_refused_by_its_flag(options, message):
    with pytest.raises(RunOptionError) as refused:
        new_run_config(options)
    assert str(refused.value) == message


def test_the_split_defaults_to_dev_and_the_test_split_needs_the_opt_in():
    assert new_run_split(None, False) == "dev"
    assert new_run_split("all", True) == "all"
    with pytest.raises(HeldOutError):
        new_run_split("test", False)


def test_the_judge_flags_name_model_endpoint_and_samples():
    assert judge_flags(JudgeConfig(model="m")) == ["--judge", "--judge-model", "m"]
    judge = JudgeConfig(model="m", base_url="http://h/v1", samples=3)
    flags = ["--judge", "--judge-model", "m", "--judge-base-url", "http://h/v1", "--judge-samples", "3"]
    assert judge_flags(judge) == flags


def _run(**config: object) -> EvalRun:
    return EvalRun(id="r1", target_id="t", split="dev", config=RunConfig.parse(config).stored())


def test_a_resume_refuses_another_judge_or_one_the_run_had_not():
    judged = _run(judge={"model": "m", "samples": 1})
    refuse_another_judge(judged, JudgeConfig(model="m"))  # the same judge
    with pytest.raises(RunOptionError, match=r"another judge \(model differ\).*--judge-model m"):
        refuse_another_judge(judged, JudgeConfig(model="other"))
    with pytest.raises(RunOptionError, match="graded without the LLM judge; drop --judge"):
        refuse_another_judge(_run(), JudgeConfig(model="m"))
    refuse_another_judge(_run(), None)


def test_a_resume_keeps_the_runs_own_options():
    eval_run = _run(repeat=2)
    check_resume_keeps(eval_run, {"repeat": 2, "split": "dev", "scorer": []}, target="t")  # its own values
    with pytest.raises(RunOptionError, match=r"drop --repeat$"):
        check_resume_keeps(eval_run, {"repeat": 3}, target=None)
    with pytest.raises(RunOptionError, match=r"drop --set$"):
        check_resume_keeps(eval_run, {"eval_set": "other.jsonl"}, target=None)
    with pytest.raises(RunOptionError, match="the run's target is 't'"):
        check_resume_keeps(eval_run, {}, target="u")


def test_a_resume_changes_only_the_concurrency_the_scorer_timeout_and_the_executor():
    eval_run = _run(concurrency=2, timeout_s=5.0)
    changes = resume_changes(eval_run, RunOptions(concurrency=4, scorer_timeout_s=9.0, timeout_s=1.0))
    changed = read_run_config(eval_run.config).updated(**changes)
    assert (changed.concurrency, changed.scorer_timeout_s, changed.timeout_s) == (4, 9.0, 5.0)
    assert (changed.executor, changed.pid) == ("cli", os.getpid())
    with pytest.raises(RunOptionError, match="--concurrency must be >= 1"):
        resume_changes(eval_run, RunOptions(concurrency=0))


@pytest.mark.django_db
def test_the_held_out_notice_says_whether_the_lockbox_was_opened_before():
    eval_set = make_eval_set("qa", 3)
    assert held_out_notice(eval_set, "dev", target_id="echo", variant="v1") is None
    first = "held-out test split of 'qa' for echo / v1: first run"
    assert held_out_notice(eval_set, "test", target_id="echo", variant="v1") == first
    make_eval_run(eval_set, [True], split="test")
    again = held_out_notice(eval_set, "all", target_id="echo", variant="v1")
    assert again == "held-out test split of 'qa' for echo / v1: run 1 time(s) before this one (the lockbox is open)"
