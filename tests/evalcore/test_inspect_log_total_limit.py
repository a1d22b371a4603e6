"""An Inspect ``.eval`` log is bounded as a whole, not only per member: twelve samples of 200 MiB
each (every one under the 256 MiB member limit, a 2.4 MB file) took 3.8 GB and ended in
``MemoryError`` after 75 s. The header and samples together may decompress to at most
``EVALSITE_IMPORT_MAX_INFLATED_MB`` (512 MiB), checked against the sizes the archive declares
before any member is read: one line naming the file, in bounded memory (asserted in a child
process whose address space is capped)."""

from __future__ import annotations

import copy
import json
import resource
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from evalcore.loaders import CaseBankError
from evalcore.loaders.inspect_log import read_inspect_log

ROOT = Path(__file__).resolve().parents[2]
JSON_LOG = ROOT / "tests" / "fixtures" / "inspect_logs" / "biology_qa.json"
EVAL_LOG = ROOT / "tests" / "fixtures" / "inspect_logs" / "biology_qa.eval"
EVALSITE = Path(sys.executable).with_name("evalsite")
SAMPLE_MIB = 200
SAMPLES = 12


@pytest.fixture(scope="module")
def many_big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real, valid ``.eval`` log (right CRCs, sizes as declared) of 12 samples whose input is a
    200 MiB string: ~11 MB on disk, 2,400 MiB inflated (the repro's ``mk-many-big.py``)."""
    plain = json.loads(JSON_LOG.read_text())
    header = {key: value for key, value in plain.items() if key != "samples"}
    path = tmp_path_factory.mktemp("many-big") / "many-big.eval"
    block = b"a" * (1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, allowZip64=True, compresslevel=1) as archive:
        archive.writestr(
            "_journal/start.json", json.dumps({"version": 2, "eval": header["eval"], "plan": header["plan"]})
        )
        for i in range(SAMPLES):
            sample = dict(copy.deepcopy(plain["samples"][0]), id=f"big{i}", epoch=1, input="@@X@@")
            before, after = json.dumps(sample).split('"@@X@@"')
            with archive.open(f"samples/big{i}_epoch_1.json", "w", force_zip64=True) as member:
                member.write(before.encode() + b'"')
                for _ in range(SAMPLE_MIB):
                    member.write(block)
                member.write(b'"' + after.encode())
        header["eval"]["dataset"]["samples"] = SAMPLES
        archive.writestr("header.json", json.dumps(header))
    return path


def _capped(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_many_big_samples_are_refused_before_any_is_read_in_bounded_memory(many_big: Path) -> None:
    assert all(info.file_size < 256 << 20 for info in zipfile.ZipFile(many_big).infolist())  # each under the member cap
    code = textwrap.dedent(
        f"""
        from evalcore.loaders import CaseBankError
        from evalcore.loaders.inspect_log import read_inspect_log
        try:
            for _ in read_inspect_log({str(many_big)!r}).samples():
                pass
        except CaseBankError as exc:
            print(exc)
        """
    )
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, preexec_fn=lambda: _capped(1 << 30)
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == (
        f"{many_big}: its header and samples decompress to 2,400 MiB in all, over the limit of 512 MiB per "
        ".eval log (set EVALSITE_IMPORT_MAX_INFLATED_MB to raise it); nothing imported"
    )


def test_import_run_refuses_it_in_one_line_under_a_memory_cap(many_big: Path, tmp_path: Path) -> None:
    cap = 2 << 30  # the unbounded import took 3.8 GB
    done = subprocess.run(
        [str(EVALSITE), "import-run", str(many_big), "--db", str(tmp_path / "x.sqlite3")],
        capture_output=True,
        text=True,
        preexec_fn=lambda: _capped(cap),
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "over the limit of 512 MiB per .eval log" in lines[0], lines[:5]


def _eval_from_json(path: Path, padding: int = 0) -> Path:
    """The JSON fixture log as a deflated ``.eval`` archive; the first sample padded with
    ``padding`` bytes of metadata."""
    plain = json.loads(JSON_LOG.read_text())
    header = {key: value for key, value in plain.items() if key != "samples"}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for index, sample in enumerate(plain["samples"]):
            if index == 0 and padding:
                sample = dict(sample, metadata={"padding": "x" * padding})
            archive.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
        archive.writestr("header.json", json.dumps(header))
    return path


def test_the_whole_log_limit_can_be_lowered_and_raised(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "biology_qa.eval"
    shutil.copy(EVAL_LOG, log)
    assert len(list(read_inspect_log(log).samples())) == 14  # 0.3 MiB in all (zstd members)
    monkeypatch.setenv("EVALSITE_IMPORT_MAX_INFLATED_MB", "1")
    assert len(list(read_inspect_log(log).samples())) == 14
    fat = _eval_from_json(tmp_path / "fat.eval", padding=1 << 20)
    with pytest.raises(CaseBankError, match=r"fat.eval: its header and samples decompress to 1 MiB in all"):
        read_inspect_log(fat)
    monkeypatch.setenv("EVALSITE_IMPORT_MAX_INFLATED_MB", "2")
    assert len(list(read_inspect_log(fat).samples())) == 7
    monkeypatch.setenv("EVALSITE_IMPORT_MAX_INFLATED_MB", "0")
    with pytest.raises(CaseBankError, match="EVALSITE_IMPORT_MAX_INFLATED_MB must be a positive whole number"):
        read_inspect_log(fat)
