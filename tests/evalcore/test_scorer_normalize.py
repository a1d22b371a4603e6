"""Text scorers compare text, not code points (bh-46), and an empty needle is no evidence (bh-47).

An answer equal to the expected value in another Unicode normal form (``café`` composed vs ``e`` +
U+0301) failed ``exact_match`` and ``contains`` with an explanation showing two identical strings.
Both now take a ``normalize`` option, ``"NFC"`` for a new spec and recorded in it; a spec stored
before the option existed rebuilds with it off, so a rescore of an old run scores as it did.
``contains`` with an expected ``""`` passed any output; it is a scorer error now, never a pass.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers import Contains, ExactMatch, ScoreContext, Scorer, ScorerSpecError
from evalcore.types import Case, RunRecord, Score

REPROS = Path(__file__).resolve().parents[1] / "fixtures" / "repros"
BH46 = [json.loads(line) for line in (REPROS / "bh-46-unicode-forms.jsonl").read_text().splitlines()]


def another_form(text: str, form: str) -> str:
    """What the repro's target (``bh3-forms``) answers: the expected text in another form."""
    if form == "NFD":
        return unicodedata.normalize("NFD", text)
    if form == "NBSP":
        return text.replace(" ", "\u00a0")
    if form == "ZWSP":
        return text[:2] + "\u200b" + text[2:]
    if form == "LIG":
        return text.replace("fi", "\ufb01")
    return text


async def scored(scorer: Scorer, output: Any, expected: Any) -> Score:
    case = Case(id="c", input="q", expected=expected)
    run = RunRecord(case_id="c", run_id="r:c", trace_id="r:c", output=output)
    result = await scorer.score(ScoreContext(case=case, output=output, run=run))
    assert isinstance(result, Score)
    return result


@pytest.mark.parametrize(
    ("spec", "passing"),
    [
        ("exact_match", {"nfd", "same"}),
        ("contains", {"nfd", "same"}),
        ("exact_match:normalize=NFKC", {"nfd", "same", "nbsp", "lig"}),
        ("contains:normalize=nfkc", {"nfd", "same", "nbsp", "lig"}),
        ("exact_match:normalize=none", {"same"}),
        ("contains:normalize=null", {"same"}),
    ],
)
async def test_bh46_the_normal_form_decides_which_forms_are_equal(spec: str, passing: set[str]) -> None:
    scorer = scorer_from_spec(spec)
    verdicts = {}
    for row in BH46:
        output = another_form(row["expected"], row["metadata"]["form"])
        verdicts[row["id"]] = (await scored(scorer, output, row["expected"])).passed
    assert {case for case, ok in verdicts.items() if ok} == passing
    assert verdicts["zwsp"] is False  # a zero-width space is a character in every form


async def test_a_failure_that_another_form_would_pass_says_so() -> None:
    nfd = unicodedata.normalize("NFD", "café crème")
    off = await scored(ExactMatch(normalize=None), nfd, "café crème")
    assert off.passed is False and "normalize=NFC matches" in (off.explanation or "")
    lig = await scored(ExactMatch(), "ﬁnal offer", "final offer")
    assert "normalize=NFKC matches" in (lig.explanation or "")
    missing = await scored(Contains(normalize=None), f"the {nfd}!", "café crème")
    assert "normalize=NFC matches" in (missing.explanation or "")
    plain = await scored(ExactMatch(), "Paris", "Lyon")
    assert plain.explanation == "output 'Paris' != expected 'Lyon'"  # no hint where none applies


async def test_normalize_composes_with_strip_and_casefold() -> None:
    assert (await scored(ExactMatch(casefold=True), unicodedata.normalize("NFD", " CAFÉ "), "café")).passed
    assert (await scored(Contains(casefold=True), unicodedata.normalize("NFD", "UN CAFÉ"), "café")).passed
    assert (await scored(ExactMatch(), {"k": unicodedata.normalize("NFD", "é")}, {"k": "é"})).passed


def test_a_new_spec_records_nfc_and_a_stored_one_keeps_its_behaviour() -> None:
    assert ExactMatch().spec().args["normalize"] == "NFC" and ExactMatch().spec().version == "3"
    assert Contains().spec().args["normalize"] == "NFC" and Contains().spec().version == "2"
    for new in ("exact_match", {"name": "exact_match", "args": {}}, {"name": "contains"}):
        assert scorer_from_spec(new).normalize == "NFC"  # type: ignore[attr-defined]
    # what a run stored before the option existed: rebuilt to compare code points, as it did
    old_exact = {"name": "exact_match", "args": {"strip": True, "casefold": False}, "version": "2"}
    old_contains = {"name": "contains", "args": {"value": None, "mode": "all", "casefold": False}, "version": "1"}
    assert scorer_from_spec(old_exact).normalize is None  # type: ignore[attr-defined]
    assert scorer_from_spec(old_contains).normalize is None  # type: ignore[attr-defined]
    # a stored spec of today keeps what it recorded
    stored = json.loads(json.dumps({"name": "exact_match", **_record(ExactMatch(normalize="NFKC"))}))
    assert scorer_from_spec(stored).normalize == "NFKC"  # type: ignore[attr-defined]


def _record(scorer: Scorer) -> dict[str, Any]:
    spec = scorer.spec()
    return {"args": spec.args, "version": spec.version}


async def test_a_rescore_of_a_stored_old_spec_gives_the_old_verdict() -> None:
    nfd = unicodedata.normalize("NFD", "café")
    old = scorer_from_spec({"name": "exact_match", "args": {"strip": True, "casefold": False}, "version": "2"})
    assert (await scored(old, nfd, "café")).passed is False
    assert (await scored(scorer_from_spec("exact_match"), nfd, "café")).passed is True


def test_an_unknown_normal_form_is_a_spec_error() -> None:
    with pytest.raises(ScorerSpecError, match="normalize must be one of NFC, NFKC, NFD, NFKD or none"):
        scorer_from_spec("exact_match:normalize=NFX")
    with pytest.raises(ScorerSpecError, match="normalize must be one of"):
        Contains(normalize="latin")


# -- bh-47: an empty needle is no evidence -----------------------------------------------------------


@pytest.mark.parametrize(("output", "expected"), [("d", ""), ("", ""), ("abc", ["a", ""])])
async def test_contains_with_an_empty_expected_text_is_a_scorer_error_never_a_pass(output: Any, expected: Any) -> None:
    for mode in ("all", "any"):
        with pytest.raises(ValueError, match="is an empty string") as caught:
            await scored(Contains(mode=mode), output, expected)
        assert "every output contains it" in str(caught.value) and "exact_match" in str(caught.value)


def test_contains_with_an_empty_value_option_is_refused_when_built() -> None:
    with pytest.raises(ScorerSpecError, match=r"the value option is an empty string \(needle 2 of 2\)"):
        Contains(value=["x", ""])
    with pytest.raises(ScorerSpecError, match="the value option is an empty string"):
        scorer_from_spec('contains:value=""')


async def test_bh47_a_run_over_the_repro_set_gives_no_verdict_for_an_empty_expected_text() -> None:
    """The repro's cases through the engine: ``empty`` (output ``d``) and ``empty-ok`` (output
    ``""``) are scorer errors (the case errored), never passed; ``given`` passes."""
    from evalcore import InMemoryEvalStore, run_eval
    from evalcore.loaders import load_cases

    bank = load_cases(REPROS / "bh-47-null-expected.jsonl")
    report = await run_eval(
        bank.cases, lambda x, ctx: ctx.case.metadata["out"], ["contains"], sink=(store := InMemoryEvalStore())
    )
    results = {r.case.id: r for r in next(iter(store.results.values())).values()}
    for case_id in ("empty", "empty-ok"):
        (score,) = results[case_id].scores
        assert score.passed is None and "empty string" in (score.error or ""), score
    assert results["given"].scores[0].passed is True
    assert report.passed == 1


@pytest.mark.parametrize("output", ["d", "", "anything at all"])
async def test_regex_with_an_empty_expected_pattern_is_a_scorer_error_never_a_pass(output: str) -> None:
    from evalcore.scorers import Regex

    with pytest.raises(ScorerSpecError, match="the expected value is empty: it matches every output"):
        await scored(Regex(), output, "")
    with pytest.raises(ScorerSpecError, match="the pattern option is empty"):
        Regex(pattern="")


async def test_regex_fullmatch_with_an_empty_pattern_still_asks_for_an_empty_answer() -> None:
    from evalcore.scorers import Regex

    assert (await scored(Regex(fullmatch=True), "", "")).passed is True
    assert (await scored(Regex(fullmatch=True), "d", "")).passed is False
