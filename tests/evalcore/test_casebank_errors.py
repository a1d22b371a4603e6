"""Case banks say exactly what is wrong: truncated files (repro ho-08) and files that are not
UTF-8 (repro bh-01), with the siblings of each kind."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
from pathlib import Path

import pytest

from evalcore.loaders import CaseBankError, load_cases
from evalcore.loaders.adk import load_adk_file

REPROS = Path(__file__).resolve().parent.parent / "fixtures" / "repros"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def load_error(path: Path, **kwargs: object) -> CaseBankError:
    with pytest.raises(CaseBankError) as info:
        load_cases(path, **kwargs)  # type: ignore[arg-type]
    return info.value


# --- ho-08: a file that ends inside a value ---------------------------------------------------


def test_ho08_truncated_json_array_says_where_the_file_ends() -> None:
    path = REPROS / "ho-08-truncated-json-array.json"
    err = load_error(path, mapping={"input": "question", "expected": "query"}, auto_id=True)
    lines = path.read_text().splitlines()
    assert (err.line, err.column) == (len(lines), len(lines[-1]) + 1)  # just past the last character
    assert str(err) == (
        f"{path}:115:19: file ends early (truncated) at line 115, column 19, inside a string; "
        "the case starting on line 114 is incomplete"
    )


def test_ho08_nothing_is_imported(tmp_path: Path) -> None:
    """The CLI imports nothing from a truncated file (one transaction per file)."""
    import os
    import sys

    from tests.support.databases import subprocess_db_env

    env = {**os.environ, **subprocess_db_env(tmp_path / "t.sqlite3")}
    evalsite = str(Path(sys.executable).with_name("evalsite"))
    path = REPROS / "ho-08-truncated-json-array.json"
    done = subprocess.run(
        [evalsite, "import", str(path), "--map", "input=question,expected=query", "--auto-id"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "file ends early (truncated) at line 115, column 19" in done.stderr
    count = (
        "from apps.evals.models import EvalCase, EvalSet; "
        "print('counts', EvalSet.objects.count(), EvalCase.objects.count())"
    )
    listing = subprocess.run(
        [evalsite, "shell", "-c", count], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert "counts 0 0" in listing.stdout


TRUNCATED = [
    # (file name, content, line, column, what was open)
    ("array.json", '[{"id": "a", "input": 1},\n {"id": "b", "input": "x', 2, 25, "inside a string"),
    ("newline.json", '[{"id": "a", "input": 1},\n {"id": "b", "input": "x\n', 2, 25, "inside a string"),
    ("escape.json", '[{"id": "a", "input": "x\\u00', 1, 29, "inside a string"),
    ("number.json", '[{"id": "a", "input": 1.', 1, 25, "inside a number"),
    ("literal.json", '[{"id": "a", "input": tr', 1, 25, "inside a literal"),
    ("object.json", '[{"id": "a", "input": 1', 1, 24, "inside an object"),
    ("key.json", '[{"id": "a", "inp', 1, 18, "inside a string"),
    ("after-comma.json", '[{"id": "a", "input": 1},\n', 1, 26, "inside an array, after a ','"),
    ("no-bracket.json", '[{"id": "a", "input": 1}\n', 1, 25, "inside an array"),
    ("wrapper.json", '{"name": "x", "cases": [{"id": "a", "input": 1}, {"id": "b"', 1, 60, "inside an object"),
    ("wrapper-end.json", '{"cases": [{"id": "a", "input": 1}]', 1, 36, "inside an object"),
    ("last.jsonl", '{"id": "a", "input": 1}\n{"id": "b", "input": "x', 2, 24, "inside a string"),
    ("last-blank.jsonl", '{"id": "a", "input": 1}\n{"id": "b", "input": [1, 2\n\n  \n', 2, 27, "inside an array"),
    ("gzipped.jsonl.gz", '{"id": "a", "input": 1}\n{"id": "b", "input": {"k"', 2, 26, "inside an object"),
]


@pytest.mark.parametrize(("name", "content", "line", "column", "what"), TRUNCATED, ids=[t[0] for t in TRUNCATED])
def test_a_file_that_ends_inside_a_value_says_it_is_truncated(
    tmp_path: Path, name: str, content: str, line: int, column: int, what: str
) -> None:
    path = write(tmp_path, name, content)
    err = load_error(path)
    assert (err.line, err.column) == (line, column)
    assert f"file ends early (truncated) at line {line}, column {column}, {what}" in str(err)


def test_a_jsonl_line_cut_short_before_the_end_is_not_called_truncated(tmp_path: Path) -> None:
    path = write(tmp_path, "pretty.jsonl", '{\n  "id": "a", "input": 1\n}\n')
    err = load_error(path)
    assert (err.line, err.column) == (1, 2)
    assert "truncated" not in str(err)
    assert "the line ends inside an object (JSONL needs each JSON object whole on one line" in str(err)


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("ctl.json", '[{"id": "a", "input": "x\ny"}]', "Invalid control character at line 1, column 25 (a raw line"),
        ("ctl.jsonl", '{"id": "a", "input": "x\ty"}\n', "Invalid control character at line 1, column 24 (a raw tab"),
        ("comma.json", '[{"id": "a", "input": 1,}]', "Expecting property name enclosed in double quotes"),
        ("bad.jsonl", '  {"id": "b", "input": }\n', "Expecting value"),
    ],
)
def test_json_syntax_messages_are_never_cut_short(tmp_path: Path, name: str, content: str, needle: str) -> None:
    err = load_error(write(tmp_path, name, content))
    assert needle in str(err)
    assert not re.search(r"\bat$", err.reason), err.reason  # the position a message ends on is there
    assert "truncated" not in str(err)


def test_a_truncated_adk_file_says_so_too(tmp_path: Path) -> None:
    path = write(tmp_path, "one.test.json", '[\n  {"query": "hi", "expected_tool_use": [], "reference": "he')
    with pytest.raises(CaseBankError) as info:
        load_adk_file(path)
    assert "file ends early (truncated) at line 2, column 60, inside a string" in str(info.value)


# --- bh-01: a file that is not UTF-8 ----------------------------------------------------------


def records(*rows: dict[str, str]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def iconv_command(message: str) -> str:
    match = re.search(r"re-save it as UTF-8: `([^`]+)`", message)
    assert match, message
    return match.group(1)


def run_advice(message: str, cwd: Path) -> None:
    """Run the exact command the message gives, as a user would paste it."""
    subprocess.run(iconv_command(message), shell=True, cwd=cwd, check=True, timeout=60)


def test_bh01_gbk_is_named_gbk_and_the_advice_gives_the_right_text(tmp_path: Path) -> None:
    path = tmp_path / "bh-01-gbk.jsonl"
    path.write_bytes((REPROS / "bh-01-gbk.jsonl").read_bytes())
    err = load_error(path)
    message = str(err)
    assert (err.line, err.column) == (1, 24)
    assert "GBK / GB18030 (Simplified Chinese)" in message and "cp1252" not in message
    assert f"`iconv -f GB18030 -t UTF-8 {path} > {tmp_path / 'bh-01-gbk.utf8.jsonl'}`" in message
    assert "今天天气怎么样？" in message  # the line as that encoding reads it
    run_advice(message, tmp_path)
    (case,) = load_cases(tmp_path / "bh-01-gbk.utf8.jsonl").cases
    assert (case.input, case.expected) == ("今天天气怎么样？", "晴天")


TEXTS = {
    "gbk": ("GBK / GB18030 (Simplified Chinese)", "请把这句话翻译成英文：今天天气很好。", "天气晴朗"),
    "shift_jis": ("Shift-JIS (Japanese; Windows cp932)", "東京は日本の首都です。富士山はどこですか？", "とうきょう"),
    "cp1252": ("cp1252 (Windows Western European)", "Quelle est la capitale de l’État? café “naïve”", "Paris — oui"),
    "latin-1": ("cp1252 (Windows Western European)", "Où se trouve la tour Eiffel? Ça coûte combien?", "à Paris"),
    "cp1251": ("cp1251 (Windows Cyrillic)", "Какая столица России? Назовите город.", "Москва"),
}


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "json", "jsonl.gz"])
@pytest.mark.parametrize("encoding", list(TEXTS))
def test_a_legacy_encoding_is_named_and_the_advice_converts_it_faithfully(
    tmp_path: Path, encoding: str, suffix: str
) -> None:
    family, question, answer = TEXTS[encoding]
    rows = [{"id": "ascii", "input": "plain", "expected": "text"}, {"id": "x", "input": question, "expected": answer}]
    if suffix == "csv":
        text = "id,input,expected\n" + "".join(f"{r['id']},{r['input']},{r['expected']}\n" for r in rows)
    elif suffix == "json":
        text = json.dumps(rows, ensure_ascii=False, indent=1)
    else:
        text = records(*rows)
    path = write(tmp_path, f"bank.{suffix}", text.encode(encoding))  # latin-1 text is cp1252's too
    message = str(load_error(path))
    assert f"it looks like {family} text (detected by charset-normalizer" in message
    run_advice(message, tmp_path)
    converted = load_cases(tmp_path / f"bank.utf8.{suffix}")
    assert [(c.id, c.input, c.expected) for c in converted.cases] == [
        (r["id"], r["input"], r["expected"]) for r in rows
    ]


def test_no_guess_when_no_code_page_reads_as_a_language(tmp_path: Path) -> None:
    # latin-1 text holding a C1 control byte (0x81): cp1252 cannot decode it, and every code page
    # that can turns the accented letters into letters no one language writes together
    text = records({"id": "a", "input": "Où se trouve la tour Eiffel? Ça coûte combien? \x81", "expected": "à Paris"})
    message = str(load_error(write(tmp_path, "l.jsonl", text.encode("latin-1"))))
    assert "could not be identified with confidence (no guess" in message and "looks like" not in message


def test_no_guess_when_the_detector_is_unsure(tmp_path: Path) -> None:
    # one accented letter: cp1250, cp1252, cp775... all fit and read it differently
    path = write(tmp_path, "short.jsonl", records({"id": "b", "input": "café"}).encode("cp1252"))
    message = str(load_error(path))
    assert "byte 0xE9 at byte offset 25" in message
    assert "could not be identified with confidence (no guess" in message
    assert "looks like" not in message and "iconv -f THAT_ENCODING" in message


def test_a_file_mixing_utf8_and_another_encoding_gets_no_conversion_advice(tmp_path: Path) -> None:
    content = (
        records({"id": "a", "input": "naïve café résumé déjà vu, über straße"}).encode()
        + records({"id": "b", "input": "crème"}).encode("cp1252")
        + records({"id": "c", "input": "ça va très bien"}).encode()
    )
    message = str(load_error(write(tmp_path, "mixed.jsonl", content)))
    assert "mixes encodings" in message and "would corrupt its UTF-8 part" in message
    assert "looks like" not in message and "re-save" not in message


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        # two JSONL files joined with `cat`: the second one's BOM starts line 2
        ("joined.jsonl", b'{"id": "a", "input": 1}\n\xef\xbb\xbf{"id": "b", "input": 2}\n', ":2:1:"),
        ("joined.json", b'[{"id": "a", "input": 1}, \xef\xbb\xbf{"id": "b", "input": 2}]', ":1:27:"),
    ],
)
def test_a_byte_order_mark_inside_a_file_is_named_as_such(tmp_path, name, content, where):
    """A BOM at the very start is skipped; one further in is named (U+FEFF), not a bare
    "Expecting value" that leaves the user staring at a line that looks right."""
    path = write(tmp_path, name, content)
    with pytest.raises(CaseBankError) as caught:
        load_cases(path)
    message = str(caught.value)
    assert f"{path}{where}" in message
    assert "U+FEFF" in message and "byte-order mark" in message
    # the same files without the inner mark load
    fixed = write(tmp_path, f"fixed-{name}", content.replace(b"\xef\xbb\xbf", b""))
    assert [c.id for c in load_cases(fixed).cases] == ["a", "b"]
