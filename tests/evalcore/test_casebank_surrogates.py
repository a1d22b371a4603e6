"""A case file holding a lone UTF-16 surrogate (a JSON escape ``\\ud83d`` without its low half) is
refused with its file, line and field: UTF-8 has no form for it, so no database can store the case
(the import failed with a bare ``UnicodeEncodeError`` naming only the file). A whole character,
escaped as a pair, loads as that character."""

from __future__ import annotations

import json

import pytest

from evalcore.loaders import CaseBankError, load_cases
from evalcore.loaders.stream import stream_cases


@pytest.mark.parametrize(
    ("text", "suffix", "where"),
    [
        (
            '{"id": "a", "input": "x"}\n{"id": "b", "input": "half \\ud83d emoji"}\n',
            "jsonl",
            "bank.jsonl:2: field 'input': holds a lone UTF-16 surrogate (U+D83D): ",
        ),
        (
            '{"id": "a", "input": [{"role": "user", "content": "x\\uDE00"}]}\n',
            "jsonl",
            "bank.jsonl:1: field 'input': holds a lone UTF-16 surrogate (U+DE00) at input[0].content",
        ),
        ('{"id": "a", "input": "x", "metadata": {"k": ["ok", "\\udc80"]}}\n', "jsonl", "at metadata.k[1]"),
        ('{"id": "a", "input": "x", "tags": ["t\\ud800"]}\n', "jsonl", "field 'tags': holds a lone UTF-16 surrogate"),
        ('{"id": "a\\ud83d", "input": "x"}\n', "jsonl", "field 'id'"),
        ('{"id": "a", "input": "x", "expected": {"k\\ud83d": 1}}\n', "jsonl", "at expected.'k\\ud83d' (a key)"),
        ('[{"id": "a", "input": "x"}, {"id": "b", "input": {"q": "\\ud83d"}}]', "json", "bank.json:1: field 'input'"),
        ('id,input,metadata\na,x,"{""k"": ""\\ud83d""}"\n', "csv", "at metadata.k"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_the_line_field_and_path(tmp_path, text, suffix, where):
    path = tmp_path / f"bank.{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CaseBankError) as caught:
        load_cases(path)
    message = str(caught.value)
    assert where in message, message
    assert "no database can store it" in message
    message.encode("utf-8")  # the message itself can be printed


def test_the_streaming_importer_refuses_it_too(tmp_path):
    path = tmp_path / "bank.jsonl"
    path.write_text('{"id": "a", "input": "x"}\n{"id": "b", "input": "\\ud83d"}\n', encoding="utf-8")
    stream = stream_cases(path)
    with pytest.raises(CaseBankError, match=r"bank\.jsonl:2: field 'input': holds a lone UTF-16 surrogate"):
        list(stream)


def test_an_escaped_pair_is_the_whole_character_and_loads(tmp_path):
    path = tmp_path / "bank.jsonl"
    path.write_text(json.dumps({"id": "a", "input": "😀", "expected": "\\ud83d is how JSON spells half"}) + "\n")
    assert "\\ud83d" in path.read_text()  # json.dumps escapes the emoji as its pair
    (case,) = load_cases(path).cases
    assert case.input == "😀" and case.expected == "\\ud83d is how JSON spells half"
