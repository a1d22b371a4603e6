"""Import Google ADK eval files (``*.test.json``, ``*.evalset.json``) as cases.

Three generations of the format are read (``test_config.json``, ADK's criteria file, is not an
eval file and is rejected with a message saying so):

1. **Legacy turn list** (the oldest ``.test.json``): a JSON list of turns
   ``{"query", "expected_tool_use": [{"tool_name", "tool_input"}], "reference"}``. As in ADK's
   own migration (``convert_eval_set_to_pydanctic_schema``), the whole list is *one*
   conversation, so the file gives one case whose id is the file name without its suffix. The
   intermediate legacy shape, a list of ``{"name", "data": [turns], "initial_session"}``, gives
   one case per item (id = ``name``).
2. **Eval set** ``{"eval_set_id", "eval_cases": [{"eval_id", "conversation": [invocation]}]}``
   where an invocation is ``{"user_content", "final_response", "intermediate_data"}``, contents
   are genai ``Content`` objects (``{"role", "parts": [{"text": ...}]}``) and
   ``intermediate_data`` is either ``{"tool_uses": [{"name", "args"}]}`` or the newer
   ``{"invocation_events": [{"author", "content": {"parts": [{"function_call": {...}}]}}]}``.
   camelCase keys (``evalCases``, ``userContent``, ...) are accepted too (ADK's pydantic models
   serialise either way).
3. **Scenario cases** (live / user-simulator eval sets): an eval case with a
   ``conversation_scenario`` ``{"starting_prompt", "conversation_plan", "user_persona"?}``
   instead of a conversation (ADK's user-simulation sets), and scripted live conversations whose
   invocations hold only the user's turns.

Case shape:
    * ``id``: ``eval_id`` (else ``name``, else ``case-<index>``); for a legacy turn list the file
      name without ``.test.json`` / ``.evalset.json``.
    * ``input``: the user's text for a one-turn conversation, ``{"turns": [text, ...]}`` for
      several turns (a conversation case, :mod:`evalcore.conversations`, played turn by turn on
      one session; ``initial_state`` added from the ``session_input``'s ``state`` when it has
      one), for a ``conversation_scenario`` a scenario case's input ``{"scenario": {...},
      "initial_state"?: session_input.state}`` (:func:`evalcore.conversations.parse_scenario`
      reads ADK's field names; played with a user simulator, ``--simulator-model``).
    * ``expected``: for one turn ``{"final_response": text | None, "tool_calls": [{"name",
      "arguments"}, ...]}``; for several turns the list of those per-turn dicts (each turn is
      scored against its own, as ADK scores each invocation; with a ``final_session_state``,
      ``{"turns": [those dicts], "final_state": {...}}``; an invocation's ``rubrics`` add the
      turn's ``rubric``, their texts joined). Both ADK
      spellings of an expected call (``tool_uses`` name/args and the legacy
      ``expected_tool_use`` tool_name/tool_input) give the same ``{"name", "arguments"}``; call
      ids are dropped. As in ADK, a turn with a final response but no intermediate data expects
      no tool call. A case none of whose turns states a final response or intermediate data (a
      scripted live conversation, a scenario) has no expected value
      (:data:`~evalcore.types.MISSING`); in a case where some turns do, a silent turn expects
      ``{"final_response": None, "tool_calls": []}``.
    * ``tags``: ``["adk"]`` plus ``"multi_turn"`` or ``"conversation_scenario"`` when they apply.
    * ``metadata``: ``source`` (``"adk"``), ``adk_format`` (``legacy_turns``,
      ``legacy_eval_set`` or ``eval_set``), ``file``, and when present ``eval_set_id``,
      ``eval_set_name`` and ``eval_set_description`` (the eval set's ``name`` and
      ``description``, so an export writes the source's back), ``session_input``,
      ``final_session_state`` and ``rubrics``.

A ``test_config.json`` in the same folder as a file read from disk adds its criteria to every
case (``metadata.scorers``, ``metadata.adk_criteria``): :mod:`evalcore.loaders.adk_config`.

Errors are :class:`evalcore.loaders.errors.CaseBankError` naming the file (and the offending
field, e.g. ``eval_cases[0].conversation[1].user_content``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from evalcore.conversations import ADK_SCENARIO_NAMES, ConversationError, scenario_record_input
from evalcore.jsonvalue import MISSING
from evalcore.loaders import adk_config
from evalcore.loaders._io import ADK_CONFIG_NAME, CaseBankSource, SourceFile, decode_whole, open_source
from evalcore.loaders._jsonfile import json_syntax_error
from evalcore.loaders.errors import CaseBankError
from evalcore.types import JSON, Case


def load_adk_file(source: CaseBankSource, *, name: str | None = None) -> list[Case]:
    """Read one ADK eval file into cases (see the module docstring for the case shape).

    :func:`evalcore.loaders.load_cases` calls this for a file named ``*.test.json`` /
    ``*.evalset.json``; call it directly to read a file as ADK whatever its name.

    Args:
        source: A path or an open file object (see :func:`evalcore.loaders._io.open_source`).
        name: The file name of a file object, shown in errors.

    Raises:
        CaseBankError: Missing file, Git LFS pointer, not UTF-8, invalid JSON, an ADK
            ``test_config.json``, or JSON that is no known ADK eval schema.
    """
    return adk_cases(open_source(source, "adk", name=name))


def adk_cases(source: SourceFile) -> list[Case]:
    """The cases of a checked ADK file (see :func:`load_adk_file`)."""
    text = decode_whole(source, source.read_bytes())  # UTF-8 (BOM dropped), or an error naming the likely encoding
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise json_syntax_error(source, text, exc) from None
    cases = parse_adk_data(data, path=source.display, stem=source.stem)
    config = adk_config.beside(source.path)  # ADK's criteria beside the file: the cases' verdicts
    return cases if config is None else adk_config.attach_criteria(cases, config)


def parse_adk_data(data: Any, *, path: str, stem: str) -> list[Case]:
    """Turn parsed ADK JSON into cases.

    Args:
        data: The file's JSON value.
        path: The file as shown in errors and stored in ``metadata["file"]``.
        stem: Case id for a legacy turn list (the file name without its suffix).

    Raises:
        CaseBankError: The value is no known ADK eval schema.
    """
    reader = _Reader(path)
    if Path(path).name == ADK_CONFIG_NAME or (isinstance(data, dict) and "criteria" in data and not _has_cases(data)):
        reader.fail(f"this is an ADK {ADK_CONFIG_NAME} (evaluation criteria), not an eval file; it holds no cases")
    if isinstance(data, list):
        if not data:
            reader.fail("empty list: an ADK legacy eval file lists at least one turn")
        if all(isinstance(item, dict) and "data" in item for item in data):
            return reader.legacy_eval_set(data)
        if all(isinstance(item, dict) and "query" in item for item in data):
            return [reader.legacy_conversation(data, case_id=stem, field="", extra={})]
        reader.fail(
            "not an ADK eval file: a JSON list must hold legacy turns "
            '{"query", "expected_tool_use", "reference"} (or {"name", "data"} items)'
        )
    if isinstance(data, dict) and _has_cases(data):
        return reader.eval_set(data)
    found = f"an object with keys {sorted(data)[:8]}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
    reader.fail(
        "not an ADK eval file: expected an eval set object with 'eval_cases' or a list of legacy turns "
        f'{{"query", "expected_tool_use", "reference"}}, found {found}'
    )


def _has_cases(data: dict[str, Any]) -> bool:
    return "eval_cases" in data or "evalCases" in data


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_OUR_SCENARIO_NAMES = {ours: adk for adk, ours in ADK_SCENARIO_NAMES.items()}
"""Our scenario field names → ADK's (errors name the field as the ADK file spells it)."""
_ADK_CAMEL = {
    "startingPrompt": "starting_prompt",
    "conversationPlan": "conversation_plan",
    "userPersona": "user_persona",
}
"""ADK's camelCase scenario keys → snake_case (its pydantic models serialise either way)."""


def _get(obj: dict[str, Any], key: str) -> Any:
    """``obj[key]`` under its snake_case or camelCase spelling, else ``None``."""
    if key in obj:
        return obj[key]
    return obj.get(_camel(key))


class _Reader:
    """Walks one file's JSON; every error names the file and the field path."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = Path(path).name

    def fail(self, reason: str, field: str | None = None) -> NoReturn:
        raise CaseBankError(reason, path=self.path, field=field or None)

    def _metadata(self, adk_format: str, **extra: Any) -> dict[str, JSON]:
        metadata: dict[str, JSON] = {"source": "adk", "adk_format": adk_format, "file": self.file}
        metadata.update({k: v for k, v in extra.items() if v not in (None, {}, [])})
        return metadata

    # --- legacy shapes -------------------------------------------------------------------

    def legacy_eval_set(self, items: list[dict[str, Any]]) -> list[Case]:
        cases = []
        for index, item in enumerate(items):
            name = item.get("name")
            case_id = name if isinstance(name, str) and name else f"case-{index}"
            turns = item.get("data")
            if not isinstance(turns, list) or not turns:
                self.fail("'data' must be a non-empty list of turns", f"[{index}].data")
            session = item.get("initial_session") or None
            cases.append(
                self.legacy_conversation(
                    turns, case_id=case_id, field=f"[{index}].data", extra={"session_input": session}
                )
            )
        self._check_unique(cases, "name")
        return cases

    def legacy_conversation(self, turns: list[Any], *, case_id: str, field: str, extra: dict[str, Any]) -> Case:
        texts: list[str] = []
        expectations: list[dict[str, JSON]] = []
        for index, turn in enumerate(turns):
            where = f"{field}[{index}]"
            if not isinstance(turn, dict):
                self.fail("a turn must be an object", where)
            query = turn.get("query")
            if not isinstance(query, str):
                self.fail("'query' must be a string", f"{where}.query")
            uses = turn.get("expected_tool_use", [])
            if not isinstance(uses, list):
                self.fail("'expected_tool_use' must be a list", f"{where}.expected_tool_use")
            calls = [self._legacy_call(use, f"{where}.expected_tool_use[{i}]") for i, use in enumerate(uses)]
            reference = turn.get("reference")
            if reference is not None and not isinstance(reference, str):
                self.fail("'reference' must be a string", f"{where}.reference")
            texts.append(query)
            expectations.append({"final_response": reference, "tool_calls": calls})
        legacy = "legacy_eval_set" if field else "legacy_turns"
        return _make_case(case_id, texts, expectations, self._metadata(legacy, **extra))

    def _legacy_call(self, use: Any, where: str) -> dict[str, JSON]:
        if not isinstance(use, dict) or not isinstance(use.get("tool_name"), str):
            self.fail("an expected tool use needs a string 'tool_name'", where)
        arguments = use.get("tool_input") or {}
        if not isinstance(arguments, dict):
            self.fail("'tool_input' must be an object", f"{where}.tool_input")
        return {"name": use["tool_name"], "arguments": arguments}

    # --- eval sets -----------------------------------------------------------------------

    def eval_set(self, data: dict[str, Any]) -> list[Case]:
        eval_cases = _get(data, "eval_cases")
        if not isinstance(eval_cases, list):
            self.fail("'eval_cases' must be a list", "eval_cases")
        head = {
            "eval_set_id": _get(data, "eval_set_id"),
            "eval_set_name": _get(data, "name"),
            "eval_set_description": _get(data, "description"),
        }
        cases = [self.eval_case(item, index, head) for index, item in enumerate(eval_cases)]
        self._check_unique(cases, "eval_id")
        return cases

    def eval_case(self, item: Any, index: int, head: dict[str, Any]) -> Case:
        where = f"eval_cases[{index}]"
        if not isinstance(item, dict):
            self.fail("an eval case must be an object", where)
        case_id = _get(item, "eval_id") or item.get("name") or f"case-{index}"
        if not isinstance(case_id, str):
            self.fail("'eval_id' must be a string", f"{where}.eval_id")
        conversation = _get(item, "conversation")
        scenario = _get(item, "conversation_scenario")
        if (conversation is None) == (scenario is None):
            self.fail("an eval case needs exactly one of 'conversation' and 'conversation_scenario'", where)
        metadata = self._metadata(
            "eval_set",
            **head,
            session_input=_get(item, "session_input"),
            final_session_state=_get(item, "final_session_state"),
            rubrics=_get(item, "rubrics"),
        )
        if scenario is not None:
            return Case(
                id=case_id,
                input=self.scenario_input(scenario, _get(item, "session_input"), f"{where}.conversation_scenario"),
                tags=["adk", "conversation_scenario"],
                metadata=metadata,
            )
        if not isinstance(conversation, list) or not conversation:
            self.fail("'conversation' must be a non-empty list of invocations", f"{where}.conversation")
        texts: list[str] = []
        expectations: list[dict[str, JSON] | None] = []
        for turn, invocation in enumerate(conversation):
            text, expectation = self.invocation(invocation, f"{where}.conversation[{turn}]")
            rubric = self.invocation_rubric(invocation, f"{where}.conversation[{turn}].rubrics")
            if rubric is not None and len(conversation) > 1:  # a conversation turn's rubric (judged per turn)
                expectation = {**(expectation or {}), "rubric": rubric}
            texts.append(text)
            expectations.append(expectation)
        return _make_case(case_id, texts, expectations, metadata)

    def scenario_input(self, scenario: Any, session_input: Any, where: str) -> dict[str, JSON]:
        """An ADK ``conversation_scenario`` as a scenario case's input ``{"scenario", "initial_state"?}``.

        The scenario keeps ADK's field names (``starting_prompt``, ``conversation_plan``,
        ``user_persona``), which :func:`evalcore.conversations.parse_scenario` reads as ours; the
        ``session_input``'s ``state`` is the initial state. Errors name the ADK field, e.g.
        ``eval_cases[0].conversation_scenario.starting_prompt``.
        """
        if not isinstance(scenario, dict):
            self.fail("'conversation_scenario' must be an object", where)
        if isinstance(scenario, dict) and "starting_prompt" not in scenario and "startingPrompt" in scenario:
            scenario = {_ADK_CAMEL.get(key, key): value for key, value in scenario.items()}
        record: dict[str, Any] = {"conversation_scenario": scenario}
        if isinstance(session_input, dict) and session_input.get("state") is not None:
            record["session_input"] = session_input
        try:
            return scenario_record_input(record)
        except ConversationError as exc:
            if exc.field == "initial_state":  # the session_input's state
                self.fail(exc.reason, where.removesuffix(".conversation_scenario") + ".session_input.state")
            head, _, tail = exc.field.removeprefix("conversation_scenario").lstrip(".").partition(".")
            if head in _OUR_SCENARIO_NAMES and head not in scenario:
                head = _OUR_SCENARIO_NAMES[head]  # the field as ADK names it
            self.fail(exc.reason, ".".join(part for part in (where, head, tail) if part))

    def invocation_rubric(self, invocation: Any, where: str) -> str | None:
        """The texts of an invocation's ``rubrics`` joined by newlines (``None`` when it has none)."""
        rubrics = _get(invocation, "rubrics") if isinstance(invocation, dict) else None
        if rubrics is None:
            return None
        if not isinstance(rubrics, list):
            self.fail("'rubrics' must be a list", where)
        texts = []
        for index, rubric in enumerate(rubrics):
            content = _get(rubric, "rubric_content") if isinstance(rubric, dict) else None
            text = _get(content, "text_property") if isinstance(content, dict) else None
            if not isinstance(text, str):
                self.fail("a rubric needs 'rubric_content.text_property' text", f"{where}[{index}]")
            if text.strip():
                texts.append(text)
        return "\n".join(texts) or None

    def invocation(self, invocation: Any, where: str) -> tuple[str, dict[str, JSON] | None]:
        """The user's text and the turn's expectation (``None`` when the turn states none)."""
        if not isinstance(invocation, dict):
            self.fail("an invocation must be an object", where)
        user = _get(invocation, "user_content")
        if user is None:
            self.fail("an invocation needs 'user_content'", where)
        text = self.content_text(user, f"{where}.user_content")
        final = _get(invocation, "final_response")
        intermediate = _get(invocation, "intermediate_data")
        if final is None and intermediate is None:
            return text or "", None
        calls = self.tool_calls(intermediate, f"{where}.intermediate_data")
        return text or "", {"final_response": self.content_text(final, f"{where}.final_response"), "tool_calls": calls}

    def content_text(self, content: Any, where: str) -> str | None:
        """The text parts of a genai ``Content`` joined by newlines (``None`` when it has none)."""
        if content is None or isinstance(content, str):
            return content
        if not isinstance(content, dict) or not isinstance(content.get("parts", []), list):
            self.fail("a content must be an object with a 'parts' list", where)
        texts = []
        for index, part in enumerate(content.get("parts") or []):
            if not isinstance(part, dict):
                self.fail("a part must be an object", f"{where}.parts[{index}]")
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts) if texts else None

    def tool_calls(self, intermediate: Any, where: str) -> list[dict[str, JSON]]:
        """Expected calls from ``tool_uses`` or from the function calls among ``invocation_events``."""
        if intermediate is None:
            return []
        if not isinstance(intermediate, dict):
            self.fail("'intermediate_data' must be an object", where)
        calls: list[dict[str, JSON]] = []
        events = _get(intermediate, "invocation_events")
        if events is not None:
            if not isinstance(events, list):
                self.fail("'invocation_events' must be a list", f"{where}.invocation_events")
            for i, event in enumerate(events):
                content = event.get("content") if isinstance(event, dict) else None
                for j, part in enumerate((content or {}).get("parts") or []):
                    call = _get(part, "function_call") if isinstance(part, dict) else None
                    if call is not None:
                        calls.append(
                            self._call(call, f"{where}.invocation_events[{i}].content.parts[{j}].function_call")
                        )
            return calls
        uses = _get(intermediate, "tool_uses") or []
        if not isinstance(uses, list):
            self.fail("'tool_uses' must be a list", f"{where}.tool_uses")
        return [self._call(use, f"{where}.tool_uses[{i}]") for i, use in enumerate(uses)]

    def _call(self, call: Any, where: str) -> dict[str, JSON]:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            self.fail("a tool call needs a string 'name'", where)
        arguments = call.get("args") or {}
        if not isinstance(arguments, dict):
            self.fail("'args' must be an object", f"{where}.args")
        return {"name": call["name"], "arguments": arguments}

    def _check_unique(self, cases: list[Case], key: str) -> None:
        seen: set[str] = set()
        for case in cases:
            if case.id in seen:
                self.fail(f"duplicate case id {case.id!r}", key)
            seen.add(case.id)


def _make_case(
    case_id: str, texts: list[str], expectations: Sequence[dict[str, JSON] | None], metadata: dict[str, JSON]
) -> Case:
    """One case from a conversation's user texts and per-turn expectations."""
    stated = [e for e in expectations if e is not None]
    if len(texts) == 1:
        input_value: JSON = texts[0]
        expected: Any = expectations[0] if stated else MISSING
    else:
        input_value = {"turns": texts}  # a conversation case (evalcore.conversations), played turn by turn
        session = metadata.get("session_input")
        state = session.get("state") if isinstance(session, dict) else None
        if isinstance(state, dict) and state:
            input_value["initial_state"] = state
        # A turn without a stated expectation, in a case that has some, expects nothing.
        filled = [e if e is not None else {"final_response": None, "tool_calls": []} for e in expectations]
        expected = filled if stated else MISSING
        final_state = metadata.get("final_session_state")
        if isinstance(final_state, dict):  # ADK's expected final session state
            expected = {"turns": filled if stated else [{} for _ in texts], "final_state": final_state}
    tags = ["adk", "multi_turn"] if len(texts) > 1 else ["adk"]
    return Case(id=case_id, input=input_value, expected=expected, tags=tags, metadata=metadata)
