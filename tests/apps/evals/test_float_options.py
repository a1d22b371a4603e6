"""Float options never reach the database as NaN / infinity.

``--timeout nan`` used to pass ``float()``, reach the run's JSON config and fail on SQLite's
``JSON_VALID`` CHECK (exit 3, a storage failure) instead of a usage error (exit 2).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import transaction

from apps.evals.cli.console import UsageError
from apps.evals.models import EvalRun, EvalSet
from apps.evals.runs.config import RunConfig
from apps.evals.runs.prepare import prepare_eval_run
from evalcore.discovery import TargetSpec
from evalcore.runner import rescore, run_eval
from evalcore.types import Case
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
EVALSITE = Path(sys.executable).with_name("evalsite")
AGENTS = ROOT / "tests" / "fixtures" / "repros" / "agents"


def run_cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    return subprocess.run([str(EVALSITE), *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=180)


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [
        ("eval", "--timeout", "nan"),
        ("eval", "--timeout", "inf"),
        ("eval", "--scorer-timeout", "nan"),
        ("eval", "--scorer-timeout", "-inf"),
        ("rescore", "--scorer-timeout", "NaN"),
        ("serve", "--worker-grace", "nan"),
    ],
)
def test_non_finite_float_options_are_usage_errors(tmp_path: Path, command: str, option: str, value: str) -> None:
    db = tmp_path / "db.sqlite3"
    target = {"eval": [str(AGENTS), "--set", str(tmp_path / "missing.jsonl")], "rescore": ["some-run-id"]}.get(
        command, []
    )
    done = run_cli(command, *target, f"{option}={value}", db=db)  # "=": argparse reads "-inf" as an option
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"argument {option}: must be a finite number, got {value!r}" in done.stderr
    assert "CHECK constraint" not in done.stderr


def test_a_negative_worker_grace_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("serve", "--worker-grace=-1", "--port", "1", db=tmp_path / "db.sqlite3")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--worker-grace must be >= 0 seconds, not -1" in done.stderr


@pytest.mark.django_db
@pytest.mark.parametrize("value", [math.nan, math.inf, 0.0, -1.0])
def test_options_given_through_call_command_are_checked_too(value: float) -> None:
    # call_command(**kwargs) skips argparse, so the post-parse check must hold on its own
    with pytest.raises(UsageError, match="--timeout must be > 0 seconds"):
        call_command("eval", str(AGENTS), "--set", "x.jsonl", timeout=value)
    with pytest.raises(UsageError, match="--scorer-timeout must be > 0 seconds"):
        call_command("rescore", "some-run-id", scorer_timeout=value)
    assert not EvalRun.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_the_run_config_writer_refuses_non_finite_numbers(value: float) -> None:
    eval_set = EvalSet.objects.create(name="s")
    spec = TargetSpec(id="t", target=lambda q: q, scorers=["exact_match"])
    with pytest.raises(ValueError, match="timeout_s must be a finite number > 0"):
        prepare_eval_run(
            eval_set=eval_set, spec=spec, variant=None, split="dev", allow_test=False, config=RunConfig(timeout_s=value)
        )
    with pytest.raises(ValueError, match="scorer_timeout_s must be a finite number > 0"):
        prepare_eval_run(
            eval_set=eval_set,
            spec=spec,
            variant=None,
            split="dev",
            allow_test=False,
            config=RunConfig(scorer_timeout_s=value),
        )
    # and the JSON field itself never writes NaN / Infinity, whatever path a value takes
    with (
        pytest.raises(ValueError, match=r"EvalRun.config\['limits'\]\[1\]: .* is not valid JSON"),
        transaction.atomic(),
    ):
        EvalRun.objects.create(eval_set=eval_set, target_id="t", config={"limits": [1.0, value]})
    assert not EvalRun.objects.exists()


@pytest.mark.parametrize("field", ["timeout_s", "scorer_timeout_s"])
@pytest.mark.parametrize("value", [math.nan, math.inf, 0, -2.0, True])
async def test_the_engine_refuses_non_finite_timeouts(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"{field} must be a finite number > 0"):
        await run_eval([Case("a", "x", "x")], lambda q: q, ["exact_match"], **{field: value})
    if field == "scorer_timeout_s":
        with pytest.raises(ValueError, match="scorer_timeout_s must be a finite number > 0"):
            await rescore([], ["exact_match"], scorer_timeout_s=value)
