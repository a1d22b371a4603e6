"""Every writer of scorer specs (CLI, API, online rules, the admin) meets one check: a spec of
the wrong shape is a ``ScorerSpecError`` naming what is wrong, never an AttributeError (the API
fuzzer's ``null`` in an online rule's ``scorers`` was a 500)."""

from __future__ import annotations

import pytest

from evalcore.scorer_registry import ScorerSpecError, scorer_from_spec


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (None, "not NoneType"),
        (5, "not int"),
        (["exact_match"], "not list"),
        ({"args": {}}, "'name' is a string"),
        ({"name": 5}, "'name' is a string"),
        ({"name": " "}, "'name' is a string"),
        ({"name": "exact_match", "args": "x"}, "'args' is an object"),
    ],
)
def test_a_spec_of_the_wrong_shape_is_a_spec_error(spec: object, said: str) -> None:
    with pytest.raises(ScorerSpecError, match=said):
        scorer_from_spec(spec)  # type: ignore[arg-type]


def test_the_right_shapes_still_make_scorers() -> None:
    assert scorer_from_spec("exact_match").name == "exact_match"
    assert scorer_from_spec({"name": "exact_match", "args": None}).name == "exact_match"
