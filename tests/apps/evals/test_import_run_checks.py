"""`evalsite import-run` checks what a log says against itself and against the set: a (sample,
epoch) twice is refused, counts printed are the rows stored, a target that differs from the
set's expected value is reported at import, and the case page does not call that a set change;
a hostile ``.eval`` bomb is refused in one line by the command (rs3-05)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.evals.models import EvalCase, EvalResult, EvalRun
from apps.traces.models import Run

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests" / "fixtures" / "inspect_logs"
JSON_LOG = LOGS / "biology_qa.json"
DATASET = LOGS / "biology_qa.jsonl"


def _import_dataset() -> None:
    call_command("import", str(DATASET), "--map", "input=question,expected=answer")


def _eval_log(path: Path, data: dict, extra: tuple[tuple[str, dict], ...] = ()) -> Path:
    """``data`` (a .json log) written as an ``.eval`` archive, with ``extra`` sample members."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for sample in data["samples"]:
            archive.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
        for name, sample in extra:
            archive.writestr(name, json.dumps(sample))
        archive.writestr("header.json", json.dumps({k: v for k, v in data.items() if k != "samples"}))
    return path


@pytest.mark.django_db(transaction=True)
def test_a_sample_twice_is_refused_naming_both_members_and_nothing_is_imported(tmp_path: Path) -> None:
    _import_dataset()
    data = json.loads(JSON_LOG.read_text())
    log = _eval_log(
        tmp_path / "traversal.eval", data, extra=(("samples/../../../../tmp/X_epoch_1.json", data["samples"][0]),)
    )
    with pytest.raises(CommandError) as error:
        call_command("import_run", str(log), "--set", "biology_qa", "--add-cases")
    assert str(error.value) == (
        f"{log}: sample 'q1' epoch 1 appears twice, in samples/q1_epoch_1.json and in "
        "samples/../../../../tmp/X_epoch_1.json: a log holds each (sample, epoch) once; nothing imported"
    )
    assert not EvalRun.objects.exists() and not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_target_other_than_the_sets_expected_is_reported_and_not_called_a_set_change(
    tmp_path: Path, client, viewer, capsys: pytest.CaptureFixture[str]
) -> None:
    _import_dataset()
    data = json.loads(JSON_LOG.read_text())
    for sample in data["samples"]:
        if sample["id"] in ("q2", "q5"):
            sample["target"] = "something else"
    log = tmp_path / "retargeted.json"
    log.write_text(json.dumps(data))
    capsys.readouterr()
    call_command("import_run", str(log))
    out, err = capsys.readouterr()
    run = EvalRun.objects.get()
    # the counts printed add up to the results stored
    counts = {s: EvalResult.objects.filter(eval_run=run, status=s).count() for s in ("passed", "failed", "errored")}
    assert (
        f"{run.n_done} results ({counts['passed']} passed, {counts['failed']} failed, {counts['errored']} errored"
        in out
    )
    assert sum(counts.values()) == run.n_done == 7
    assert "note: 2 sample(s) were scored by Inspect against another target than their case's expected value" in err
    assert err.rstrip().endswith(": q2, q5")
    assert EvalCase.objects.get(case_id="q2").expected != "something else"  # the set is not changed

    client.force_login(viewer)
    q2 = EvalResult.objects.get(eval_run=run, case_id="q2")
    page = client.get(f"/runs/{run.pk}/cases/{q2.pk}/").content.decode()
    assert 'id="expected-changed"' in page and "the set has not changed since the run" in page
    assert "The set changed since this run" not in page
    q1 = EvalResult.objects.get(eval_run=run, case_id="q1")
    assert 'id="expected-changed"' not in client.get(f"/runs/{run.pk}/cases/{q1.pk}/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_deflate_bomb_is_one_line_from_the_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSITE_INSPECT_MAX_MEMBER_MB", "1")
    bomb = tmp_path / "bomb-deflate.eval"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", bytes(3 << 20))
    with pytest.raises(CommandError) as error:
        call_command("import_run", str(bomb), "--set", "rs3h", "--add-cases")
    assert str(error.value) == (
        f"{bomb}:header.json: decompresses to more than 1 MiB, the limit per .eval member "
        "(set EVALSITE_INSPECT_MAX_MEMBER_MB to raise it); nothing imported"
    )
    assert not EvalRun.objects.exists()
