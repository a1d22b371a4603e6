"""Table writers (JSONL, CSV, Parquet) and exports read back as case banks."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

from evalcore.jsonvalue import MISSING
from evalcore.loaders import load_cases
from evalcore.tables import CASE_COLUMNS, Column, case_record, csv_cell, table_chunks

CASES = [
    case_record("a", "text, with comma", "A", ["t"], "dev", {"k": {"deep": [1, None]}}),
    case_record("b", {"q": "obj", "n": 2}, None, [], "train", {}),
    case_record("c", ["list", "input"], MISSING, ["x", "y"], "test", {"unicode": "ça"}),
]
RESULT = [Column(("evalsite", "score"), "float"), Column(("evalsite", "passed"), "bool")]


def rows() -> list[dict]:
    return [{**case, "evalsite": {"score": 0.5 * i, "passed": i % 2 == 0}} for i, case in enumerate(CASES)]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_each_format_reads_back_as_the_same_cases(fmt, tmp_path):
    path = tmp_path / f"out.{fmt}"
    path.write_bytes(b"".join(table_chunks(fmt, iter(rows()), [*CASE_COLUMNS, *RESULT])))
    loaded = load_cases(path)
    assert [(c.id, c.input, c.expected, c.tags, c.split, c.metadata) for c in loaded.cases] == [
        (r["id"], r["input"], r.get("expected", MISSING), r["tags"], r["split"], r["metadata"]) for r in CASES
    ]


def test_parquet_types_its_columns_and_names_the_json_ones():
    data = b"".join(table_chunks("parquet", iter(rows()), [*CASE_COLUMNS, *RESULT]))
    table = pq.read_table(io.BytesIO(data))
    assert str(table.schema.field("evalsite.score").type) == "double"
    assert str(table.schema.field("evalsite.passed").type) == "bool"
    assert json.loads(table.schema.metadata[b"evalsite.json_columns"]) == ["input", "expected", "tags", "metadata"]
    assert table.column("expected").to_pylist() == ['"A"', "null", None]  # null kept apart from absent


def test_csv_cells_follow_the_loaders_rule_backwards():
    assert [csv_cell(v, "json") for v in ("x", None, MISSING, True, 2, {"a": 1}, [1])] == [
        "x", "null", "", "true", "2", '{"a": 1}', "[1]",
    ]  # fmt: skip
    assert [csv_cell(v, "bool") for v in (True, False, None)] == ["true", "false", ""]
    text = b"".join(table_chunks("csv", iter([]), CASE_COLUMNS)).decode()
    assert text == "id,input,expected,tags,split,metadata\r\n"  # a table without rows keeps its header
    with pytest.raises(ValueError, match="unknown export format"):
        table_chunks("xlsx", iter([]), CASE_COLUMNS)


def test_only_a_file_that_starts_as_an_export_loses_its_evalsite_field(tmp_path):
    """A user's file whose first record has no ``evalsite`` key is read as always: an unused
    field, even named evalsite, is kept in metadata, and a repeated id is an error."""
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"id": "a", "input": 1}\n{"id": "b", "input": 2, "evalsite": {"x": 1}}\n')
    assert load_cases(plain).cases[1].metadata == {"evalsite": {"x": 1}}
    export = tmp_path / "export.jsonl"
    export.write_text(
        '{"id": "a", "input": 1, "evalsite": {"repeat": 0}}\n'
        '{"id": "a", "input": 1, "evalsite": {"repeat": 1}}\n'
        '{"id": "b", "input": 2, "evalsite": {"repeat": 0}}\n'
    )
    assert [(c.id, c.metadata) for c in load_cases(export).cases] == [("a", {}), ("b", {})]
    duplicate = tmp_path / "duplicate.jsonl"
    duplicate.write_text('{"id": "a", "input": 1}\n{"id": "a", "input": 1}\n')
    with pytest.raises(Exception, match="duplicate case id"):
        load_cases(duplicate)
