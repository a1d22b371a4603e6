"""The Nunjucks subset promptfoo assertion values use: ``{{ var }}`` and ``{{ var.path }}``, nothing executed."""

from __future__ import annotations

import pytest

from evalcore.loaders.nunjucks import UndefinedVariable, UnsupportedTemplate, has_template, render


def test_a_var_and_a_path_into_it_are_replaced() -> None:
    variables = {"topic": "photosynthesis", "user": {"name": "Ada", "langs": ["en", "fr"]}}
    assert render("Does this describe {{topic}} accurately?", variables) == (
        "Does this describe photosynthesis accurately?"
    )
    assert render("{{ user.name }} speaks {{ user.langs[1] }}", variables) == "Ada speaks fr"
    assert render("{{ user['name'] }}/{{ user.langs.length }}", variables) == "Ada/2"


def test_values_print_as_javascript_prints_them() -> None:
    variables = {"n": 1.0, "f": 0.5, "yes": True, "none": None, "items": ["a", 2, None], "obj": {"a": 1}}
    assert render("{{n}} {{f}} {{yes}} [{{none}}] [{{missing}}] {{items}} {{obj}}", variables) == (
        "1 0.5 true [] [] a,2, [object Object]"
    )
    assert render("{{ missing.deeper[3] }}", {}) == ""


def test_whitespace_control_and_comments() -> None:
    assert render("a   {{- x -}}   b{# note #}!", {"x": "X"}) == "aXb!"


@pytest.mark.parametrize(
    "template",
    [
        "{{ x | upper }}",
        "{% if x %}yes{% endif %}",
        "{{ x + 1 }}",
        "{{ x() }}",
        "{{ constructor.constructor('return process')() }}",
    ],
)
def test_anything_beyond_a_lookup_is_refused_not_evaluated(template: str) -> None:
    with pytest.raises(UnsupportedTemplate):
        render(template, {"x": "v"})


def test_text_without_a_template_is_left_alone() -> None:
    assert not has_template("plain {text} with braces")
    assert render("plain {text} with braces", {"text": "no"}) == "plain {text} with braces"


@pytest.mark.parametrize(
    ("template", "name"),
    [
        ("{{ missing }}", "missing"),
        ("a {{ user.age }} b", "user.age"),
        ("{{ user.langs[ 5 ] }}", "user.langs[5]"),
        ("{{ user.name.first }}", "user.name.first"),
        ("{{ none.field }}", "none.field"),
    ],
)
def test_strict_names_what_the_vars_do_not_hold_instead_of_printing_nothing(template: str, name: str) -> None:
    variables = {"user": {"name": "Ada", "langs": ["en"]}, "none": None}
    assert render(template, variables).strip() in {"a  b", ""}  # Nunjucks prints nothing
    with pytest.raises(UndefinedVariable) as raised:
        render(template, variables, strict=True)
    assert raised.value.name == name


def test_strict_still_prints_a_null_var_as_nothing() -> None:
    assert render("[{{ none }}]{{ user.langs.length }}", {"none": None, "user": {"langs": []}}, strict=True) == "[]0"
