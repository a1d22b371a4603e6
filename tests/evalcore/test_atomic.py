"""Exports and case banks are written whole or not at all, and never replace a device: an
export to ``/dev/null`` once turned it into a regular file for the whole machine."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evalcore import Case
from evalcore.atomic import is_special, write_chunks
from evalcore.loaders import write_jsonl


def test_a_regular_file_is_replaced_whole_with_the_permissions_of_a_shell_redirect(tmp_path):
    target = tmp_path / "out" / "a.csv"
    assert write_chunks(target, [b"a,", b"b\n"]) == 4
    assert target.read_bytes() == b"a,b\n"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in target.parent.iterdir()] == ["a.csv"]  # no temporary file left


def test_a_failure_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "a.csv"
    target.write_bytes(b"old\n")

    def chunks():
        yield b"new"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_chunks(target, chunks())
    assert target.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.csv"]


def test_dev_null_stays_a_device():
    devnull = Path(os.devnull)
    assert is_special(devnull)
    assert write_chunks(devnull, [b"x" * 10]) == 10
    assert write_jsonl([Case("c1", "x", "x")], devnull) == 1
    assert stat.S_ISCHR(devnull.stat().st_mode)


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_chunks(fifo, [b"hello"])
    reader.join(timeout=60)
    assert got == [b"hello"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_the_export_command_writes_to_dev_null_without_replacing_it(tmp_path):
    from tests.support.databases import subprocess_db_env

    cases = tmp_path / "c.jsonl"
    cases.write_text('{"id": "a", "input": "x", "expected": "x", "split": "dev"}\n')
    env = {**os.environ, **subprocess_db_env(tmp_path / "db.sqlite3")}
    evalsite = str(Path(sys.executable).with_name("evalsite"))
    done = subprocess.run(
        [evalsite, "import", str(cases), "--name", "s"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        [evalsite, "export", "--set", "s", "--format", "csv", "-o", os.devnull],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert stat.S_ISCHR(Path(os.devnull).stat().st_mode)
