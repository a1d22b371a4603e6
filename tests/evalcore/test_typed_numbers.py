"""Numbers people type are ASCII digits, bounded: ``\\d``, ``int()`` and ``float()`` also take
other scripts' digits (``"١"`` is 1) and any length (issue 23 siblings, rs3-08 / rs3-15 kind)."""

from __future__ import annotations

import argparse

import pytest

from evalcore.gates import GateError, parse_gate
from evalcore.loaders import nunjucks
from evalcore.loaders.inspect_log import _SAMPLE_MEMBER
from evalcore.loaders.promptfoo import _CONFIG_COLUMN
from evalcore.loaders.promptfoo_asserts import _FROM_STRING
from evalcore.otel.messages import _INDEXED
from evalcore.typed_numbers import MAX_DIGITS, ascii_integer, ascii_number

NOT_ASCII = ["\u0661", "\u0665", "\uff15", "\u00b2", "\u0967", "\u0661\u0662"]
"""Arabic-Indic 1 and 5, fullwidth 5, superscript 2, Devanagari 1, Arabic-Indic 12."""


@pytest.mark.parametrize("text", [*NOT_ASCII, "", " ", "1.0", "1e3", "--5", "9" * (MAX_DIGITS + 1), "9" * 5000])
def test_an_integer_option_refuses_what_is_not_ascii_digits(text) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        ascii_integer(text)


def test_an_integer_option_takes_ascii_digits() -> None:
    assert ascii_integer("8") == 8 and ascii_integer(" 12 ") == 12 and ascii_integer("-3") == -3
    assert ascii_integer("9" * MAX_DIGITS) == int("9" * MAX_DIGITS)


@pytest.mark.parametrize("text", [*NOT_ASCII, "\u0660.\u0665", "nan", "inf", "-Infinity", "1e999", "", "0x10"])
def test_a_number_option_refuses_what_is_not_a_finite_ascii_number(text) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        ascii_number(text)


def test_a_number_option_takes_ascii_numbers() -> None:
    assert [ascii_number(t) for t in ("0.5", "2", "-3", ".25", "1e-3", "+4.")] == [0.5, 2.0, -3.0, 0.25, 0.001, 4.0]


@pytest.mark.parametrize("digit", NOT_ASCII[:3])
def test_patterns_reading_numbers_from_typed_or_imported_text_are_ascii(digit) -> None:
    with pytest.raises(GateError):
        parse_gate(f"pass_rate>={digit}")
    assert parse_gate("pass_rate>=0.9").threshold == 0.9
    with pytest.raises(GateError):
        parse_gate("n>=" + "9" * 5000)
    assert _SAMPLE_MEMBER.match(f"samples/s1_epoch_{digit}.json") is None
    assert _SAMPLE_MEMBER.match("samples/s1_epoch_2.json") is not None
    assert _CONFIG_COLUMN.match(f"__config:__expected{digit}:threshold") is None
    assert _INDEXED.match(f"gen_ai.prompt.{digit}.content") is None
    assert _INDEXED.match("gen_ai.prompt.0.content") is not None
    assert _FROM_STRING.match(f"similar({digit}):x") is None  # not read as a threshold
    assert _FROM_STRING.match("similar(0.8):x").group(3) == "0.8"
    assert nunjucks._STEP.fullmatch(f"[{digit}]") is None and nunjucks._STEP.fullmatch("[1]") is not None
