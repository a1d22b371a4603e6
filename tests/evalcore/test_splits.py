"""Split assignment (stable hash buckets), split names, ratios, and the held-out guard."""

from __future__ import annotations

import hashlib
import json
import pickle
from collections import Counter
from pathlib import Path

import pytest

from evalcore.errors import InvalidInputError
from evalcore.loaders import load_cases
from evalcore.splits import (
    SPLITS,
    HeldOutError,
    assign_split,
    check_split_aliases,
    filter_split,
    guard_split,
    parse_split_aliases,
    parse_split_ratios,
    split_counts,
    validate_split,
)
from evalcore.types import Case


def test_splits_are_the_three_canonical_names() -> None:
    assert SPLITS == ("train", "dev", "test")


@pytest.mark.parametrize("name", ["train", "dev", "test"])
def test_validate_split_accepts_known_names(name: str) -> None:
    assert validate_split(name) == name


@pytest.mark.parametrize("name", ["validation", "val", "Test", "", " dev", "all"])
def test_validate_split_rejects_and_lists_valid_names(name: str) -> None:
    with pytest.raises(ValueError, match="valid splits are: train, dev, test"):
        validate_split(name)


def test_assign_split_follows_the_documented_formula() -> None:
    # Pins the algorithm: a change here would move every stored case to another split.
    for case_id in ("q1", "q2", "über", "007"):
        digest = hashlib.sha256(f"qa\x00{case_id}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        expected = "train" if u < 0.6 else "dev" if u < 0.8 else "test"
        assert assign_split("qa", case_id) == expected


def test_adding_cases_never_moves_existing_ones() -> None:
    before = {f"case-{i}": assign_split("set", f"case-{i}") for i in range(1000)}
    after = {f"case-{i}": assign_split("set", f"case-{i}") for i in range(3000)}
    assert all(after[case_id] == split for case_id, split in before.items())


def test_adding_cases_to_a_file_keeps_loaded_splits(tmp_path: Path) -> None:
    def bank(ids: list[str]) -> dict[str, str | None]:
        path = tmp_path / "qa.jsonl"
        path.write_text("".join(json.dumps({"id": i, "input": i}) + "\n" for i in ids))
        return {case.id: case.split for case in load_cases(path).cases}

    small = bank([f"q{i}" for i in range(200)])
    big = bank([f"new{i}" for i in range(300)] + [f"q{i}" for i in range(200)][::-1])
    assert {case_id: big[case_id] for case_id in small} == small


@pytest.mark.parametrize("ratios", [(0.6, 0.2, 0.2), (0.8, 0.1, 0.1), (1, 1, 1)])
def test_ratios_are_respected_within_two_percent(ratios: tuple[float, float, float]) -> None:
    counts = Counter(assign_split("ratio-set", f"id-{i}", ratios) for i in range(10_000))
    total = sum(ratios)
    for name, share in zip(SPLITS, ratios, strict=True):
        assert abs(counts[name] / 10_000 - share / total) < 0.02, (name, counts)


def test_zero_ratio_split_is_never_chosen() -> None:
    assert {assign_split("s", str(i), (1, 0, 0)) for i in range(2000)} == {"train"}
    assert "test" not in {assign_split("s", str(i), (0.5, 0.5, 0)) for i in range(2000)}
    assert {assign_split("s", str(i), (0, 0, 5)) for i in range(500)} == {"test"}


def test_set_name_changes_the_assignment() -> None:
    ids = [str(i) for i in range(200)]
    assert [assign_split("a", i) for i in ids] != [assign_split("b", i) for i in ids]


@pytest.mark.parametrize("ratios", [(1, 1), (1, -1, 1), (0, 0, 0), (1, float("nan"), 1), ("a", 1, 1)])
def test_bad_ratios_raise(ratios: tuple[object, ...]) -> None:
    with pytest.raises(ValueError):
        assign_split("s", "x", ratios)  # type: ignore[arg-type]


def test_explicit_split_wins_over_hash(tmp_path: Path) -> None:
    ids = [f"c{i}" for i in range(100)]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps({"id": i, "input": 1, "split": "test"}) + "\n" for i in ids))
    loaded = load_cases(path)
    assert {case.split for case in loaded.cases} == {"test"}
    assert {assign_split("s", i) for i in ids} != {"test"}  # the hash alone would have spread them


@pytest.mark.parametrize(
    ("text", "ratios"),
    [("60/20/20", (0.6, 0.2, 0.2)), ("0.7,0.15,0.15", (0.7, 0.15, 0.15)), (" 1 : 1 : 2 ", (0.25, 0.25, 0.5))],
)
def test_parse_split_ratios(text: str, ratios: tuple[float, float, float]) -> None:
    assert parse_split_ratios(text) == pytest.approx(ratios)


@pytest.mark.parametrize(("text", "needle"), [("60/40", "three numbers"), ("a/b/c", "not a number"), ("0/0/0", "zero")])
def test_parse_split_ratios_errors(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_split_ratios(text)


def test_guard_refuses_test_without_allow_test() -> None:
    with pytest.raises(HeldOutError, match="--allow-test") as info:
        guard_split("test", allow_test=False)
    assert info.value.split == "test"
    guard_split("test", allow_test=True)


def test_guard_treats_all_as_held_out() -> None:
    with pytest.raises(HeldOutError, match="--allow-test"):
        guard_split("all", allow_test=False)
    guard_split("all", allow_test=True)


@pytest.mark.parametrize("split", ["train", "dev"])
def test_guard_lets_train_and_dev_through(split: str) -> None:
    guard_split(split, allow_test=False)


def test_guard_rejects_unknown_split_even_with_allow_test() -> None:
    with pytest.raises(ValueError, match="train, dev, test, all"):
        guard_split("validation", allow_test=True)


@pytest.mark.parametrize("split", ["test", "all"])
def test_held_out_error_pickles(split: str) -> None:
    err = pickle.loads(pickle.dumps(HeldOutError("held out", split=split)))
    assert (type(err), str(err), err.split) == (HeldOutError, "held out", split)


def test_held_out_error_state_without_a_split_reads_as_test() -> None:
    err = HeldOutError("held out", split="all")
    for state in (None, {}):
        err.__setstate__(state)  # a pickle made before the split was recorded
        assert err.split == "test"


def test_filter_split_and_counts() -> None:
    cases = [Case("a", 1, split="train"), Case("b", 2, split="test"), Case("c", 3, split="train"), Case("d", 4)]
    assert [c.id for c in filter_split(cases, "train")] == ["a", "c"]
    assert filter_split(cases, "dev") == []
    assert [c.id for c in filter_split(cases, "all")] == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="choose one of"):
        filter_split(cases, "val")
    assert split_counts(cases) == {"train": 2, "dev": 0, "test": 1, "unsplit": 1}


def test_split_aliases_parse_pairs_skip_blanks_and_name_each_bad_item():
    assert parse_split_aliases(None) == {} and parse_split_aliases("  ") == {}
    assert parse_split_aliases(" test = dev ,, validate=test ,") == {"test": "dev", "validate": "test"}
    for text, message in [
        ("validate", "split alias 'validate': expected NAME=SPLIT, e.g. validate=test"),
        ("=test", "split alias '=test': expected NAME=SPLIT, e.g. validate=test"),
        ("validate=", "split alias 'validate=': expected NAME=SPLIT, e.g. validate=test"),
        ("a=b=test", "split alias 'a=b=test': 'b=test' is no split (splits: train, dev, test)"),
        ("validate=holdout", "split alias 'validate=holdout': 'holdout' is no split (splits: train, dev, test)"),
        ("x=dev, x=test", "split alias 'x=test': 'x' is aliased twice"),
    ]:
        with pytest.raises(InvalidInputError) as caught:
            parse_split_aliases(text)
        assert str(caught.value) == message


def test_split_aliases_given_as_a_mapping_are_checked_and_copied():
    given = {"validate": "test"}
    checked = check_split_aliases(given)
    assert checked == given and checked is not given
    assert check_split_aliases(None) == {}
    for bad in ({"validate": "holdout"}, {"": "dev"}, {3: "dev"}):
        with pytest.raises(InvalidInputError) as caught:
            check_split_aliases(bad)
        assert str(caught.value).endswith("the target must be one of train, dev, test")
        assert str(caught.value).startswith(f"split alias {next(iter(bad))!r}=")
