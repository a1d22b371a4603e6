"""``parse_judge_answer``: every way a judge answer goes wrong has its own error kind."""

from __future__ import annotations

import json

import pytest

from evalcore.judge.parsing import AXES, JudgeParseError, JudgeVerdict, ParseErrorKind, parse_judge_answer
from evalcore.serial import to_record

GOOD = {axis: {"score": 4, "reason": f"{axis} ok"} for axis in AXES}
GOOD_TEXT = json.dumps(GOOD)


def expect_error(text: str | None, kind: ParseErrorKind) -> JudgeParseError:
    with pytest.raises(JudgeParseError) as info:
        parse_judge_answer(text)
    assert info.value.kind is kind
    assert info.value.raw == (text or "")
    return info.value


def test_plain_json_object() -> None:
    verdict = parse_judge_answer(GOOD_TEXT)
    assert verdict.scores == dict.fromkeys(AXES, 4)
    assert verdict.reasons["grounding"] == "grounding ok"
    assert verdict.judge_pass is None


def test_code_fence_with_language_tag() -> None:
    assert parse_judge_answer(f"```json\n{GOOD_TEXT}\n```").scores["accuracy"] == 4


def test_code_fence_without_language_tag_and_prose_around() -> None:
    text = f"Here is my grading.\n```\n{GOOD_TEXT}\n```\nLet me know if you need more."
    assert parse_judge_answer(text).scores["calibration"] == 4


def test_prose_before_and_trailing_text_after_the_object() -> None:
    text = f"Sure! My assessment: {GOOD_TEXT} That's all. {{not json}}"
    assert parse_judge_answer(text).scores == dict.fromkeys(AXES, 4)


def test_braces_and_quotes_inside_strings_do_not_break_matching() -> None:
    answer = dict(GOOD)
    answer["accuracy"] = {"score": 5, "reason": 'the answer says "x = {1, 2}" and } is fine'}
    text = "Verdict: " + json.dumps(answer) + " trailing }"
    verdict = parse_judge_answer(text)
    assert verdict.scores["accuracy"] == 5
    assert verdict.reasons["accuracy"] == 'the answer says "x = {1, 2}" and } is fine'


def test_a_stray_brace_in_prose_does_not_hide_the_answer() -> None:
    text = "Use { carefully. " + GOOD_TEXT
    assert parse_judge_answer(text).scores["accuracy"] == 4


def test_other_objects_before_the_answer_are_skipped() -> None:
    text = 'Context: {"note": "ignore me"} Answer: ' + GOOD_TEXT
    assert parse_judge_answer(text).scores["accuracy"] == 4


def test_numbers_as_strings_and_integral_floats() -> None:
    answer = {axis: {"score": "3", "reason": "r"} for axis in AXES}
    answer["grounding"] = {"score": 2.0, "reason": "r"}
    answer["calibration"] = {"score": " 5 ", "reason": "r"}
    verdict = parse_judge_answer(json.dumps(answer))
    assert verdict.scores == {"accuracy": 3, "completeness": 3, "grounding": 2, "hazard_avoidance": 3, "calibration": 5}


def test_scores_wrapper_bare_numbers_and_loose_axis_keys() -> None:
    text = json.dumps(
        {
            "scores": {
                "Accuracy": 5,
                "completeness": {"score": 4},
                "grounding": {"score": 3, "reason": None},
                "Hazard Avoidance": {"score": 2, "reason": "r"},
                "calibration": {"score": 1, "reason": "r"},
            },
            "pass": False,
        }
    )
    verdict = parse_judge_answer(text)
    assert verdict.scores == {"accuracy": 5, "completeness": 4, "grounding": 3, "hazard_avoidance": 2, "calibration": 1}
    assert verdict.reasons["completeness"] == ""
    assert verdict.judge_pass is False


def test_judge_pass_is_recorded_only_when_boolean() -> None:
    assert parse_judge_answer(json.dumps({**GOOD, "pass": True})).judge_pass is True
    assert parse_judge_answer(json.dumps({**GOOD, "pass": "yes"})).judge_pass is None


def test_empty_text_is_its_own_kind() -> None:
    expect_error("", ParseErrorKind.EMPTY)
    expect_error("   \n", ParseErrorKind.EMPTY)
    expect_error(None, ParseErrorKind.EMPTY)


def test_prose_only_is_no_json() -> None:
    error = expect_error("The answer is accurate and complete. I'd give it a 4.", ParseErrorKind.NO_JSON)
    assert "no JSON" in str(error)


def test_truncated_json() -> None:
    text = GOOD_TEXT[: len(GOOD_TEXT) // 2]
    expect_error(text, ParseErrorKind.TRUNCATED)


def test_truncated_inside_an_unclosed_code_fence() -> None:
    expect_error("```json\n" + GOOD_TEXT[:-10], ParseErrorKind.TRUNCATED)


def test_balanced_but_invalid_json() -> None:
    text = "{'accuracy': {'score': 4, 'reason': 'single quotes'}}"
    expect_error(text, ParseErrorKind.INVALID_JSON)


@pytest.mark.parametrize("bad", [6, -1, 100])
def test_out_of_range_score_is_a_schema_violation(bad: int) -> None:
    answer = {**GOOD, "completeness": {"score": bad, "reason": "r"}}
    error = expect_error(json.dumps(answer), ParseErrorKind.SCHEMA)
    assert "completeness" in error.detail
    assert "outside 0..5" in error.detail


def test_missing_axis_is_a_schema_violation() -> None:
    answer = {k: v for k, v in GOOD.items() if k != "grounding"}
    error = expect_error(json.dumps(answer), ParseErrorKind.SCHEMA)
    assert error.detail == "missing axis 'grounding'"


@pytest.mark.parametrize("bad", [3.5, "four", True, None, [4]])
def test_non_integer_score_is_a_schema_violation(bad: object) -> None:
    answer = {**GOOD, "accuracy": {"score": bad, "reason": "r"}}
    expect_error(json.dumps(answer), ParseErrorKind.SCHEMA)


def test_axis_without_score_key_is_a_schema_violation() -> None:
    answer = {**GOOD, "accuracy": {"reason": "forgot the score"}}
    error = expect_error(json.dumps(answer), ParseErrorKind.SCHEMA)
    assert "no 'score'" in error.detail


def test_object_without_any_axis_is_a_schema_violation() -> None:
    expect_error('{"verdict": "good"}', ParseErrorKind.SCHEMA)


def test_verdict_round_trips_through_dict() -> None:
    verdict = parse_judge_answer(json.dumps({**GOOD, "pass": True}))
    again = JudgeVerdict.from_record(json.loads(json.dumps(to_record(verdict))))
    assert again == verdict


def test_corrupt_stored_verdict_is_rejected() -> None:
    with pytest.raises(JudgeParseError) as info:
        JudgeVerdict.from_record({"scores": {"accuracy": 9}})
    assert info.value.kind is ParseErrorKind.SCHEMA


def test_an_echoed_prompt_is_no_verdict() -> None:
    """An endpoint that echoes its input sends back the prompt's own answer template (every score
    0, every reason "..."): read as a verdict it failed every case with "0 judge errors"."""
    from evalcore.judge.prompt import RUBRIC_V2, data_block

    case = data_block({"question_or_task": "2+2?", "reference_answer": "4", "answer_to_grade": "4"})
    echoed = "You said: " + RUBRIC_V2.user.replace("{case}", case.text).replace("{rubric}", "accuracy: ...")
    with pytest.raises(JudgeParseError) as caught:
        parse_judge_answer(echoed)
    assert caught.value.kind is ParseErrorKind.SCHEMA and "echoed its instructions" in str(caught.value)
    # a real answer whose reasons are short, or a scores-only answer, is still read
    short = {axis: {"score": 4, "reason": "ok"} for axis in AXES}
    assert parse_judge_answer(json.dumps(short)).scores == dict.fromkeys(AXES, 4)
    assert parse_judge_answer(json.dumps(dict.fromkeys(AXES, 3))).scores == dict.fromkeys(AXES, 3)
