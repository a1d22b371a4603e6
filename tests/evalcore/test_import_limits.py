"""Imports that would grow without bound are refused in one line, before the memory is spent.

Each bomb is written here, in ``tmp_path``, and read in a child process whose address space is
capped (``resource.setrlimit(RLIMIT_AS)``): without the limits these files take gigabytes (the
promptfoo product 10^7 tests, the alias tree 2.3 * 10^9 values, the ``.eval`` member 2 GiB), so
the child would die of ``MemoryError`` instead of printing the refusal asserted here.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import zipfile
import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from evalcore.loaders import CaseBankError, load_cases
from evalcore.loaders.inspect_log import read_inspect_log
from evalcore.loaders.limits import MAX_CASES

ROOT = Path(__file__).resolve().parents[2]
JSON_LOG = ROOT / "tests" / "fixtures" / "inspect_logs" / "biology_qa.json"
EVAL_LOG = ROOT / "tests" / "fixtures" / "inspect_logs" / "biology_qa.eval"
MEMORY_CAP = 1 << 30  # 1 GiB of address space: the interpreter and the loaders need ~0.3


def _refusal_under_memory_cap(code: str, *, env: dict[str, str] | None = None) -> str:
    """Run ``code`` (which reads a file and prints the CaseBankError) in a child whose address
    space is capped; the child's one line of output."""
    script = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))\n"
    script += textwrap.dedent(code)
    child = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, env=env, check=False
    )
    assert child.returncode == 0, child.stderr[-2000:]
    return child.stdout.strip()


_LOAD = """
from evalcore.loaders import CaseBankError, load_cases
try:
    load_cases({path!r})
except CaseBankError as exc:
    print(exc)
else:
    print("imported")
"""

_READ_LOG = """
from evalcore.loaders import CaseBankError
from evalcore.loaders.inspect_log import read_inspect_log
try:
    for _ in read_inspect_log({path!r}).samples():
        pass
except CaseBankError as exc:
    print(exc)
else:
    print("read")
"""


# --- promptfoo ---------------------------------------------------------------------------------


def test_a_test_whose_vars_multiply_past_the_limit_is_refused_before_expanding(tmp_path: Path) -> None:
    values = ", ".join(f"'{j}'" for j in range(10))  # text values: promptfoo expands these
    lines = "\n".join(f"      v{i}: [{values}]" for i in range(7))
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        f"prompts: ['{{{{v0}}}}']\ntests:\n  - vars:\n{lines}\n    assert:\n      - type: equals\n        value: x\n"
    )
    assert config.stat().st_size < 600
    line = _refusal_under_memory_cap(_LOAD.format(path=str(config)))
    assert line == (
        f"{config}:3: field 'vars': this test's 7 list-valued var(s) (10 x 10 x 10 x 10 x 10 x 10 x 10) make "
        "10,000,000 combinations, taking the file past 100,000 cases, the limit per file "
        "(set EVALSITE_IMPORT_MAX_CASES to raise it); nothing imported"
    )


def test_a_yaml_alias_tree_is_refused_before_it_is_built(tmp_path: Path) -> None:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("\n".join(lines) + "\ntests:\n  - vars:\n      body: *a8\n")
    line = _refusal_under_memory_cap(_LOAD.format(path=str(config)))
    assert line.startswith(f"{config}: YAML aliases expand this file to 2,345,679,0")  # 10^9 leaves and lists
    assert "set EVALSITE_IMPORT_MAX_YAML_NODES to raise it" in line


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("loop: &x [1, *x]\ntests:\n  - vars: {q: a}\n")
    with pytest.raises(CaseBankError, match="refers to the value it is inside of"):
        load_cases(config)


def test_aliases_within_the_budget_and_the_limits_can_be_raised(tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "shared: &shared {type: contains, value: ok}\n"
        "tests:\n  - vars: {q: [a, b, c]}\n    assert: [*shared]\n  - vars: {q: d}\n    assert: [*shared]\n"
    )
    assert len(load_cases(config)) == 4  # ordinary anchors are fine
    monkeypatch.setenv(MAX_CASES.env, "3")
    with pytest.raises(CaseBankError, match=r"promptfooconfig.yaml:5: .*past 3 cases, the limit per file"):
        load_cases(config)
    monkeypatch.setenv(MAX_CASES.env, "4")
    assert len(load_cases(config)) == 4
    monkeypatch.setenv(MAX_CASES.env, "lots")
    with pytest.raises(CaseBankError, match="EVALSITE_IMPORT_MAX_CASES must be a positive whole number"):
        load_cases(config)


def test_the_limit_counts_the_tests_of_every_file_a_config_names(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a.csv").write_text("q,__expected\n" + "".join(f"q{i},x\n" for i in range(3)))
    (tmp_path / "b.csv").write_text("q,__expected\n" + "".join(f"r{i},x\n" for i in range(3)))
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("tests:\n  - file://*.csv\n")
    monkeypatch.setenv(MAX_CASES.env, "5")
    with pytest.raises(CaseBankError, match="past 5 cases"):
        load_cases(config)


# --- Inspect .eval members ----------------------------------------------------------------------


def _zip_with(path: Path, name: str, payload: bytes, *, method: int, size: int, crc: int) -> None:
    """A one-member zip holding ``payload`` as written, its headers patched to say it is
    compressed with ``method`` and inflates to ``size`` bytes (what a hostile archive can say)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(name, payload)
    raw = bytearray(path.read_bytes())
    local, central = raw.find(b"PK\x03\x04"), raw.rfind(b"PK\x01\x02")
    for offset, (method_at, crc_at, size_at) in ((local, (8, 14, 22)), (central, (10, 16, 24))):
        struct.pack_into("<H", raw, offset + method_at, method)
        struct.pack_into("<I", raw, offset + crc_at, crc)
        struct.pack_into("<I", raw, offset + size_at, size)
    path.write_bytes(bytes(raw))


def _deflated_zeros(total: int) -> bytes:
    """Raw deflate of ``total`` zero bytes, made from one 64 MiB block compressed once (blocks
    closed with a full flush can be repeated as they are)."""
    block = 64 << 20
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = compressor.compress(bytes(block)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return chunk * (total // block) + b"\x03\x00"  # the final (empty) block


@pytest.fixture(scope="module")
def two_gib_of_zeros() -> bytes:
    return _deflated_zeros(2 << 30)


def test_a_deflate_bomb_member_is_refused_within_bounded_memory(tmp_path: Path, two_gib_of_zeros: bytes) -> None:
    bomb = tmp_path / "bomb-deflate.eval"
    _zip_with(bomb, "header.json", two_gib_of_zeros, method=zipfile.ZIP_DEFLATED, size=2 << 30, crc=0)
    assert bomb.stat().st_size < 3 << 20
    line = _refusal_under_memory_cap(_READ_LOG.format(path=str(bomb)))
    assert line == (
        f"{bomb}:header.json: decompresses to more than 256 MiB, the limit per .eval member "
        "(set EVALSITE_INSPECT_MAX_MEMBER_MB to raise it); nothing imported"
    )


def test_a_bomb_that_understates_its_size_is_not_inflated_past_the_size_it_states(
    tmp_path: Path, two_gib_of_zeros: bytes
) -> None:
    bomb = tmp_path / "liar.eval"
    _zip_with(bomb, "header.json", two_gib_of_zeros, method=zipfile.ZIP_DEFLATED, size=1000, crc=0)
    line = _refusal_under_memory_cap(_READ_LOG.format(path=str(bomb)))
    assert line.startswith(f"{bomb}:header.json: damaged member (")


def test_a_zstd_member_claiming_more_than_the_limit_is_refused_before_decompressing(tmp_path: Path) -> None:
    header = {k: v for k, v in json.loads(JSON_LOG.read_text()).items() if k != "samples"}
    payload = json.dumps(header).encode()
    bomb = tmp_path / "zstd-claim.eval"
    compressed = pa.compress(payload, codec="zstd", asbytes=True)
    _zip_with(bomb, "header.json", compressed, method=93, size=0xFFFFFFFE, crc=zlib.crc32(payload))
    with pytest.raises(CaseBankError) as info:
        read_inspect_log(bomb)
    assert str(info.value) == (
        f"{bomb}:header.json: decompresses to more than 256 MiB, the limit per .eval member "
        "(set EVALSITE_INSPECT_MAX_MEMBER_MB to raise it); nothing imported"
    )


def test_the_member_limit_can_be_lowered_and_raised(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "biology_qa.eval"
    shutil.copy(EVAL_LOG, log)
    monkeypatch.setenv("EVALSITE_INSPECT_MAX_MEMBER_MB", "1")
    assert len(list(read_inspect_log(log).samples())) == 14  # every member is well under 1 MiB
    big = tmp_path / "big.eval"
    _zip_with(big, "header.json", _deflated_zeros(64 << 20), method=zipfile.ZIP_DEFLATED, size=2 << 20, crc=0)
    with pytest.raises(CaseBankError, match="more than 1 MiB"):
        read_inspect_log(big)


# --- gzip-compressed case files read whole ------------------------------------------------------


def test_a_gzip_bomb_read_whole_is_refused_as_it_inflates(tmp_path: Path) -> None:
    block = gzip.compress(b" " * (64 << 20))  # gzip members may follow one another in one file
    bomb = tmp_path / "cases.json.gz"
    bomb.write_bytes(gzip.compress(b"[") + block * 16 + gzip.compress(b"]"))  # 1 GiB of JSON
    assert bomb.stat().st_size < 2 << 20
    env = {**os.environ, "EVALSITE_IMPORT_MAX_INFLATED_MB": "64"}
    line = _refusal_under_memory_cap(_LOAD.format(path=str(bomb)), env=env)
    assert line == (
        f"{bomb}: the gzip data inflates to more than 64 MiB, the limit for a compressed file read whole "
        "(set EVALSITE_IMPORT_MAX_INFLATED_MB to raise it); nothing imported"
    )


def test_a_gzip_json_lines_file_of_one_endless_line_is_refused_at_the_line_limit(tmp_path: Path) -> None:
    block = gzip.compress(b"x" * (64 << 20))
    bomb = tmp_path / "cases.jsonl.gz"
    bomb.write_bytes(gzip.compress(b'{"id": "a", "input": "ok"}\n{"input": "') + block * 16)
    env = {**os.environ, "EVALSITE_IMPORT_MAX_INFLATED_MB": "64"}
    line = _refusal_under_memory_cap(_LOAD.format(path=str(bomb)), env=env)
    assert line == (
        f"{bomb}:2: a line longer than 64 MiB, the limit for one line "
        "(set EVALSITE_IMPORT_MAX_INFLATED_MB to raise it); nothing imported"
    )
