"""Deeply nested values are refused in one line naming the file (issue 23 sibling): YAML used to
recurse into a 3,000-line ``RecursionError``; YAML and JSON alike now stop at
``EVALSITE_IMPORT_MAX_DEPTH`` (:data:`evalcore.loaders.limits.MAX_DEPTH`), and a
``RecursionError`` anywhere in loading is the same kind of one-line error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from evalcore.loaders import CaseBankError, load_cases
from evalcore.loaders.limits import MAX_DEPTH, nested_deeper_than

TOO_DEEP_LINE = "nested more than 100 levels deep"


def _nest(n: int) -> str:
    return "[" * n + "]" * n


def _write(tmp_path: Path, kind: str, n: int) -> Path:
    """A case (or a promptfoo test) whose input holds ``n`` nested lists."""
    files = {
        "yaml": ("deep.yaml", "- id: d1\n  input: " + _nest(n) + "\n  expected: x\n"),
        "promptfoo": (
            "promptfooconfig.yaml",
            "prompts: ['{{body}}']\ntests:\n  - vars:\n      body: " + _nest(n) + "\n",
        ),
        "promptfoo-json": (
            "promptfooconfig.json",
            '{"prompts": ["{{body}}"], "tests": [{"vars": {"body": ' + _nest(n) + "}}]}",
        ),
        "jsonl": ("deep.jsonl", '{"id": "d1", "input": ' + _nest(n) + ', "expected": "x"}\n'),
        "json": ("deep.json", '[{"id": "d1", "input": ' + _nest(n) + ', "expected": "x"}]'),
        "csv": ("deep.csv", "id,input,expected\nd1," + _nest(n) + ",x\n"),
    }
    name, text = files[kind]
    path = tmp_path / name
    path.write_text(text)
    return path


KINDS = ["yaml", "promptfoo", "promptfoo-json", "jsonl", "json", "csv"]


@pytest.mark.parametrize(
    ("kind", "n"),
    # a YAML list of cases (the repro's deep500.yaml) is read as promptfoo tests: at 101 levels it
    # is refused for having no vars, at 500 as it is composed, before that check
    [(kind, n) for kind in KINDS for n in (101, 500, 5000) if (kind, n) != ("yaml", 101)],
)
def test_a_value_nested_past_the_limit_is_one_line_naming_the_file(tmp_path, kind, n) -> None:
    path = _write(tmp_path, kind, n)
    with pytest.raises(CaseBankError) as refused:
        load_cases(str(path))
    message = str(refused.value)
    assert message.startswith(str(path)) and "\n" not in message
    assert "nested" in message, message
    if n < 1000:  # the readers' own check, before any recursion
        assert TOO_DEEP_LINE in message and "EVALSITE_IMPORT_MAX_DEPTH" in message, message


@pytest.mark.parametrize("kind", ["jsonl", "json", "csv"])
def test_a_value_at_the_limit_is_read(tmp_path, kind) -> None:
    bank = load_cases(str(_write(tmp_path, kind, 100)))
    assert nested_deeper_than(bank.cases[0].input, 99) and not nested_deeper_than(bank.cases[0].input, 100)


def test_a_yaml_case_file_at_the_limit_is_read_and_the_limit_can_be_changed(tmp_path, monkeypatch) -> None:
    path = tmp_path / "promptfooconfig.yaml"
    path.write_text("prompts: ['{{body}}']\ntests:\n  - vars:\n      body: " + _nest(40) + "\n")
    assert load_cases(str(path)).cases
    monkeypatch.setenv(MAX_DEPTH.env, "20")
    with pytest.raises(CaseBankError, match="nested more than 20 levels deep"):
        load_cases(str(path))
    monkeypatch.setenv(MAX_DEPTH.env, "200")
    deep = _write(tmp_path, "promptfoo", 150)
    assert load_cases(str(deep)).cases


def test_recursion_anywhere_in_loading_is_the_same_one_line_error(tmp_path, monkeypatch) -> None:
    """The last resort: a limit raised past what Python's recursion allows still ends in one line."""
    monkeypatch.setenv(MAX_DEPTH.env, "100000")
    path = _write(tmp_path, "yaml", 5000)
    with pytest.raises(CaseBankError) as refused:
        load_cases(str(path))
    assert (
        str(refused.value)
        == f"{path}: a value is nested too deeply (hundreds of [ or {{ inside each other): flatten it"
    )
    assert sys.getrecursionlimit() < 5000


def test_nesting_is_measured_without_recursion() -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert nested_deeper_than(deep, 99_999) and not nested_deeper_than(deep, 100_001)
    assert not nested_deeper_than("x", 0) and nested_deeper_than({"a": {"b": []}}, 2)
    assert json.loads("[[]]") and not nested_deeper_than([[]], 2)
