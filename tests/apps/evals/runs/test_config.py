"""A run's parameters (``apps.evals.runs.config``): defaults once, validated once, stored with a
version, read back typed from rows old and new."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from apps.evals.runs.config import (
    SCHEMA_VERSION,
    AutoResume,
    JudgeConfig,
    RunConfig,
    RunConfigError,
    read_run_config,
)
from evalcore.scoring import DEFAULT_SCORER_TIMEOUT_S


def test_every_parameter_has_its_default():
    config = RunConfig()
    assert (config.concurrency, config.timeout_s, config.repeat) == (8, 60.0, 1)
    assert config.scorer_timeout_s == DEFAULT_SCORER_TIMEOUT_S
    assert config.case_ids is None and config.judge is None and config.early_stop is None


def test_the_stored_form_carries_its_version_and_reads_back_equal():
    config = RunConfig(
        concurrency=3,
        timeout_s=None,
        case_ids=["a"],
        executor="queue",
        judge=JudgeConfig(model="m", samples=3),
        auto_resume=AutoResume(count=1, results=2, suspects=[("r:a", 1)]),
    )
    stored = config.stored()
    assert stored["schema_version"] == SCHEMA_VERSION
    assert stored["timeout_s"] is None  # no limit: kept, not confused with "not set"
    assert stored["auto_resume"]["suspects"] == [["r:a", 1]]  # JSON
    assert read_run_config(stored) == config


def test_a_field_that_is_none_by_default_is_stored_only_when_set():
    # the set review queue finds the runs of chosen cases with config__has_key="case_ids"
    stored = RunConfig().stored()
    assert "case_ids" not in stored and "judge" not in stored and "early_stop" not in stored
    assert "case_ids" in RunConfig(case_ids=["c1"]).stored()


def test_an_old_row_reads_with_the_defaults_it_lacks():
    config = read_run_config({"repeat": "2", "agents_dir": "/x", "judge": {"model": "m"}})
    assert (config.repeat, config.concurrency, config.agents_dir) == (2, 8, "/x")
    assert config.judge == JudgeConfig(model="m") and config.schema_version == SCHEMA_VERSION
    assert read_run_config(None) == RunConfig() == read_run_config({})


def test_keys_it_does_not_declare_are_kept():
    # an imported Inspect log's provenance rides on the run's config
    config = read_run_config({"source": "inspect_log", "epochs": 2, "repeat": 2})
    assert config.stored()["source"] == "inspect_log" and config.repeat == 2


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"timeout_s": math.nan}, "timeout_s", "timeout_s must be a finite number > 0"),
        ({"scorer_timeout_s": math.inf}, "scorer_timeout_s", "scorer_timeout_s must be a finite number > 0"),
        ({"timeout_s": True}, "timeout_s", "timeout_s must be a finite number > 0"),
        ({"timeout_s": 0}, "timeout_s", "timeout_s must be a finite number > 0"),
        ({"concurrency": 0}, "concurrency", "concurrency must be >= 1, got 0"),
        ({"repeat": -1}, "repeat", "repeat must be >= 1, got -1"),
        ({"shard_size": 0}, "shard_size", "shard_size must be >= 1, got 0"),
        ({"early_stop": -1}, "early_stop", "early_stop must be >= 0, got -1"),
        ({"judge": {"model": "m", "samples": 0}}, "judge.samples", "samples must be >= 1, got 0"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_its_field(values, field, message):
    with pytest.raises(RunConfigError, match=message) as refused:
        RunConfig.parse(values)
    assert refused.value.field == field
    assert isinstance(refused.value, ValueError)  # what callers of the old checks caught


def test_a_change_is_validated_too():
    config = RunConfig(concurrency=2)
    assert config.updated(concurrency=5).concurrency == 5 and config.concurrency == 2
    with pytest.raises(RunConfigError, match="concurrency must be >= 1"):
        config.updated(concurrency=0)


def test_it_imports_without_django():
    # the pytest plugin reads a run's defaults before Django is set up
    code = "import sys, apps.evals.runs.config; assert 'django' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
