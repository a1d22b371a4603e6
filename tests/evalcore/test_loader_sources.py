"""One loader entry for every format (JSONL, JSON, CSV, ADK), from a path or a file object."""

from __future__ import annotations

import gzip
import io
import shutil
from pathlib import Path

import pytest

from evalcore.loaders import CaseBankError, cases_content_hash, iter_cases, load_cases
from evalcore.splits import assign_split

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ADK_FILE = FIXTURES / "adk" / "adk-python__hello_world_agent__roll_die.test.json"
JSONL = b'{"id": "a", "input": "x", "expected": "1"}\n{"id": "b", "input": "y", "split": "test"}\n'


def test_an_adk_file_is_picked_by_its_name_and_split_like_any_case_bank(tmp_path: Path) -> None:
    bank = load_cases(ADK_FILE)
    assert bank.format == "adk" and bank.name == "adk-python__hello_world_agent__roll_die"
    assert [c.split for c in bank.cases] == [assign_split(bank.name, c.id) for c in bank.cases]
    assert bank.hashed_splits == {c.id for c in bank.cases}
    assert bank.content_hash == cases_content_hash(bank.cases)
    # the name decides, not the folder: a copy elsewhere reads the same
    copy = tmp_path / ADK_FILE.name
    shutil.copy(ADK_FILE, copy)
    assert load_cases(copy).cases == bank.cases
    assert list(iter_cases(copy)) == bank.cases


def test_an_adk_test_config_is_refused_by_the_one_entry(tmp_path: Path) -> None:
    config = tmp_path / "test_config.json"
    config.write_text('{"criteria": {"tool_trajectory_avg_score": 1.0}}')
    with pytest.raises(CaseBankError, match="not an eval file"):
        load_cases(config)


@pytest.mark.parametrize(
    ("stream", "name"),
    [
        (io.BytesIO(JSONL), "bank.jsonl"),
        (io.StringIO(JSONL.decode()), "bank.jsonl"),
        (io.BytesIO(gzip.compress(JSONL)), "bank.jsonl.gz"),
    ],
    ids=["bytes", "text", "gzip"],
)
def test_a_file_object_loads_as_its_path_would(tmp_path: Path, stream: io.IOBase, name: str) -> None:
    path = tmp_path / "bank.jsonl"
    path.write_bytes(JSONL)
    from_path = load_cases(path)
    from_stream = load_cases(stream, name=name)
    assert from_stream.cases == from_path.cases and from_stream.content_hash == from_path.content_hash
    assert from_stream.path == name and from_stream.name == "bank"
    assert not stream.closed  # the caller's object: the caller closes it


def test_a_binary_file_is_read_from_where_the_caller_left_it(tmp_path: Path) -> None:
    path = tmp_path / "bank.csv"
    path.write_bytes(b"junk header line to skip\nid,input,expected\nc1,hello,1\n")
    with path.open("rb") as handle:
        handle.readline()
        bank = load_cases(handle)  # the name comes from the handle
        assert [c.id for c in bank.cases] == ["c1"] and bank.format == "csv"
        assert bank.cases[0].expected == 1


def test_a_file_object_error_names_the_given_name_and_line() -> None:
    with pytest.raises(CaseBankError) as info:
        load_cases(io.BytesIO(b'{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n'), name="upload.jsonl")
    assert str(info.value).startswith("upload.jsonl:2")


def test_a_nameless_file_object_needs_a_format() -> None:
    with pytest.raises(CaseBankError, match="unsupported file type"):
        load_cases(io.BytesIO(JSONL))
    assert len(load_cases(io.BytesIO(JSONL), file_format="jsonl")) == 2
