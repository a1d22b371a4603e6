"""The text diff marks a difference of Unicode normal form (repro bh-46), as it marks a no-break
space or a zero-width space: two texts that look identical say why they differ."""

from __future__ import annotations

import unicodedata

from evalcore.diff import diff_texts
from evalcore.diff.text import COMBINING_MARKER, normal_form_of


def test_a_canonical_difference_is_named_and_its_combining_marks_are_shown_on_a_dotted_circle():
    composed = "café crème"
    decomposed = unicodedata.normalize("NFD", composed)
    diff = diff_texts(composed, decomposed)
    assert not diff.identical and diff.normal_form_only == "NFC"
    assert diff.normal_forms == ("NFC (composed)", "NFD (decomposed)")
    changed = [s for s in diff.segments if s.changed]
    assert [(s.expected_visible, s.actual_visible) for s in changed] == [
        ("café", f"cafe{COMBINING_MARKER}\u0301"),
        ("crème", f"cre{COMBINING_MARKER}\u0300me"),
    ]
    assert all(s.form_differs == "NFC" for s in changed)
    # the texts as they are stay untouched (copying them gives what the target wrote)
    assert "".join(s.actual for s in diff.segments) == decomposed


def test_a_compatibility_difference_names_the_character_and_its_code_point():
    diff = diff_texts("final offer", "\ufb01nal offer")
    assert diff.normal_form_only == "NFKC"
    (changed,) = [s for s in diff.segments if s.changed]
    assert changed.actual_visible == "⟨ﬁ U+FB01⟩nal" and changed.expected_visible == "final"


def test_other_differences_are_not_called_a_form():
    assert diff_texts("New York", "New\u00a0York").normal_form_only == ""  # whitespace: its own marker ⍽
    assert diff_texts("Paris", "Pa\u200bris").normal_form_only == ""  # a zero-width space is a character
    lyon = diff_texts("café", "Lyon")
    assert lyon.normal_form_only == "" and all(COMBINING_MARKER not in s.actual_visible for s in lyon.segments)
    # a combining mark in text that differs for another reason is left alone (Hindi, Thai, Arabic...)
    hindi = diff_texts("नमस्ते दुनिया", "नमस्ते संसार")
    assert all(COMBINING_MARKER not in s.expected_visible + s.actual_visible for s in hindi.segments)
    assert normal_form_of("plain") == "NFC (composed)"
