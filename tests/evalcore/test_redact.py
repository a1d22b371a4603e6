def test_a_nul_character_is_stored_as_the_replacement_character():
    """PostgreSQL's text and jsonb cannot hold U+0000 (a target's output holding one failed the
    run's writes there): every stored string has it replaced by U+FFFD, on every backend."""
    from evalcore.redact import NUL_REPLACEMENT, redact, redact_text

    assert redact_text("a\x00b", []) == f"a{NUL_REPLACEMENT}b"
    value = {"out\x00": ["x\x00", {"y": "\x00"}], "n": 1}
    assert redact(value, []) == {f"out{NUL_REPLACEMENT}": [f"x{NUL_REPLACEMENT}", {"y": NUL_REPLACEMENT}], "n": 1}
    assert redact({"literal": "\\u0000 is how JSON spells it"}, []) == {"literal": "\\u0000 is how JSON spells it"}
