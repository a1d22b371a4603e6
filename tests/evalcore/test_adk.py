"""Google ADK eval-file import: every generation of the format, shape equivalence, bad files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from evalcore.jsonvalue import MISSING
from evalcore.loaders import adk_stem, is_adk_file
from evalcore.loaders.adk import load_adk_file
from evalcore.loaders.errors import CaseBankError
from evalcore.scorers.trajectory import ToolCalls
from evalcore.scoring import score_run
from evalcore.serial import to_record
from evalcore.types import Case, RunRecord

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "adk"
LEGACY = FIXTURES / "adk-python__home_automation_agent__simple_test2.test.json"
MIGRATED = FIXTURES / "simple_test2_migrated.test.json"
EVENTS = FIXTURES / "simple_test2_events.evalset.json"


def _turns(case: Case) -> int:
    if isinstance(case.input, dict) and "turns" in case.input:
        return len(case.input["turns"])
    return 0 if isinstance(case.input, dict) else 1


def _tool_call_total(case: Case) -> int | None:
    if case.expected is MISSING:
        return None
    turns = case.expected if isinstance(case.expected, list) else [case.expected]
    return sum(len(t["tool_calls"]) for t in turns)


# file -> [(case id, turns, expected tool calls in total or None when the case has no expectation)]
REAL_FILES = {
    "adk-python__conversation_scenario.test.json": [("CS-1", 0, None)],
    "adk-python__ecommerce_customer_service_agent__order_query.test.json": [
        ("tests/integration/fixture/ecommerce_customer_service_agent/order_query.test.json", 4, 7)
    ],
    "adk-python__hello_world_agent__roll_die.test.json": [
        ("tests/integration/fixture/hello_world_agent/roll_die.test.json", 3, 1)
    ],
    "adk-python__home_automation_agent__dependent_tool_calls.test.json": [
        ("tests/integration/fixture/home_automation_agent/test_files/dependent_tool_calls.test.json", 2, 2)
    ],
    "adk-python__home_automation_agent__simple_multi_turn_conversation.test.json": [
        ("tests/integration/fixture/home_automation_agent/test_files/simple_multi_turn_conversation.test.json", 2, 2)
    ],
    "adk-python__home_automation_agent__simple_test2.test.json": [
        ("adk-python__home_automation_agent__simple_test2", 1, 1)
    ],
    "adk-python__live_non_blocking_tool_agent.evalset.json": [
        ("background_task_scenario", 0, None),
        ("background_task_scripted", 2, None),
    ],
    "adk-python__trip_planner_agent__trip_inquiry.test.json": [("adk-python__trip_planner_agent__trip_inquiry", 2, 1)],
}


@pytest.mark.parametrize("name", sorted(REAL_FILES))
def test_real_adk_files_load_with_exact_case_counts(name: str) -> None:
    cases = load_adk_file(FIXTURES / name)
    got = [(c.id, _turns(c), _tool_call_total(c)) for c in cases]
    assert got == REAL_FILES[name]
    assert all("adk" in c.tags and c.metadata["source"] == "adk" and c.metadata["file"] == name for c in cases)


def test_every_real_eval_file_is_covered() -> None:
    eval_files = sorted(p.name for p in FIXTURES.glob("adk-python__*") if is_adk_file(p))
    assert eval_files == sorted(REAL_FILES)


def test_legacy_turn_list_is_one_multi_turn_conversation() -> None:
    (case,) = load_adk_file(FIXTURES / "adk-python__trip_planner_agent__trip_inquiry.test.json")
    assert case.input["turns"][0] == "Hi, who are you? What can you do?"
    assert case.tags == ["adk", "multi_turn"]
    assert case.metadata["adk_format"] == "legacy_turns"
    assert case.expected[0]["tool_calls"] == []
    assert case.expected[1]["tool_calls"] == [
        {"name": "transfer_to_agent", "arguments": {"agent_name": "indentify_agent"}}
    ]
    assert case.expected[1]["final_response"].startswith("Okay, I can help you analyze London and Paris")


def test_eval_set_turn_texts_and_null_final_response() -> None:
    (case,) = load_adk_file(FIXTURES / "adk-python__hello_world_agent__roll_die.test.json")
    assert case.input == {"turns": ["Hi who are you?", "What can you do?", "Can you roll a die with 6 sides"]}
    assert case.expected[2] == {"final_response": None, "tool_calls": [{"name": "roll_die", "arguments": {"sides": 6}}]}
    assert case.metadata["eval_set_id"] == "56540925-a5ff-49fe-a4e1-589fe78066f2"


def test_an_eval_sets_name_and_description_are_kept_in_each_cases_metadata() -> None:
    """So an ADK export of the imported set writes the source's back (issue 23)."""
    scenario, scripted = load_adk_file(FIXTURES / "adk-python__live_non_blocking_tool_agent.evalset.json")
    for case in (scenario, scripted):
        assert case.metadata["eval_set_id"] == case.metadata["eval_set_name"] == "live_non_blocking_tool_agent"
        assert case.metadata["eval_set_description"].startswith("Live eval cases for the non-blocking tool agent.")


def test_scenario_and_scripted_live_cases_have_no_expected_value() -> None:
    scenario, scripted = load_adk_file(FIXTURES / "adk-python__live_non_blocking_tool_agent.evalset.json")
    assert scenario.input["scenario"]["user_persona"] == "NOVICE"
    assert scenario.tags == ["adk", "conversation_scenario"]
    assert not scenario.has_expected and not scripted.has_expected
    assert scripted.input["turns"][1] == "While that runs, what is two plus two?"
    assert scripted.metadata["session_input"]["app_name"] == "live_non_blocking_tool_agent"


def test_the_three_call_shapes_give_identical_expected_values() -> None:
    (legacy,) = load_adk_file(LEGACY)
    (migrated,) = load_adk_file(MIGRATED)
    (events,) = load_adk_file(EVENTS)
    assert legacy.expected == migrated.expected == events.expected
    assert legacy.expected == {
        "final_response": "I have set the device_3 status to off.",
        "tool_calls": [
            {"name": "set_device_info", "arguments": {"location": "Bedroom", "device_id": "device_3", "status": "OFF"}}
        ],
    }
    assert legacy.input == migrated.input == events.input == "Turn off device_3 in the Bedroom."


@pytest.mark.parametrize(
    ("actual", "passes"),
    [
        (
            {"name": "set_device_info", "arguments": {"status": "OFF", "device_id": "device_3", "location": "Bedroom"}},
            True,
        ),
        (
            {"name": "set_device_info", "arguments": {"status": "ON", "device_id": "device_3", "location": "Bedroom"}},
            False,
        ),
    ],
)
async def test_the_three_call_shapes_score_identically(actual: dict, passes: bool) -> None:
    results = []
    for path in (LEGACY, MIGRATED, EVENTS):
        (case,) = load_adk_file(path)
        run = RunRecord(case_id=case.id, run_id="r", trace_id="r", output="ok", metadata={"tool_calls": [actual]})
        results.append([to_record(s) for s in await score_run(case, run, [ToolCalls()])])
    assert results[0] == results[1] == results[2]
    assert results[0][0]["passed"] is passes


async def test_multi_turn_trajectory_is_scored_turn_by_turn() -> None:
    (case,) = load_adk_file(FIXTURES / "adk-python__ecommerce_customer_service_agent__order_query.test.json")
    transcript = [{"final_response": "done", "tool_calls": turn["tool_calls"]} for turn in case.expected]
    run = RunRecord(case_id=case.id, run_id="r", trace_id="r", output=transcript)
    scores = await score_run(case, run, [ToolCalls()])
    assert scores[0].passed is True and scores[0].value == 1.0
    # every call made, but all in the last turn: each earlier turn misses its calls, the last has extras
    calls = [c for turn in case.expected for c in turn["tool_calls"]]
    late = [{"final_response": "done", "tool_calls": []} for _ in case.expected]
    late[-1]["tool_calls"] = calls
    scores = await score_run(case, dataclasses.replace(run, output=late), [ToolCalls()])
    assert scores[0].passed is False
    assert scores[0].explanation.startswith("turn 1 fails")
    assert scores[0].metadata["turns"][0]["passed"] is False


def test_is_adk_file_and_stem() -> None:
    assert is_adk_file("a/roll_die.test.json") and is_adk_file("x.EVALSET.json")
    assert not is_adk_file("test_config.json") and not is_adk_file("cases.jsonl") and not is_adk_file("x.json")
    assert adk_stem("dir/roll_die.test.json") == "roll_die"
    assert adk_stem("live.evalset.json") == "live"


def test_test_config_is_rejected_as_not_an_eval_file(tmp_path: Path) -> None:
    with pytest.raises(CaseBankError, match=r"test_config\.json \(evaluation criteria\), not an eval file") as info:
        load_adk_file(FIXTURES / "adk-python__hello_world_agent__test_config.json")
    assert info.value.path.endswith("adk-python__hello_world_agent__test_config.json")
    config = tmp_path / "test_config.json"
    config.write_text('{"criteria": {"tool_trajectory_avg_score": 1.0}}')
    with pytest.raises(CaseBankError, match="not an eval file"):
        load_adk_file(config)


def test_other_schema_with_adk_name_fails_naming_the_file() -> None:
    path = FIXTURES / "bad" / "promptfoo_style.test.json"
    with pytest.raises(CaseBankError) as info:
        load_adk_file(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert "not an ADK eval file" in message and "'tests'" in message


def test_git_lfs_pointer_fails_clearly() -> None:
    path = FIXTURES / "bad" / "lfs_pointer.evalset.json"
    with pytest.raises(CaseBankError, match="Git LFS pointer") as info:
        load_adk_file(path)
    assert info.value.path == str(path) and info.value.line == 1


def test_invalid_json_reports_line() -> None:
    with pytest.raises(CaseBankError, match="invalid JSON") as info:
        load_adk_file(FIXTURES / "bad" / "broken.test.json")
    assert info.value.line == 4


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CaseBankError, match="no such file"):
        load_adk_file(tmp_path / "nope.test.json")


def _write(tmp_path: Path, data: object, name: str = "x.evalset.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_case_with_both_conversation_and_scenario_is_rejected(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "eval_set_id": "s",
            "eval_cases": [
                {"eval_id": "a", "conversation": [], "conversation_scenario": {"starting_prompt": "hi"}},
            ],
        },
    )
    with pytest.raises(CaseBankError, match="exactly one of 'conversation' and 'conversation_scenario'") as info:
        load_adk_file(path)
    assert info.value.field == "eval_cases[0]"


def test_bad_tool_use_names_the_field(tmp_path: Path) -> None:
    invocation = {
        "user_content": {"parts": [{"text": "hi"}]},
        "intermediate_data": {"tool_uses": [{"args": {}}]},
    }
    path = _write(tmp_path, {"eval_set_id": "s", "eval_cases": [{"eval_id": "a", "conversation": [invocation]}]})
    with pytest.raises(CaseBankError, match="string 'name'") as info:
        load_adk_file(path)
    assert info.value.field == "eval_cases[0].conversation[0].intermediate_data.tool_uses[0]"


def test_duplicate_eval_ids_are_rejected(tmp_path: Path) -> None:
    case = {"eval_id": "a", "conversation_scenario": {"starting_prompt": "hi", "conversation_plan": "p"}}
    path = _write(tmp_path, {"eval_set_id": "s", "eval_cases": [case, case]})
    with pytest.raises(CaseBankError, match="duplicate case id 'a'"):
        load_adk_file(path)


def test_legacy_eval_set_items_are_one_case_each(tmp_path: Path) -> None:
    turn = {"query": "roll a d6", "expected_tool_use": [{"tool_name": "roll_die", "tool_input": {"sides": 6}}]}
    data = [
        {"name": "first", "data": [turn], "initial_session": {"app_name": "hello", "user_id": "u", "state": {}}},
        {"name": "second", "data": [turn, {"query": "again", "expected_tool_use": [], "reference": "ok"}]},
    ]
    first, second = load_adk_file(_write(tmp_path, data, "old.test.json"))
    assert (first.id, second.id) == ("first", "second")
    assert first.expected == {"final_response": None, "tool_calls": [{"name": "roll_die", "arguments": {"sides": 6}}]}
    assert first.metadata["session_input"]["app_name"] == "hello"
    assert second.input == {"turns": ["roll a d6", "again"]}
    assert first.metadata["adk_format"] == "legacy_eval_set"


def test_empty_list_and_scalar_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(CaseBankError, match="empty list"):
        load_adk_file(_write(tmp_path, [], "e.test.json"))
    with pytest.raises(CaseBankError, match="found a JSON int"):
        load_adk_file(_write(tmp_path, 3, "n.test.json"))
