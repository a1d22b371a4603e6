"""Where did B get worse: slices of a paired comparison (Holm-corrected) and the per-scorer
sign-flip test."""

from __future__ import annotations

import pytest

from evalcore.slices import PairedCase, compare_slices, holm, sign_flip_p


def test_holm_matches_the_step_down_by_hand():
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> kept non-decreasing: 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def regressed_on_multi_hop() -> list[PairedCase]:
    """60 multi-hop cases where B lost 30 (A passed all), 60 single-hop cases unchanged."""
    cases = []
    for i in range(60):
        cases.append(
            PairedCase(True, i >= 30, tags=("multi-hop",), split="dev", metadata={"level": "hard", "id": f"m{i}"})
        )
    for i in range(60):
        passed = i % 2 == 0
        cases.append(
            PairedCase(passed, passed, tags=("single-hop",), split="dev", metadata={"level": "easy", "id": f"s{i}"})
        )
    return cases


def test_a_slice_made_to_regress_is_flagged_first_and_said_in_words():
    rows = compare_slices(regressed_on_multi_hop())
    labels = [r.label for r in rows]
    # the id field has 120 distinct values: not a slice; split=dev holds every case: the headline
    assert "metadata.id" not in {r.dimension for r in rows}
    assert "split=dev" not in labels
    top = rows[0]
    assert top.label in ("tag=multi-hop", "metadata.level=hard")
    assert {labels[0], labels[1]} == {"tag=multi-hop", "metadata.level=hard"}
    assert top.significant and top.p_holm < 0.05 and top.interval is not None and top.interval.high < 0
    assert top.counts.n == 60 and top.counts.delta == pytest.approx(-0.5)
    assert top.contribution == pytest.approx(-30 / 120)
    assert top.sentence.startswith("B lost 50.0 points on ") and top.sentence.endswith("(60 cases)")
    unchanged = next(r for r in rows if r.label == "tag=single-hop")
    assert not unchanged.significant and unchanged.contribution == 0 and unchanged.sentence.startswith("no change")
    # Holm: the corrected p is never below the raw one, and equals m*p for the smallest
    assert all(r.p_holm >= r.p_value for r in rows)
    assert top.p_holm == pytest.approx(min(1.0, len(rows) * top.p_value))


def test_small_slices_and_unsliceable_fields_are_left_out():
    cases = [PairedCase(True, False, tags=("rare",), metadata={"nested": {"a": 1}, "flag": True})]
    cases += [PairedCase(True, True, tags=("common",), metadata={"nested": {"a": 2}, "flag": False}) for _ in range(5)]
    rows = compare_slices(cases, min_cases=2)
    assert "tag=rare" not in [r.label for r in rows]
    assert not any(r.dimension == "metadata.nested" for r in rows)
    assert [r.label for r in rows if r.dimension == "metadata.flag"] == ["metadata.flag=false"]
    assert compare_slices([]) == []


def test_sign_flip_p_tells_a_consistent_drop_from_noise():
    drop = [-0.4] * 30 + [0.0] * 10
    assert sign_flip_p(drop) < 0.001
    noise = [0.2, -0.2] * 20
    assert sign_flip_p(noise) > 0.5
    assert sign_flip_p([0.0, 0.0]) == 1.0 and sign_flip_p([]) == 1.0
    assert sign_flip_p(drop) == sign_flip_p(drop)  # fixed seed
