"""A case object that names a key twice is refused, naming file, line and key: JSON parsers keep
the last value silently, and a fresh user's ``"split": "dev", "split": "test"`` filed a case
under the held-out test split (``{"id": "j1", ..., "id": "j2"}`` stored ``j2``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalcore.loaders import load_cases
from evalcore.loaders.errors import CaseBankError


@pytest.mark.parametrize(
    ("name", "text", "line", "key"),
    [
        ("cases.jsonl", '{"id":"a","input":"x"}\n{"id":"k1","input":"a","split":"dev","split":"test"}\n', 2, "split"),
        ("cases.jsonl", '{"id":"j1","input":"a","id":"j2"}\n', 1, "id"),
        ("cases.json", '[\n{"id":"a","input":"x"},\n{"id":"b","input":{"q":1,"q":2}}\n]\n', 3, "q"),
    ],
)
def test_a_repeated_key_is_refused_naming_line_and_key(
    tmp_path: Path, name: str, text: str, line: int, key: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(CaseBankError) as refused:
        load_cases(path)
    message = str(refused.value)
    assert f":{line}" in message and f"'{key}' appears twice" in message, message
