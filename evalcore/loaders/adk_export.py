"""Cases out as a Google ADK eval set (``*.evalset.json``), the inverse of :mod:`evalcore.loaders.adk`.

The document is ``{"eval_set_id", "name", "description", "eval_cases": [...]}`` with one eval case
per case (``eval_id`` = the case id), its conversation built from the case:

* input: a text is one user turn; ``{"turns": [text, ...]}`` several; a scenario case
  (``{"scenario": {...}}``, or ``{"conversation_scenario": {...}}``) a ``conversation_scenario`` in
  ADK's field names (its initial state as ``session_input.state``); any other input is one turn
  holding its JSON text;
* expected: ADK's expectation shape (``{"final_response", "tool_calls": [{"name", "arguments"}]}``,
  a list of them for several turns) becomes each invocation's ``final_response`` and
  ``intermediate_data.tool_uses``; any other expected value becomes the final response (its text,
  or its JSON text) with no tool use; no expected value, invocations with the user's turn only;
* metadata: ``session_input``, ``final_session_state`` and ``rubrics`` when the case has them; a
  conversation case's ``initial_state`` is written as ``session_input.state``.

The document's ``eval_set_id``, ``name`` and ``description`` are the caller's: for a set imported
from one ADK eval set, the source's (kept in each case's metadata by the loader), else the set's.

Reading the file back with :func:`evalcore.loaders.load_cases` gives the same ids, inputs and
expected values for cases in ADK's shapes (what an ADK import holds); tags, splits and other
metadata have no place in ADK's schema and are not written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from evalcore.conversations import ADK_SCENARIO_NAMES, is_scenario_input
from evalcore.jsonvalue import MISSING, Missing
from evalcore.types import Case

__all__ = ["adk_eval_case", "adk_eval_set_chunks"]

_EXPECTATION_KEYS = frozenset({"final_response", "tool_calls", "rubric"})
_KEPT_METADATA = ("session_input", "final_session_state", "rubrics")


def _content(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"text": text}]}


def _texts(input_value: Any) -> list[str]:
    """The user's turns of a case input."""
    if isinstance(input_value, str):
        return [input_value]
    if (
        isinstance(input_value, dict)
        and "turns" in input_value
        and set(input_value) <= {"turns", "initial_state"}  # a conversation case's (its state: session_input)
        and isinstance(input_value["turns"], list)
        and input_value["turns"]
        and all(isinstance(turn, str) for turn in input_value["turns"])
    ):
        return list(input_value["turns"])
    return [json.dumps(input_value, ensure_ascii=False)]


def _is_expectation(value: Any) -> bool:
    if not isinstance(value, dict) or not value or not set(value) <= _EXPECTATION_KEYS:
        return False
    calls = value.get("tool_calls", [])
    final = value.get("final_response")
    rubric = value.get("rubric")
    return (
        (final is None or isinstance(final, str))
        and (rubric is None or isinstance(rubric, str))
        and isinstance(calls, list)
        and all(isinstance(call, dict) and isinstance(call.get("name"), str) for call in calls)
    )


def _expectations(expected: Any, turns: int) -> list[dict[str, Any] | None]:
    """One expectation per turn (``None``: the turn states none)."""
    if expected is MISSING:
        return [None] * turns
    if (
        isinstance(expected, dict)
        and isinstance(expected.get("turns"), list)
        and set(expected) <= {"turns", "final_state"}
    ):
        expected = expected["turns"]  # a conversation case's expected turns (its final state: final_session_state)
        if not any(expected):
            return [None] * turns
        expected = [e if e else {"final_response": None, "tool_calls": []} for e in expected]
    if turns > 1 and isinstance(expected, list) and len(expected) == turns and all(map(_is_expectation, expected)):
        return list(expected)
    if _is_expectation(expected):
        return [*([None] * (turns - 1)), expected]
    text = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
    return [*([None] * (turns - 1)), {"final_response": text, "tool_calls": []}]


def _invocation(text: str, expectation: dict[str, Any] | None) -> dict[str, Any]:
    invocation: dict[str, Any] = {"user_content": _content("user", text)}
    if expectation is not None and isinstance(expectation.get("rubric"), str):
        # a conversation turn's rubric: ADK's per-invocation rubrics
        invocation["rubrics"] = [{"rubric_id": "turn", "rubric_content": {"text_property": expectation["rubric"]}}]
        expectation = {k: v for k, v in expectation.items() if k != "rubric"} or None
    if expectation is not None:
        final = expectation.get("final_response")
        invocation["final_response"] = None if final is None else _content("model", final)
        invocation["intermediate_data"] = {
            "tool_uses": [
                {"name": call["name"], "args": call.get("arguments") or {}}
                for call in expectation.get("tool_calls", [])
            ]
        }
    return invocation


def adk_eval_case(case: Case) -> dict[str, Any]:
    """One case as an ADK eval case (see the module docstring)."""
    item: dict[str, Any] = {"eval_id": case.id}
    scenario = case.input.get("conversation_scenario") if isinstance(case.input, dict) else None
    if isinstance(scenario, dict) and set(case.input) == {"conversation_scenario"}:
        item["conversation_scenario"] = scenario
    elif is_scenario_input(case.input) and isinstance(case.input["scenario"], dict):
        item["conversation_scenario"] = _adk_scenario(case.input["scenario"])
    else:
        texts = _texts(case.input)
        expectations = _expectations(case.expected, len(texts))
        item["conversation"] = [_invocation(t, e) for t, e in zip(texts, expectations, strict=True)]
    for key in _KEPT_METADATA:
        if case.metadata.get(key) not in (None, {}, []):
            item[key] = case.metadata[key]
    _put_initial_state(item, case.input)
    final_state = case.expected.get("final_state") if isinstance(case.expected, dict) else None
    if (
        isinstance(final_state, dict)
        and "final_session_state" not in item
        and set(case.expected) <= {"turns", "final_state"}
    ):
        item["final_session_state"] = final_state
    return item


def _adk_scenario(scenario: dict[str, Any]) -> dict[str, Any]:
    """A scenario in ADK's ``ConversationScenario`` names; ``stop``, ``max_turns`` and ``script``
    have no place in ADK's schema and are not written."""
    names = {ours: adk for adk, ours in ADK_SCENARIO_NAMES.items()}
    return {names.get(key, key): value for key, value in scenario.items() if names.get(key, key) in ADK_SCENARIO_NAMES}


def _put_initial_state(item: dict[str, Any], input_value: Any) -> None:
    """A conversation case's ``initial_state`` as the eval case's ``session_input.state`` (what the
    ADK reader reads it back from): the input's state wins over a ``session_input`` kept from an
    import, so a state edited (or removed) since is the one written."""
    if is_scenario_input(input_value):
        pass  # a scenario case's initial state is its session_input's state too
    elif not (isinstance(input_value, dict) and isinstance(input_value.get("turns"), list)):
        return
    elif not set(input_value) <= {"turns", "initial_state"}:
        return
    state = input_value.get("initial_state")
    state = state if isinstance(state, dict) else {}
    kept = item.get("session_input")
    if isinstance(kept, dict):
        item["session_input"] = {**kept, "state": state}
    elif state:
        # ADK's SessionInput names the app and the user; a case written here has neither
        item["session_input"] = {"app_name": "", "user_id": "", "state": state}


def adk_eval_set_chunks(
    cases: Iterable[Case], *, eval_set_id: str, description: str | None = "", name: str | Missing | None = MISSING
) -> Iterator[bytes]:
    """The cases as one ADK eval set JSON document, streamed a case at a time (UTF-8).

    Args:
        cases: The cases, in order.
        eval_set_id: The document's ``eval_set_id``.
        description: Its ``description`` (``None``: written as ``null``, as ADK allows).
        name: Its ``name``; by default ``eval_set_id`` (``None``: ``null``).

    Raises:
        ValueError: A value holds NaN or infinity (not JSON).
    """
    head = {"eval_set_id": eval_set_id, "name": eval_set_id if name is MISSING else name, "description": description}
    yield (json.dumps(head, ensure_ascii=False)[:-1] + ', "eval_cases": [').encode()
    for index, case in enumerate(cases):
        text = json.dumps(adk_eval_case(case), ensure_ascii=False, allow_nan=False)
        yield ((",\n" if index else "\n") + text).encode()
    yield b"\n]}\n"
