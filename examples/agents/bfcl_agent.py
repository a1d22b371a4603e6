"""Tool-calling targets for the BFCL case banks (``examples/sets/bfcl_<category>.jsonl``).

No model is involved: everything is rule-based and deterministic, so the sets run offline.

* ``bfcl-rules``: picks the function whose name and description best overlap the question and
  fills its required arguments from the question's numbers, quoted strings, enum values and
  capitalised names. Variants: ``keyword`` always calls the best function; ``strict`` calls it
  only when a distinctive word of the function's name occurs in the question (so it abstains
  on irrelevant questions, at the cost of some relevant ones).
* ``bfcl-oracle``: replays the first accepted value of every argument of the possible answer
  (omitting arguments whose first accepted value is BFCL's "may be omitted" marker ``""``).
  Sanity check: it must pass every case of every category.
* ``bfcl-no-tools``: never calls a function. Sanity check: passes every irrelevance case and
  no other.

Every target returns its calls as the output (BFCL style, ``[{"func": {"arg": value}}]``) and
as ``metadata["tool_calls"]`` (``[{"name", "arguments"}]``, what the ``tool_calls`` scorer reads
first), and records one ``execute_tool`` span per call (the tools are not really executed).
"""

from __future__ import annotations

import re
from typing import Any

from evalcore.discovery import TargetSpec
from evalcore.targets import RunContext
from evalcore.types import TargetOutput

SCORERS = ["tool_calls:mode=any_order,strings=bfcl"]
"""BFCL's checker: parallel calls in any order, strings standardised (case, spaces, punctuation)."""

_STOPWORDS = frozenset(
    "a an and are as at be by can do for from get given how i in is it me my of on or please "
    "set that the this to use using what when which with you your find calculate compute".split()
)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?%?")
_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'&-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w'&-]*)*)")
_WORD = re.compile(r"[a-z0-9]+")


def question_text(input: Any) -> str:
    """The user text of a BFCL case input (``{"question": [messages], ...}``) or a plain string."""
    if isinstance(input, str):
        return input
    messages = input.get("question", []) if isinstance(input, dict) else []
    return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower().replace("_", " ")) if w not in _STOPWORDS}


def _name_words(function: dict[str, Any]) -> set[str]:
    return _words(re.sub(r"[._]", " ", function.get("name", "")))


def _overlap(question: set[str], function: dict[str, Any]) -> float:
    """Share of the function's name words (counted twice) and description words in the question."""
    name = _name_words(function)
    description = _words(function.get("description", ""))
    total = 2 * len(name) + len(description)
    if not total:
        return 0.0
    return (2 * len(name & question) + len(description & question)) / total


def _number(text: str) -> int | float:
    if text.endswith("%"):
        return float(text[:-1]) / 100.0
    return float(text) if "." in text else int(text)


class _Evidence:
    """Values found in the question, consumed left to right as arguments are filled."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.numbers = [_number(m.group(0)) for m in _NUMBER.finditer(text)]
        self.quoted = [m.group(1) or m.group(2) for m in _QUOTED.finditer(text)]
        self.names = [m.group(1) for m in _CAPITALISED.finditer(text)]

    def take_number(self, integer: bool) -> int | float | None:
        for index, value in enumerate(self.numbers):
            if not integer or float(value).is_integer():
                self.numbers.pop(index)
                return int(value) if integer else float(value)
        return None

    def take_string(self, spec: dict[str, Any]) -> str | None:
        enum = spec.get("enum")
        if enum:
            lowered = self.text.lower()
            for option in enum:
                if str(option).lower() in lowered:
                    return str(option)
            return None
        for pool in (self.quoted, self.names):
            if pool:
                return pool.pop(0)
        return None


def fill_arguments(function: dict[str, Any], text: str) -> dict[str, Any]:
    """Fill the function's required parameters from the question text (best effort)."""
    parameters = function.get("parameters", {})
    properties: dict[str, Any] = parameters.get("properties", {})
    evidence = _Evidence(text)
    arguments: dict[str, Any] = {}
    for name in parameters.get("required", []):
        spec = properties.get(name, {})
        kind = spec.get("type")
        value: Any = None
        if kind in ("integer", "float", "number"):
            value = evidence.take_number(integer=kind == "integer")
        elif kind == "string":
            value = evidence.take_string(spec)
        elif kind == "boolean":
            value = True
        elif kind in ("array", "tuple"):
            item_kind = spec.get("items", {}).get("type")
            if item_kind in ("integer", "float", "number"):
                numbers = []
                while (number := evidence.take_number(integer=item_kind == "integer")) is not None:
                    numbers.append(number)
                value = numbers or None
        if value is not None:
            arguments[name] = value
    return arguments


def _respond(ctx: RunContext, calls: list[tuple[str, dict[str, Any]]]) -> TargetOutput:
    """Record one ``execute_tool`` span per call and package the calls as the output."""
    for name, arguments in calls:
        with ctx.tracer.span("execute_tool", name, arguments=arguments) as span:
            span.set(executed=False)
    if not calls:
        return TargetOutput(output="None of the available functions fits this request.", metadata={"tool_calls": []})
    return TargetOutput(
        output=[{name: arguments} for name, arguments in calls],
        metadata={"tool_calls": [{"name": name, "arguments": arguments} for name, arguments in calls]},
    )


class RuleAgent:
    """Keyword-overlap function picker.

    Args:
        strict: Call only when a distinctive name word of the best function is in the question.
    """

    kind = "agent"

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.name = "bfcl-rules-strict" if strict else "bfcl-rules-keyword"

    async def run(self, input: dict[str, Any], ctx: RunContext) -> TargetOutput:
        """Pick one function (or none, when strict and unsure) and fill its required arguments."""
        text = question_text(input)
        words = _words(text)
        functions: list[dict[str, Any]] = input.get("functions", []) if isinstance(input, dict) else []
        if not functions:
            return _respond(ctx, [])
        best = max(functions, key=lambda f: _overlap(words, f))
        if self.strict and not (_name_words(best) & words):
            return _respond(ctx, [])
        return _respond(ctx, [(best["name"], fill_arguments(best, text))])


def _first_accepted(value: Any) -> Any:
    """A BFCL accepted value made concrete: nested accepted-value maps resolved recursively."""
    if isinstance(value, dict):
        resolved = {}
        for key, options in value.items():
            # A bare value is its own single option; [] means "the empty list" (as the scorer reads it).
            options = (options or [[]]) if isinstance(options, list) else [options]
            if options[0] != "":
                resolved[key] = _first_accepted(options[0])
        return resolved
    if isinstance(value, list):
        return [_first_accepted(v) for v in value]
    return value


def oracle_calls(expected: Any) -> list[tuple[str, dict[str, Any]]]:
    """The calls that replay a case's expected value (BFCL possible answer or plain calls)."""
    if isinstance(expected, dict):
        expected = expected.get("tool_calls", [])
    calls: list[tuple[str, dict[str, Any]]] = []
    for item in expected or []:
        if isinstance(item.get("name"), str):
            calls.append((item["name"], dict(item.get("arguments") or {})))
            continue
        ((name, accepted),) = item.items()
        calls.append((name, _first_accepted(accepted)))
    return calls


async def oracle(input: Any, ctx: RunContext) -> TargetOutput:
    """Replays the case's possible answer (reads ``ctx.case.expected``; a sanity check only)."""
    return _respond(ctx, oracle_calls(ctx.case.expected))


async def no_tools(input: Any, ctx: RunContext) -> TargetOutput:
    """Never calls a function."""
    return _respond(ctx, [])


oracle.target_kind = "agent"  # type: ignore[attr-defined]
no_tools.target_kind = "agent"  # type: ignore[attr-defined]

bfcl_rules = TargetSpec(
    input_kind="json",
    id="bfcl-rules",
    variants={"keyword": RuleAgent(strict=False), "strict": RuleAgent(strict=True)},
    default_variant="keyword",
    scorers=SCORERS,
    description="Rule-based BFCL function caller (keyword overlap, no model)",
    default_set="../sets/bfcl_simple_python.jsonl",
)

bfcl_oracle = TargetSpec(
    input_kind="json",
    id="bfcl-oracle",
    target=oracle,
    scorers=SCORERS,
    description="Replays BFCL possible answers (sanity check: passes everything)",
    default_set="../sets/bfcl_simple_python.jsonl",
)

bfcl_no_tools = TargetSpec(
    input_kind="json",
    id="bfcl-no-tools",
    target=no_tools,
    scorers=SCORERS,
    description="Never calls a function (sanity check: passes only irrelevance)",
    default_set="../sets/bfcl_irrelevance.jsonl",
)
