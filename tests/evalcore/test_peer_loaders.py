"""Other tools' case files (promptfoo, Inspect, OpenAI evals, Langfuse, Parquet / Arrow) read by the one loader.

The real files come from ``shared/realdata`` (SOURCES.md there names repo, path and commit) and
from the copies in ``examples/peers``; bad files are written by each test, so the bytes fed to
the loader are in the test.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from evalcore.loaders import CaseBankError, auto_case_id, iter_cases, load_cases, parse_mapping
from evalcore.scorer_registry import scorer_from_spec
from tests.support.realdata import REALDATA

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "examples" / "peers"
PROMPTFOO = REALDATA / "promptfoo"
INSPECT = REALDATA / "inspect_ai"
OPENAI = REALDATA / "openai_evals"
needs_realdata = pytest.mark.skipif(not REALDATA.is_dir(), reason=f"no real peer data at {REALDATA}")


def error_of(path: Path, **kwargs: object) -> CaseBankError:
    with pytest.raises(CaseBankError) as info:
        load_cases(path, **kwargs)  # type: ignore[arg-type]
    return info.value


# --- promptfoo --------------------------------------------------------------------------------


@needs_realdata
def test_a_promptfoo_config_maps_its_assertions_to_scorer_specs_and_names_the_rest() -> None:
    bank = load_cases(PROMPTFOO / "simple-test__promptfooconfig.yaml")
    assert (bank.format, bank.dialect, len(bank)) == ("yaml", "promptfoo", 5)
    exact, substring, is_json, unmapped, judged = bank.cases
    # YAML 1.2, as promptfoo reads it: `body: Yes` is the text "Yes", not a boolean
    assert exact.input == "Yes" and exact.expected == "Yarr"
    assert exact.metadata["scorers"] == [{"name": "exact_match", "args": {"strip": False}}]
    assert exact.metadata["promptfoo"]["description"] == "Check for exact match"
    assert substring.metadata["scorers"] == [{"name": "contains", "args": {"value": "grub", "casefold": True}}]
    assert is_json.metadata["scorers"][0]["args"]["label"] == "is_json"
    assert unmapped.metadata["unscored_assertions"] == ["javascript", "python", "similar"]
    assert "scorers" not in unmapped.metadata and not unmapped.has_expected
    # llm-rubric -> the judge; the $ref assertion is resolved from the config's assertionTemplates
    assert judged.metadata["scorers"] == [
        {"name": "rubric_judge", "args": {"rubric": "Is spoken like a pirate"}},
        {"name": "contains", "args": {"value": "arrr", "casefold": True}},
    ]
    assert [w.split(" have ")[0] for w in bank.warnings] == [
        "1 'javascript' assertion(s)",
        "1 'python' assertion(s)",
        "1 'similar' assertion(s)",
    ]
    for case in bank.cases:  # every spec builds the scorer it names
        for spec in case.metadata.get("scorers", []):
            scorer_from_spec(spec)


@needs_realdata
def test_promptfoo_getting_started_keeps_both_vars_as_the_input() -> None:
    bank = load_cases(PROMPTFOO / "getting-started__promptfooconfig.yaml")
    assert [case.input for case in bank.cases] == [
        {"language": "French", "input": "Hello world"},
        {"language": "Spanish", "input": "Where is the library?"},
    ]
    assert [case.id for case in bank.cases] == [auto_case_id(case.input) for case in bank.cases]
    assert bank.cases[1].metadata["scorers"][0]["args"] == {"value": "Dónde está la biblioteca", "casefold": True}


@needs_realdata
def test_promptfoo_csv_expected_columns_become_assertions() -> None:
    bank = load_cases(PROMPTFOO / "simple-test__tests.csv")
    assert (bank.format, bank.dialect, len(bank)) == ("csv", "promptfoo", 3)
    assert [case.input for case in bank.cases] == ["Hello world", "I'm hungry", "Output the story of your life in json"]
    assert bank.cases[0].metadata["unscored_assertions"] == ["javascript"]  # fn:... is promptfoo's javascript
    assert bank.cases[2].metadata["scorers"][0]["args"]["fn"].endswith(".is_json")
    assert "2 'javascript' assertion(s)" in bank.warnings[0]


@needs_realdata
def test_promptfoo_jsonl_tests_read_as_the_config_would() -> None:
    bank = load_cases(PROMPTFOO / "jsonl-test-cases__cases.jsonl")
    assert bank.dialect == "promptfoo" and bank.cases[1].expected.endswith("Spanish: Hello, world!")


def test_a_config_reads_file_tests_relative_to_itself(tmp_path: Path) -> None:
    shutil.copytree(PEERS / "promptfoo" / "csv-tests", tmp_path / "translate")
    bank = load_cases(tmp_path / "translate" / "promptfooconfig.yaml")
    assert bank.name == "translate"  # a promptfooconfig.yaml is named by its folder
    assert len(bank) == 4 and bank.cases[3].input["language"] == "Pirate"
    assert bank.cases[3].metadata["scorers"][0]["args"] == {"value": "grub", "casefold": True}
    absolute = tmp_path / "elsewhere.yaml"
    absolute.write_text(f"tests:\n  - file://{tmp_path}/translate/*.csv\n")
    assert load_cases(absolute, set_name="translate").cases == bank.cases


def test_an_uploaded_config_cannot_name_files_on_the_server() -> None:
    upload = io.BytesIO(b"tests:\n  - file:///etc/*.csv\n")
    with pytest.raises(CaseBankError) as info:
        load_cases(upload, name="promptfooconfig.yaml")
    assert info.value.line == 2 and "cannot name other files" in str(info.value)


def test_promptfoo_csv_special_columns_and_defaults(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "q,__expected1,__expected2,__description,__metadata:topic,__metadata:tags[],__prefix\n"
        'hi,"contains-any:a,b",not-contains:x,chat,greeting,"x, y",>> \n'
    )
    (tmp_path / "promptfooconfig.yaml").write_text(
        "defaultTest:\n  vars: {lang: en}\n  assert:\n    - type: regex\n      value: '^h'\n"
        "tests:\n  - file://*.csv\n  - vars: {q: [one, two]}\n"
        "    assert:\n      - type: starts-with\n        value: o\n"
    )
    bank = load_cases(tmp_path / "promptfooconfig.yaml")
    first, one, two = bank.cases
    assert first.input == {"q": "hi", "lang": "en"}
    assert first.metadata["topic"] == "greeting" and first.metadata["tags"] == ["x", "y"]
    assert first.metadata["promptfoo"]["description"] == "chat"
    assert first.metadata["promptfoo"]["options"] == {"prefix": ">> "}
    assert first.metadata["scorers"] == [
        {"name": "regex", "args": {"pattern": "^h", "strip": False}},
        {"name": "contains", "args": {"value": ["a", "b"], "mode": "any", "casefold": False}},
    ]
    assert first.metadata["unscored_assertions"] == ["not-contains"]
    assert (one.input, two.input) == ({"q": "one", "lang": "en"}, {"q": "two", "lang": "en"})  # a list var expands
    assert one.metadata["scorers"][1] == {"name": "regex", "args": {"pattern": r"\Ao", "strip": False}}


def test_map_picks_one_promptfoo_var_and_ids_stay_stable(tmp_path: Path) -> None:
    path = tmp_path / "tests.yaml"
    path.write_text(
        "- vars: {question: '2+2?', style: terse}\n  assert: [{type: equals, value: '4'}]\n"
        "- vars: {question: '2+2?', style: terse}\n  assert: [{type: contains, value: '4'}]\n"
    )
    bank = load_cases(path)
    ids = [case.id for case in bank.cases]
    assert ids == [auto_case_id({"question": "2+2?", "style": "terse"}), ids[0] + "-2"]  # same vars: -2
    mapped = load_cases(path, mapping=parse_mapping("input=question"))
    assert mapped.cases[0].input == "2+2?" and mapped.cases[0].metadata["style"] == "terse"
    assert [case.id for case in mapped.cases] == ids  # ids come from the vars, whatever the mapping
    assert list(iter_cases(path)) == bank.cases


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "message"),
    [
        ("bad.yaml", "tests:\n  - vars: {q: 1}\n  - vars: [1, 2]\n", 3, "vars", "'vars' must be an object"),
        ("bad.yaml", "tests:\n  - vars: {q: 1\n", 3, None, "invalid YAML"),
        (
            "bad.yaml",
            "tests:\n  - vars: {q: 1}\n    assert:\n      - $ref: '#/nope/x'\n",
            2,
            "assert[0]",
            "names nothing",
        ),
        ("bad.yaml", "tests: file://missing.csv\n", 1, "tests", "no such file"),
        ("bad.yaml", "prompts: [hi]\n", None, "tests", "no 'tests'"),
        ("bad.csv", "q,__threshold\nhi,high\n", 2, "__threshold", "must be a number"),
        ("bad.yaml", "tests:\n  - vars: {q: .inf}\n", 2, "vars", "JSON"),
    ],
)
def test_a_bad_promptfoo_file_names_file_line_and_field(
    tmp_path: Path, name: str, text: str, line: int | None, field: str | None, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    err = error_of(path)
    assert (err.path, err.line, err.field) == (str(path), line, field)
    assert message in str(err)


# --- Inspect ----------------------------------------------------------------------------------


@needs_realdata
@pytest.mark.parametrize("suffix", ["csv", "json", "jsonl"])
def test_inspect_datasets_load_without_a_map_in_every_format(suffix: str) -> None:
    mcq = load_cases(INSPECT / f"test_dataset__samples-mcq.{suffix}")
    (case,) = mcq.cases
    assert (mcq.dialect, case.input, case.expected) == ("inspect", "Which is the smallest number?", "A")
    assert case.metadata["choices"] == [str(n) for n in range(1, 11)]  # the CSV's "1,2,...,10" too
    assert case.id == auto_case_id("Which is the smallest number?")
    md = load_cases(INSPECT / f"test_dataset__samples-md.{suffix}").cases[0]
    assert {k: md.metadata[k] for k in ("name", "age", "foo")} == {"name": "jim", "age": 42, "foo": "bar"}


@needs_realdata
def test_inspect_chat_inputs_and_a_real_duplicate() -> None:
    bank = load_cases(INSPECT / "_examples__security_guide.jsonl")
    assert len(bank) == 16 and bank.cases[0].input == [
        {"role": "user", "content": "How do I prevent SQL Injection attacks?"}
    ]
    assert len(load_cases(INSPECT / "langchain__dataset.json")) == 3
    # Inspect's own example holds the same sample twice (lines 40 and 45): refused, by line
    err = error_of(INSPECT / "_examples__bias_detection.jsonl")
    assert err.line == 45 and "same input and expected value as line 40" in str(err)
    # a file in its own layout still needs --map
    qa = load_cases(INSPECT / "_examples__biology_qa.jsonl", mapping=parse_mapping("input=question,expected=answer"))
    assert qa.dialect is None and qa.cases[0].id == "q1" and qa.cases[0].expected == "Leprosy"


def test_inspect_target_reads_as_text_and_bad_metadata_is_located(tmp_path: Path) -> None:
    good = tmp_path / "d.jsonl"
    good.write_text('{"input": "1+1", "target": 2, "id": 7}\n{"input": "x", "target": ["a", 1]}\n')
    first, second = load_cases(good).cases
    assert (first.id, first.expected, second.expected) == ("7", "2", ["a", "1"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "a", "target": "b"}\n{"input": "c", "target": "d", "metadata": "{oops"}\n')
    err = error_of(bad)
    assert (err.line, err.field) == (2, "metadata") and "not JSON" in str(err)


def test_a_map_replaces_the_layouts_default(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"input": "q", "target": "t", "label": "L"}]))
    (case,) = load_cases(path, mapping=parse_mapping("expected=label")).cases
    assert case.expected == "L" and case.metadata["target"] == "t"


def test_a_canonical_file_is_never_read_as_a_peers(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "input": "q", "expected": "e", "target": "t"}\n')
    bank = load_cases(path)
    assert bank.dialect is None and bank.cases[0].metadata == {"target": "t"}


# --- OpenAI evals, Langfuse ---------------------------------------------------------------------


@needs_realdata
@pytest.mark.parametrize(
    ("name", "count"),
    [("test_match", 3), ("match_backwards", 4), ("test_fuzzy_match", 3), ("logic", 10)],
)
def test_openai_evals_samples(name: str, count: int) -> None:
    bank = load_cases(OPENAI / f"{name}_samples__from_README.jsonl")
    assert (bank.dialect, len(bank)) == ("openai_evals", count)
    assert all(isinstance(case.input, list) and case.input[0]["role"] for case in bank.cases)
    if name == "test_fuzzy_match":
        assert bank.cases[1].expected == ["Season 11", "11"]  # several accepted answers


@needs_realdata
def test_an_openai_evals_lfs_pointer_says_so() -> None:
    err = error_of(OPENAI / "anagrams__samples.jsonl.LFS_POINTER", file_format="jsonl")
    assert "Git LFS pointer" in str(err)


def test_langfuse_items_from_the_api_export_and_from_jsonl(tmp_path: Path) -> None:
    bank = load_cases(PEERS / "langfuse" / "dataset-items.json")
    assert (bank.dialect, [c.id for c in bank.cases]) == ("langfuse", ["cap-fr", "cap-au", "cap-mm"])
    fr, au, mm = bank.cases
    assert fr.input == {"question": "What is the capital of France?"} and fr.expected == "Paris"
    assert au.metadata["trap"] == "Sydney" and au.metadata["langfuse"]["sourceTraceId"] == "trace-7f3a"
    assert mm.tags == ["archived"] and "sourceTraceId" not in mm.metadata["langfuse"]
    lines = tmp_path / "items.jsonl"
    lines.write_text('{"id": "i1", "input": "hi", "expected_output": "hello", "metadata": null}\n{"id": "i2"}\n')
    err = error_of(lines)
    assert (err.line, err.field) == (2, "input")


# --- Parquet / Arrow ------------------------------------------------------------------------------


def test_a_hugging_face_parquet_file_loads_with_a_map() -> None:
    path = PEERS / "huggingface" / "biology_qa.parquet"
    bank = load_cases(path, mapping=parse_mapping("input=question,expected=answer"))
    assert (bank.format, len(bank), bank.cases[0].input) == (
        "parquet",
        20,
        "Hansen's disease is more commonly known by which name?",
    )
    err = error_of(path)
    assert (err.line, err.field) == (1, "input") and "question" in str(err)  # lists the columns present


@pytest.mark.parametrize("kind", ["stream", "file", "feather"])
def test_arrow_files_in_every_ipc_layout(tmp_path: Path, kind: str) -> None:
    table = pa.table({"id": ["a", "b"], "q": ["x", None], "meta": [{"k": 1}, {"k": 2}], "n": [1.5, float("nan")]})
    path = tmp_path / ("t.feather" if kind == "feather" else "data-00000-of-00001.arrow")
    if kind == "feather":
        feather.write_feather(table, path)
    else:
        with pa.OSFile(str(path), "wb") as sink:
            opener = ipc.new_stream if kind == "stream" else ipc.new_file
            with opener(sink, table.schema) as writer:
                writer.write_table(table)
    err = error_of(path, mapping=parse_mapping("input=q"))
    assert (err.line, err.field) == (2, "n") and "non-finite number nan" in str(err)  # by row and column
    # a null cell is an absent field: row 2 has no input
    err = error_of(path, mapping=parse_mapping("input=q,metadata=meta,expected=n"))
    assert (err.line, err.field) == (2, "n")
    ok = tmp_path / "ok.parquet"
    pq.write_table(table.slice(0, 1), ok)
    (case,) = load_cases(ok, mapping=parse_mapping("input=q,metadata=meta,expected=n")).cases
    assert (case.id, case.input, case.expected, case.metadata) == ("a", "x", 1.5, {"k": 1})


def test_a_file_that_is_not_parquet_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    path.write_bytes(b"id,input\na,b\n")
    assert "not a readable Parquet file" in str(error_of(path))
