"""``evalsite import-run`` on bad logs (inputs in ``tests/fixtures/repros/ot-*inspect*``): NaN and
infinities (pydantic writes them as bare literals) never make a traceback: a NaN score is no score,
other non-finite numbers are kept as text; epoch 0 or less is a file:field error; a log nested
too deeply is an error naming the file; several logs are all read before any is imported, so a
bad one in the middle stops nothing after it, each failure is reported, and the exit code says
one failed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalCase, EvalResult, EvalRun
from evalcore.loaders import CaseBankError
from evalcore.loaders.inspect_log import read_inspect_log
from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[3]
REPROS = ROOT / "tests" / "fixtures" / "repros"
NAN_LOG = REPROS / "ot-01-inspect-nan-score.json"
EPOCH_LOG = REPROS / "ot-06-inspect-negative-epoch.json"
EVAL_LOG = ROOT / "tests" / "fixtures" / "inspect_logs" / "biology_qa.eval"
EVALSITE = Path(sys.executable).with_name("evalsite")


@pytest.mark.django_db(transaction=True)
def test_a_nan_score_is_unscored_and_other_non_finite_numbers_are_text(capsys) -> None:
    call_command("import_run", str(NAN_LOG), "--add-cases")
    run = EvalRun.objects.get()
    q1, q2 = EvalResult.objects.filter(eval_run=run).order_by("case_id")
    assert q1.status == "passed"
    assert q2.status == "unscored"
    score = q2.scores[0] if isinstance(q2.scores, list) else q2.scores["judge"]
    assert score["value"] is None and "not a finite number" in score["explanation"]
    assert score["metadata"]["inspect_value"] == "NaN"
    stored = json.dumps(
        [q1.scores, q2.scores, q2.run.metadata, EvalCase.objects.get(case_id="q2").metadata], allow_nan=False
    )
    assert '"-Infinity"' in stored and '"Infinity"' in stored  # metadata kept, as text


def test_an_epoch_below_1_is_a_field_error() -> None:
    with pytest.raises(CaseBankError, match=r"ot-06-inspect-negative-epoch.json: field 'samples\[1\].epoch'"):
        list(read_inspect_log(EPOCH_LOG).samples())


def _eval_archive(path: Path, member: str, data: bytes) -> Path:
    """An .eval log of the NaN log's header with one sample member holding ``data``."""
    header = json.loads(NAN_LOG.read_text(), parse_constant=str)
    del header["samples"]
    with zipfile.ZipFile(path, "w") as out:
        out.writestr("header.json", json.dumps(header))
        out.writestr(member, data)
    return path


def test_logs_nested_too_deeply_are_an_error_naming_the_file(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    text = NAN_LOG.read_text().replace('"difficulty": 0.2', '"difficulty": ' + "[" * 100_000 + "]" * 100_000)
    deep.write_text(text)
    with pytest.raises(CaseBankError, match=r"deep.json: JSON nested too deeply to read"):
        read_inspect_log(deep)
    member = "samples/q1_epoch_1.json"
    archive = _eval_archive(tmp_path / "deep.eval", member, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(CaseBankError, match=rf"deep.eval:{member}: JSON nested too deeply to read"):
        list(read_inspect_log(archive).samples())


def test_several_logs_are_all_read_first_and_each_failure_reported(tmp_path: Path) -> None:
    db = tmp_path / "cli.sqlite3"
    env = {**os.environ, **subprocess_db_env(db), "COLUMNS": "200"}
    bad = tmp_path / "bad.json"
    bad.write_text(EPOCH_LOG.read_text())
    good_c = tmp_path / "c.json"
    good_c.write_text(NAN_LOG.read_text())
    args = [str(EVALSITE), "import-run", "--add-cases", str(EVAL_LOG), str(bad), "missing.eval", str(good_c)]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "bad.json: field 'samples[1].epoch'" in done.stderr
    assert "missing.eval: no such file" in done.stderr
    assert "(2 of 4 files not imported)" in done.stderr
    assert "biology_qa.eval" in done.stdout and "c.json" in done.stdout  # both imported, whatever the order


@pytest.mark.django_db(transaction=True)
def test_one_bad_log_before_a_good_one_still_imports_the_good_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(EPOCH_LOG.read_text())
    with pytest.raises(CommandError, match=r"bad.json: field 'samples\[1\].epoch'.*\(1 of 2 files not imported\)"):
        call_command("import_run", str(bad), str(NAN_LOG), "--add-cases")
    assert EvalRun.objects.count() == 1
