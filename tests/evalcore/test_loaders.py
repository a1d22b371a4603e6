"""Case-bank loading: formats, mapping, ids, and one test per kind of bad input."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest

from evalcore.jsonvalue import MISSING
from evalcore.loaders import (
    CaseBankError,
    LoadedCaseBank,
    auto_case_id,
    cases_content_hash,
    convert_cell,
    hash_record,
    iter_cases,
    iter_jsonl_cases,
    load_cases,
    parse_mapping,
    write_jsonl,
)
from evalcore.loaders._records import legacy_auto_case_id
from evalcore.splits import assign_split
from evalcore.types import Case

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "casebanks"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def jsonl(*records: object) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def load_error(path: Path, **kwargs: object) -> CaseBankError:
    with pytest.raises(CaseBankError) as info:
        load_cases(path, **kwargs)  # type: ignore[arg-type]
    return info.value


def assert_located(err: CaseBankError, path: Path, line: int | None, field: str | None = None) -> None:
    """The error names the file, the line and the field, in its attributes and its message."""
    message = str(err)
    assert err.path == str(path)
    assert err.line == line
    assert err.field == field
    assert message.startswith(str(path))
    if line is not None:
        assert f"{path.name}:{line}" in message
    if field is not None:
        assert f"field '{field}'" in message


# --- the canonical format ---------------------------------------------------------------------


def test_canonical_jsonl_loads_every_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "qa.jsonl",
        jsonl(
            {"id": "q1", "input": "2+2?", "expected": "4", "tags": ["math"], "split": "dev", "metadata": {"k": 1}},
            {"id": 7, "input": {"q": "who"}, "expected": None},
            {"id": "q3", "input": "no reference"},
        ),
    )
    bank = load_cases(path)
    assert isinstance(bank, LoadedCaseBank)
    assert (bank.name, bank.path, bank.format, len(bank)) == ("qa", str(path), "jsonl", 3)
    first, second, third = bank.cases
    assert first == Case("q1", "2+2?", "4", ["math"], "dev", {"k": 1})
    assert second.id == "7"  # integer ids become strings
    assert second.expected is None and second.has_expected  # a real null expected
    assert third.expected is MISSING and not third.has_expected
    assert all(case.split in ("train", "dev", "test") for case in bank.cases)


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    cases = [
        Case("a", "é ü 漢字", "x", ["t"], "train", {"n": 1.5}),
        Case("b", [1, 2], None, [], "test", {}),
        Case("c", {"q": "?"}, MISSING, [], "dev", {}),
    ]
    path = tmp_path / "out" / "bank.jsonl"
    assert write_jsonl(cases, path) == 3
    text = path.read_text(encoding="utf-8")
    assert "漢字" in text and "\r" not in text
    assert '"expected"' not in text.splitlines()[2]  # missing expected is left out, not null
    assert load_cases(path).cases == cases


def test_write_jsonl_gz_round_trips_and_refuses_duplicates(tmp_path: Path) -> None:
    cases = [Case("a", "x", "y", split="train")]
    path = tmp_path / "bank.jsonl.gz"
    write_jsonl(cases, path)
    assert gzip.decompress(path.read_bytes()).startswith(b'{"id": "a"')
    assert load_cases(path).cases == cases
    bad = tmp_path / "dup.jsonl"
    with pytest.raises(ValueError, match="duplicate case id 'a'"):
        write_jsonl([Case("a", 1), Case("a", 2)], bad)
    assert not bad.exists()
    with pytest.raises(ValueError, match="case 'n'"):
        write_jsonl([Case("n", float("nan"))], bad)
    assert not bad.exists() and list(tmp_path.glob(".dup*")) == []


def test_blank_and_whitespace_lines_are_skipped_and_lines_still_counted(tmp_path: Path) -> None:
    path = write(tmp_path, "gaps.jsonl", '\n{"id": "a", "input": 1}\n   \n\t\r\n{"id": "a", "input": 2}\n\n')
    err = load_error(path)
    assert_located(err, path, 5, "id")
    assert "first seen on line 2" in str(err)


def test_crlf_and_utf8_bom_jsonl(tmp_path: Path) -> None:
    path = write(tmp_path, "win.jsonl", b'\xef\xbb\xbf{"id": "a", "input": "x"}\r\n{"id": "b", "input": "y"}\r\n')
    assert [c.id for c in load_cases(path).cases] == ["a", "b"]


def test_gzipped_jsonl_and_default_name_drops_all_suffixes(tmp_path: Path) -> None:
    path = write(tmp_path, "qa.jsonl.gz", gzip.compress(jsonl({"id": "a", "input": "x"}).encode()))
    bank = load_cases(path)
    assert bank.name == "qa" and bank.format == "jsonl"
    assert bank.cases[0].split == assign_split("qa", "a")


def test_set_name_and_ratios_drive_hashed_splits(tmp_path: Path) -> None:
    path = write(tmp_path, "s.jsonl", jsonl(*({"id": f"c{i}", "input": i} for i in range(50))))
    bank = load_cases(path, set_name="other", split_ratios=(0, 0, 1))
    assert bank.name == "other"
    assert {case.split for case in bank.cases} == {"test"}


def test_explicit_split_wins_over_hash(tmp_path: Path) -> None:
    ids = [f"c{i}" for i in range(30)]
    path = write(tmp_path, "s.jsonl", jsonl(*({"id": i, "input": 1, "split": "dev"} for i in ids)))
    assert {case.split for case in load_cases(path, split_ratios=(1, 0, 0)).cases} == {"dev"}


def test_content_hash_ignores_order_but_sees_content(tmp_path: Path) -> None:
    a, b = {"id": "a", "input": "x", "split": "dev"}, {"id": "b", "input": "y", "split": "dev"}
    one = load_cases(write(tmp_path, "one.jsonl", jsonl(a, b)), set_name="s")
    two = load_cases(write(tmp_path, "two.jsonl", jsonl(b, a)), set_name="s")
    changed = load_cases(write(tmp_path, "three.jsonl", jsonl(a, {**b, "expected": "z"})), set_name="s")
    assert one.content_hash == two.content_hash == cases_content_hash(two.cases)
    assert len(one.content_hash) == 64
    assert changed.content_hash != one.content_hash


def test_hash_record_is_the_stored_record() -> None:
    # the content hash reads records built directly; they must be to_record's, key for key
    from evalcore.loaders._json import canonical_json
    from evalcore.serial import to_record

    cases = [
        Case("a", {"q": [1, 2.5, None]}, tags=["t"], metadata={"m": {"n": 1}}, split="dev"),
        Case("b", "q", "e", split="test"),
        Case("c", None, None),
        Case("d", ["x"], MISSING, split="train"),
    ]
    for case in cases:
        assert hash_record(case) == to_record(case)
        assert canonical_json(hash_record(case)) == canonical_json(to_record(case))


def test_json_array_keeps_each_case_line(tmp_path: Path) -> None:
    text = '[\n  {"id": "a", "input": 1},\n  {"id": "b",\n   "input": 2},\n  {"id": "a", "input": 3}\n]\n'
    path = write(tmp_path, "arr.json", text)
    err = load_error(path)
    assert_located(err, path, 5, "id")
    assert "first seen on line 2" in str(err)
    ok = write(tmp_path, "ok.json", '[{"id": "a", "input": 1}, {"id": "b", "input": 2}]')
    assert [c.id for c in load_cases(ok).cases] == ["a", "b"]


def test_json_object_with_cases_array(tmp_path: Path) -> None:
    path = write(tmp_path, "w.json", '{"name": "x", "cases": [\n{"id": "a", "input": 1},\n{"input": 2}]}')
    assert_located(load_error(path), path, 3, "id")
    good = write(tmp_path, "g.json", '{"description": "d", "cases": [{"id": "a", "input": 1}]}')
    assert load_cases(good).format == "json"


def test_json_file_holding_json_lines_is_read_as_jsonl(tmp_path: Path) -> None:
    # Some public datasets (BFCL) ship JSON Lines under a .json name.
    path = write(tmp_path, "lines.json", jsonl({"id": "a", "input": 1}, {"id": "b", "input": 2}))
    bank = load_cases(path)
    assert bank.format == "jsonl" and len(bank) == 2


def test_iter_jsonl_cases_streams_before_a_later_error(tmp_path: Path) -> None:
    path = write(tmp_path, "s.jsonl", jsonl({"id": "a", "input": 1}, {"id": "b", "input": 2}) + "{bad\n")
    stream = iter_jsonl_cases(path)
    assert next(stream).id == "a"
    assert next(stream).id == "b"
    with pytest.raises(CaseBankError) as info:
        next(stream)
    assert info.value.line == 3
    assert [c.id for c in iter_cases(write(tmp_path, "c.csv", "id,input\nx,1\n"))] == ["x"]


def test_case_bank_error_pickles_with_its_location() -> None:
    err = CaseBankError("bad", path="a.jsonl", line=3, field="id", column=4)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.path, copy.line, copy.field, copy.column, copy.reason) == ("a.jsonl", 3, "id", 4, "bad")
    assert str(copy) == "a.jsonl:3:4: field 'id': bad"
    assert isinstance(copy, ValueError)


# --- CSV --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "value"),
    [
        ("42", 42),
        ("-7", -7),
        ("3.14", 3.14),
        ("007", "007"),
        ("1e5", "1e5"),
        ("1.50", "1.50"),
        ("+1", "+1"),
        ("true", True),
        ("null", None),
        ("True", "True"),
        ("NaN", "NaN"),
        ('{"a": [1]}', {"a": [1]}),
        (" [1, 2] ", [1, 2]),
        ("[1] Smith et al.", "[1] Smith et al."),
        ("[citation needed]", "[citation needed]"),
        ("plain text ", "plain text "),
    ],
)
def test_csv_cell_rule(cell: str, value: object) -> None:
    assert convert_cell(cell) == value
    assert type(convert_cell(cell)) is type(value)


def test_csv_ids_stay_strings_and_cells_convert(tmp_path: Path) -> None:
    text = (
        "id,input,expected,tags,split,note\r\n"
        '007,"What is 6*7?",42,math;arith ,dev,\r\n'
        '1e5,"{""q"": 1}",,"[""x""]",,"line one\r\nline two"\r\n'
        "003,q,null,,,1.50\r\n"
    )
    path = write(tmp_path, "bank.csv", b"\xef\xbb\xbf" + text.encode())
    bank = load_cases(path)
    assert bank.format == "csv"
    first, second, third = bank.cases
    assert [c.id for c in bank.cases] == ["007", "1e5", "003"]
    assert first.expected == 42 and first.tags == ["math", "arith"] and first.split == "dev"
    assert first.metadata == {}  # an empty cell is absent
    assert second.input == {"q": 1} and second.expected is MISSING and second.tags == ["x"]
    assert second.metadata == {"note": "line one\r\nline two"}
    assert third.expected is None and third.metadata == {"note": "1.50"}


def test_csv_error_lines_count_multiline_cells(tmp_path: Path) -> None:
    path = write(tmp_path, "m.csv", 'id,input\na,"two\nlines"\n\nb,x\na,y\n')
    err = load_error(path)
    assert_located(err, path, 6, "id")
    assert err.column == 1
    assert "first seen on line 2" in str(err)


def test_csv_row_with_too_many_cells(tmp_path: Path) -> None:
    path = write(tmp_path, "wide.csv", "id,input\na,1\nb,2,3\n")
    err = load_error(path)
    assert_located(err, path, 3)
    assert "3 cells but the header has 2" in str(err)


def test_csv_row_with_too_few_cells_is_refused_not_read_as_empty(tmp_path: Path) -> None:
    # a lost delimiter must not turn into a case with no expected value (it would be errored later)
    path = write(tmp_path, "short.csv", "id,input,expected\na,x,1\nb,y\n")
    err = load_error(path)
    assert_located(err, path, 3)
    assert err.column == 3
    assert "2 cells but the header has 3" in str(err) and "'expected'" in str(err)


def test_csv_empty_cells_written_out_are_still_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.csv", "id,input,expected\na,x,\n")
    (case,) = load_cases(path).cases
    assert case.input == "x" and not case.has_expected


def test_csv_unclosed_quote(tmp_path: Path) -> None:
    path = write(tmp_path, "q.csv", 'id,input\na,"open\n')
    err = load_error(path)
    assert_located(err, path, 2)
    assert err.column == 8  # just past the last character
    assert "file ends early (truncated) at line 2, column 8, inside a quoted cell opened at line 2, column 3" in str(
        err
    )


def test_csv_stray_quote_mid_file_names_where_it_opened(tmp_path: Path) -> None:
    path = write(tmp_path, "q.csv", 'id,input\na,1\nb,"open\nc,3\nd,4\n')
    err = load_error(path)
    assert_located(err, path, 5)
    assert "inside a quoted cell opened at line 3, column 3" in str(err) and 'write ""' in str(err)


def test_csv_other_syntax_errors_keep_their_message(tmp_path: Path) -> None:
    path = write(tmp_path, "q.csv", 'id,input\na,"op"en\n')
    err = load_error(path)
    assert_located(err, path, 2)
    assert "invalid CSV: ',' expected after '\"'" in str(err)


def test_csv_duplicate_column(tmp_path: Path) -> None:
    path = write(tmp_path, "h.csv", "id,input,input\na,1,2\n")
    err = load_error(path)
    assert_located(err, path, 1, "input")
    assert err.column == 3


def test_csv_nan_in_json_cell_names_column(tmp_path: Path) -> None:
    path = write(tmp_path, "n.csv", 'id,input,metadata\na,1,"{""score"": NaN}"\n')
    err = load_error(path)
    assert_located(err, path, 2, "metadata.score")
    assert err.column == 3


# --- mapping ----------------------------------------------------------------------------------


def test_parse_mapping() -> None:
    assert parse_mapping("input=question, expected=answer,id=qid,") == {
        "input": "question",
        "expected": "answer",
        "id": "qid",
    }
    assert parse_mapping("input=a+b") == {"input": "a+b"}
    assert parse_mapping("") == {}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("inputquestion", "expected FIELD=COLUMN"),
        ("input=", "expected FIELD=COLUMN"),
        ("prompt=question", "unknown case field 'prompt'"),
        ("input=a,input=b", "mapped twice"),
        ("input=q,expected=q", "mapped to both"),
        ("id=a+b", "only input, expected and metadata"),
    ],
)
def test_parse_mapping_errors(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_mapping(text)


def test_mapping_renames_and_keeps_unknown_fields_in_metadata(tmp_path: Path) -> None:
    path = write(tmp_path, "g.jsonl", jsonl({"qid": 5, "question": "q?", "answer": "a", "input": "old", "extra": [1]}))
    (case,) = load_cases(path, mapping={"id": "qid", "input": "question", "expected": "answer"}).cases
    assert (case.id, case.input, case.expected) == ("5", "q?", "a")
    assert case.metadata == {"input": "old", "extra": [1]}


def test_mapping_to_a_column_no_record_has(tmp_path: Path) -> None:
    path = write(tmp_path, "g.jsonl", jsonl({"id": "a", "input": "q", "answer": "x"}))
    err = load_error(path, mapping={"expected": "answr"})
    assert_located(err, path, None, "answr")
    assert "expected=answr matched no record" in str(err)


def test_missing_mapped_input_names_the_source_column(tmp_path: Path) -> None:
    path = write(tmp_path, "g.jsonl", jsonl({"id": "a", "question": "q"}, {"id": "b", "prompt": "q"}))
    err = load_error(path, mapping={"input": "question"})
    assert_located(err, path, 2, "question")
    assert "'prompt'" in str(err)  # shows the fields the record does have


def test_metadata_clash_with_unmapped_field(tmp_path: Path) -> None:
    path = write(tmp_path, "c.jsonl", jsonl({"id": "a", "input": 1, "metadata": {"src": 1}, "src": 2}))
    assert_located(load_error(path), path, 1, "src")


# --- auto ids ---------------------------------------------------------------------------------


def test_auto_id_is_stable_and_derived_from_the_input_alone(tmp_path: Path) -> None:
    path = write(tmp_path, "a.jsonl", jsonl({"input": "q", "expected": "x"}, {"input": "r"}))
    first, second = load_cases(path, auto_id=True).cases
    assert first.id == auto_case_id("q") and first.id.startswith("auto-") and len(first.id) == 17
    assert second.id == auto_case_id("r") != first.id
    assert load_cases(path, auto_id=True).cases[0].id == first.id
    assert auto_case_id({"b": 1, "a": 2}) == auto_case_id({"a": 2, "b": 1})  # canonical JSON
    # a corrected label, other tags or metadata: the same case, the same id
    relabelled = write(tmp_path, "b.jsonl", jsonl({"input": "q", "expected": "y", "tags": ["fixed"], "note": 1}))
    assert load_cases(relabelled, auto_id=True).cases[0].id == first.id


def test_auto_ids_of_cases_sharing_an_input_are_numbered_in_file_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "a.jsonl",
        jsonl({"input": "q", "expected": "x"}, {"input": "r"}, {"input": "q", "expected": "y"}, {"input": "q"}),
    )
    ids = [case.id for case in load_cases(path, auto_id=True).cases]
    base = auto_case_id("q")
    assert ids == [base, auto_case_id("r"), f"{base}-2", f"{base}-3"]
    assert auto_case_id("q", occurrence=2) == f"{base}-2"


def test_identical_auto_id_cases_are_duplicates_naming_both_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path, "a.jsonl", jsonl({"input": "q", "expected": "x"}, {"input": "r"}, {"input": "q", "expected": "x"})
    )
    err = load_error(path, auto_id=True)
    assert_located(err, path, 3, "id")
    assert "same input and expected value as line 1" in str(err)


def test_auto_id_bank_records_the_first_schemes_ids(tmp_path: Path) -> None:
    """Sets imported before ids came from the input alone hold ids over input + expected."""
    path = write(tmp_path, "a.jsonl", jsonl({"input": "q", "expected": "x"}, {"input": "r"}))
    bank = load_cases(path, auto_id=True)
    assert bank.legacy_auto_ids == {
        auto_case_id("q"): legacy_auto_case_id("q", "x"),
        auto_case_id("r"): legacy_auto_case_id("r", MISSING),
    }
    assert legacy_auto_case_id("q", "x") != auto_case_id("q")
    explicit = write(tmp_path, "e.jsonl", jsonl({"id": "a", "input": "q"}))
    assert load_cases(explicit, auto_id=True).legacy_auto_ids == {}


# --- bad input: one test each -----------------------------------------------------------------


def test_invalid_json_line_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.jsonl", jsonl({"id": "a", "input": 1}) + '  {"id": "b", "input": }\n')
    err = load_error(path)
    assert_located(err, path, 2)
    assert err.column == 24
    assert f"{path}:2:24: invalid JSON: Expecting value" == str(err)


def test_two_objects_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "two.jsonl", '{"id": "a", "input": 1} {"id": "b", "input": 2}\n')
    err = load_error(path)
    assert_located(err, path, 1)
    assert "one JSON object per line" in str(err)


def test_cp1252_file_is_rejected_with_offset_and_guess(tmp_path: Path) -> None:
    line = '{"id": "b", "input": "Où est le café? Ça coûte trop cher, à mon avis."}\n'
    content = jsonl({"id": "a", "input": "x"}).encode() + line.encode("cp1252")
    path = write(tmp_path, "latin.jsonl", content)
    err = load_error(path)
    assert_located(err, path, 2)
    offset = content.index(b"\xf9")
    assert f"byte 0xF9 at byte offset {offset}" in str(err)
    assert "not valid UTF-8" in str(err) and "looks like cp1252 (Windows Western European)" in str(err)


def test_cp1252_csv_is_rejected_too(tmp_path: Path) -> None:
    text = "id,input\na,x\nb,na\u00efve: où est le café? Ça coûte cher\n"
    path = write(tmp_path, "latin.csv", text.encode("cp1252"))
    err = load_error(path)
    assert_located(err, path, 3)
    assert err.column == 5 and "looks like cp1252 (Windows Western European)" in str(err)


@pytest.mark.parametrize(
    ("encoding", "bom", "name"),
    [("utf-16-le", b"\xff\xfe", "UTF-16 LE"), ("utf-16-be", b"\xfe\xff", "UTF-16 BE"), ("utf-16-le", b"", "UTF-16 LE")],
)
def test_utf16_file_is_named(tmp_path: Path, encoding: str, bom: bytes, name: str) -> None:
    path = write(tmp_path, "wide.jsonl", bom + jsonl({"id": "a", "input": "x"}).encode(encoding))
    err = load_error(path)
    assert_located(err, path, 1)
    assert f"not UTF-8: it looks like {name}" in str(err)


def test_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path, "qa.jsonl", jsonl({"id": "q7", "input": 1}, {"id": "q8", "input": 2}, {"id": "q7", "input": 3})
    )
    err = load_error(path)
    assert str(err) == f"{path}:3: field 'id': duplicate case id 'q7' (first seen on line 1)"
    # An integer id and its string form are the same id.
    mixed = write(tmp_path, "mixed.jsonl", jsonl({"id": 1, "input": 1}, {"id": "1", "input": 2}))
    assert_located(load_error(mixed), mixed, 2, "id")


def test_missing_id_without_auto_id(tmp_path: Path) -> None:
    path = write(tmp_path, "noid.jsonl", jsonl({"id": "a", "input": 1}, {"input": 2}))
    err = load_error(path)
    assert_located(err, path, 2, "id")
    assert "--auto-id" in str(err)


@pytest.mark.parametrize(
    ("line", "field", "token"),
    [
        ('{"id": "a", "input": 1, "expected": NaN}', "expected", "NaN"),
        ('{"id": "a", "input": [1, Infinity]}', "input[1]", "Infinity"),
        ('{"id": "a", "input": 1, "metadata": {"s": -Infinity}}', "metadata.s", "-Infinity"),
        ('{"id": "a", "input": 1, "expected": 1e999}', "expected", "1e999"),
    ],
)
def test_nan_and_infinity_are_rejected_naming_the_field(tmp_path: Path, line: str, field: str, token: str) -> None:
    path = write(tmp_path, "nan.jsonl", jsonl({"id": "z", "input": 0}) + line + "\n")
    err = load_error(path)
    assert_located(err, path, 2, field)
    assert f"{token} is not allowed" in str(err)


def test_nan_in_json_array_file(tmp_path: Path) -> None:
    path = write(tmp_path, "nan.json", '[\n{"id": "a", "input": 1},\n{"id": "b", "input": 1, "expected": NaN}\n]')
    assert_located(load_error(path), path, 3, "expected")


@pytest.mark.parametrize("split", ["validation", "val", "Test", 3])
def test_unknown_split_is_an_error_not_remapped(tmp_path: Path, split: object) -> None:
    path = write(tmp_path, "sp.jsonl", jsonl({"id": "a", "input": 1, "split": split}))
    err = load_error(path)
    assert_located(err, path, 1, "split")
    assert "train, dev, test" in str(err)


def test_git_lfs_pointer_says_git_lfs_pull() -> None:
    path = FIXTURES / "anagrams_samples.jsonl"
    err = load_error(path)
    assert_located(err, path, 1)
    assert "Git LFS pointer" in str(err) and "git lfs pull" in str(err) and "size 60081" in str(err)


def test_real_lfs_pointer_with_odd_suffix_is_still_named(tmp_path: Path) -> None:
    # the real openai/evals pointer (a copy of realdata's) under its odd stored name
    source = FIXTURES / "anagrams_samples.jsonl"
    path = write(tmp_path, "anagrams__samples.jsonl.LFS_POINTER", source.read_bytes())
    assert "git lfs pull" in str(load_error(path))


@pytest.mark.parametrize(
    ("record", "field", "needle"),
    [
        ({"id": 1.5, "input": 1}, "id", "string or an integer, got a number"),
        ({"id": True, "input": 1}, "id", "got a boolean"),
        ({"id": ["a"], "input": 1}, "id", "got an array"),
        ({"id": "  ", "input": 1}, "id", "empty"),
        ({"id": "a", "input": 1, "tags": "math"}, "tags", "array of non-empty strings, got a string"),
        ({"id": "a", "input": 1, "tags": [1, 2]}, "tags", "array of non-empty strings"),
        ({"id": "a", "input": 1, "metadata": [1]}, "metadata", "must be a JSON object, got an array"),
        ({"id": "a", "input": 1, "metadata": '{"x": 1}'}, "metadata", "write the object itself"),
        ({"id": "a"}, "input", "missing"),
    ],
)
def test_wrong_field_types(tmp_path: Path, record: dict[str, object], field: str, needle: str) -> None:
    path = write(tmp_path, "types.jsonl", jsonl({"id": "ok", "input": 0}, record))
    err = load_error(path)
    assert_located(err, path, 2, field)
    assert needle in str(err)


@pytest.mark.parametrize(("line", "kind"), [("[1, 2]", "an array"), ('"text"', "a string"), ("42", "a number")])
def test_line_that_is_not_an_object(tmp_path: Path, line: str, kind: str) -> None:
    path = write(tmp_path, "arr.jsonl", line + "\n")
    err = load_error(path)
    assert_located(err, path, 1)
    assert f"must be a JSON object, got {kind}" in str(err)


def test_json_array_element_that_is_not_an_object(tmp_path: Path) -> None:
    path = write(tmp_path, "arr.json", '[\n{"id": "a", "input": 1},\n"b"\n]')
    assert_located(load_error(path), path, 3)


def test_json_array_trailing_comma(tmp_path: Path) -> None:
    path = write(tmp_path, "tc.json", '[\n{"id": "a", "input": 1},\n]')
    err = load_error(path)
    assert_located(err, path, 3)
    assert "trailing comma" in str(err)


@pytest.mark.parametrize(
    ("name", "content"),
    [("empty.jsonl", ""), ("blank.jsonl", "\n  \n\r\n"), ("empty.json", "[]"), ("header.csv", "id,input\n")],
)
def test_file_without_cases_is_an_error(tmp_path: Path, name: str, content: str) -> None:
    path = write(tmp_path, name, content)
    err = load_error(path)
    assert_located(err, path, None)
    assert "no cases" in str(err)


def test_unknown_extension_lists_supported_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "cases.xlsx", "- id: a\n")
    err = load_error(path)
    assert_located(err, path, None)
    assert ".jsonl" in str(err) and ".json" in str(err) and ".csv" in str(err) and ".gz" in str(err)


def test_gz_name_without_gzip_data(tmp_path: Path) -> None:
    path = write(tmp_path, "fake.jsonl.gz", jsonl({"id": "a", "input": 1}))
    assert "not gzip-compressed" in str(load_error(path))


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    assert_located(load_error(path), path, None)


def test_bad_arguments_are_value_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "a.jsonl", jsonl({"id": "a", "input": 1}))
    with pytest.raises(ValueError, match="unknown case field"):
        load_cases(path, mapping={"question": "input"})
    with pytest.raises(ValueError, match="not all be zero"):
        load_cases(path, split_ratios=(0, 0, 0))


# --- real peer files --------------------------------------------------------------------------


def test_promptfoo_jsonl_is_read_without_a_map_and_a_map_picks_one_var() -> None:
    bank = load_cases(FIXTURES / "promptfoo_cases.jsonl")
    assert len(bank) == 2 and bank.dialect == "promptfoo"
    assert bank.cases[0].input == {"target_language": "French", "text": "Hello, world!"}
    assert bank.cases[0].expected == "Translate the following text to French: Hello, world!"
    assert bank.cases[0].metadata["promptfoo"]["assert"][0]["type"] == "equals"
    one_var = load_cases(FIXTURES / "promptfoo_cases.jsonl", mapping=parse_mapping("input=text"))
    assert one_var.cases[0].input == "Hello, world!"
    assert one_var.cases[0].metadata["target_language"] == "French"  # the other var, kept


def test_promptfoo_csv_joins_var_columns_into_input() -> None:
    mapping = parse_mapping("input=language+body,expected=__expected")  # restating a default is harmless
    bank = load_cases(FIXTURES / "promptfoo_simple_csv_tests.csv", mapping=mapping)
    assert len(bank) == 4
    second = bank.cases[1]
    assert second.input == {"language": "French", "body": "I'm hungry"}
    # promptfoo cells are text: the JSON var stays the text the prompt template receives
    assert second.metadata["style_config"] == '{"tone":"casual","length":"brief","formatting":{"bullets":true}}'
    assert not second.has_expected  # icontains:faim is a check, not an answer
    assert second.metadata["scorers"] == [{"name": "contains", "args": {"value": "faim", "casefold": True}}]
    assert len({case.id for case in bank.cases}) == 4


@pytest.mark.parametrize("suffix", ["csv", "json", "jsonl"])
def test_inspect_samples_in_every_format(suffix: str) -> None:
    bank = load_cases(FIXTURES / f"inspect_samples.{suffix}", mapping={"expected": "target"}, auto_id=True)
    (case,) = bank.cases
    assert bank.format == suffix
    assert (case.input, case.expected) == ("Say 'Hello, World'", "Hello, World")
    assert case.id == auto_case_id("Say 'Hello, World'")  # same id whatever the format
    assert case.metadata["label"] == "Hello, World" and case.metadata["extra"] == "data"
    expected_sandbox = "docker" if suffix == "jsonl" else ["docker", "compose.yaml"]
    assert case.metadata["sandbox"] == expected_sandbox


def test_openai_evals_samples_with_map() -> None:
    bank = load_cases(FIXTURES / "openai_test_match.jsonl", mapping=parse_mapping("expected=ideal"), auto_id=True)
    assert [case.expected for case in bank.cases] == ["time", "George Washington", "15"]
    assert bank.cases[0].input[1] == {"role": "user", "content": "Once upon a "}
    assert bank.name == "openai_test_match"


def test_openai_evals_samples_without_ids_get_ids_from_their_input() -> None:
    path = FIXTURES / "openai_test_match.jsonl"
    bank = load_cases(path, mapping={"expected": "ideal"})
    assert [case.id for case in bank.cases] == [auto_case_id(case.input) for case in bank.cases]


def test_invalid_json_in_array_file_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "syntax.json", '[\n  {"id": "a", "input": 1},\n  {"id": "b" "input": 2}\n]')
    err = load_error(path)
    assert_located(err, path, 3)
    assert err.column == 14 and "Expecting ',' delimiter" in str(err)


def test_csv_unnamed_column_with_data(tmp_path: Path) -> None:
    path = write(tmp_path, "u.csv", "id,input,\na,1,\nb,2,oops\n")
    assert [c.id for c in load_cases(write(tmp_path, "ok.csv", "id,input,\na,1,\n")).cases] == ["a"]
    err = load_error(path)
    assert_located(err, path, 3)
    assert err.column == 3 and "no name" in str(err)


def test_max_errors_collects_problems_in_file_order_and_stops_at_a_syntax_error(tmp_path: Path) -> None:
    from evalcore.loaders import CaseBankErrors

    path = write(
        tmp_path,
        "many.jsonl",
        '{"id": "a", "input": 1, "split": "nope"}\n{"id": "b", "input": 2}\n{"input": 3}\n{"id": "b", "input": 4}\n'
        '{"id": "c", "input": [\n{"id": "d"}\n',
    )
    with pytest.raises(CaseBankErrors) as caught:
        load_cases(path, max_errors=10)
    err = caught.value
    assert [e.line for e in err.errors] == [1, 3, 4, 5]  # the reader cannot go past line 5's bad JSON
    assert not err.truncated
    assert str(err).startswith(f"{path}:1") and str(err).endswith("(and 3 more problems)")
    # it is still the CaseBankError of the first problem, and survives pickling (process pools)
    assert isinstance(err, CaseBankError) and err.line == 1
    again = pickle.loads(pickle.dumps(err))
    assert [e.line for e in again.errors] == [1, 3, 4, 5] and str(again) == str(err)
    # the default stops at the first problem, as before
    with pytest.raises(CaseBankError) as first:
        load_cases(path)
    assert not isinstance(first.value, CaseBankErrors) and first.value.line == 1


def test_max_errors_must_be_positive(tmp_path: Path) -> None:
    path = write(tmp_path, "ok.jsonl", '{"id": "a", "input": 1}\n')
    with pytest.raises(ValueError, match="max_errors"):
        load_cases(path, max_errors=0)


@pytest.mark.parametrize(
    ("name", "body", "where"),
    [
        ("deep.jsonl", '{"id": "deep", "input": ' + "[" * 1500 + "]" * 1500 + "}\n", "deep.jsonl:1"),
        ("deep.json", '[{"id": "deep", "input": ' + "[" * 1500 + "]" * 1500 + "}]", "deep.json:1"),
        ("deep.csv", "id,input\ndeep," + "[" * 5000 + "]" * 5000 + "\n", "deep.csv:2:2: field 'input'"),
    ],
)
def test_json_nested_past_the_parsers_depth_is_a_file_line_error(tmp_path, name, body, where):
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(CaseBankError) as caught:
        load_cases(path)
    assert str(caught.value).startswith(f"{path.parent / where}") or where in str(caught.value)
    assert "nested too deeply" in str(caught.value)
