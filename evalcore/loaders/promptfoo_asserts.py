"""promptfoo assertions as Evalsite scorer specs.

A promptfoo test checks its output with ``assert`` entries (``{"type": "icontains", "value":
"bonjour"}``); a promptfoo CSV writes them as ``__expected`` cells (``icontains:bonjour``,
``is-json``, ``grade:...``, a plain value meaning ``equals``). :func:`map_assertions` turns them
into scorer specs ``{"name", "args"}`` (the shape :func:`evalcore.scorer_registry.scorer_from_spec`
reads) where Evalsite has the same check:

============================================  ===================================================
promptfoo                                     Evalsite spec
============================================  ===================================================
``equals`` (the first one)                    the case's expected value + ``exact_match`` (strip=false)
``equals`` (more, text)                       ``regex`` (the escaped text, fullmatch)
``contains`` / ``icontains``                  ``contains`` (``casefold`` for icontains)
``contains-any|all``, ``icontains-any|all``   ``contains`` with ``mode`` any / all
``starts-with``                               ``regex`` anchored at the start
``regex``                                     ``regex``
``is-json``, ``contains-json``                ``predicate`` with :func:`is_json` / :func:`contains_json`
``llm-rubric``                                ``rubric_judge`` with the value as its ``rubric``
============================================  ===================================================

Every other type (``javascript``, ``python``, ``similar``, any ``not-`` form...) has no
equivalent: it is named in the result's ``unscored`` list, never dropped silently. So is the
part of a mapped assertion Evalsite cannot honour (a JSON schema on ``is-json``, a ``transform``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.strictjson import StrictJSONError, loads_strict

__all__ = ["ASSERTION_TYPES", "MappedAssertions", "assertion_from_string", "contains_json", "is_json", "map_assertions"]

ASSERTION_TYPES: frozenset[str] = frozenset(
    """equals contains icontains contains-all contains-any icontains-all icontains-any starts-with regex
    is-json contains-json is-xml contains-xml is-sql contains-sql is-html contains-html javascript python
    webhook similar llm-rubric model-graded-closedqa model-graded-factuality factuality answer-relevance
    context-faithfulness context-recall context-relevance classifier cost latency levenshtein rouge-n bleu
    gleu meteor perplexity perplexity-score moderation is-refusal is-valid-openai-function-call
    is-valid-openai-tools-call is-valid-function-call select-best human g-eval guardrails finish-reason
    word-count f-score pi trace-span-count trace-span-duration trace-error-spans conversation-relevance
    ruby""".split()
)
"""Assertion type names a promptfoo CSV ``__expected`` cell may start with (``TYPE:value``)."""

_FROM_STRING = re.compile(r"^(not-)?([a-z][a-z0-9-]*)(?:\(([0-9]+(?:\.[0-9]+)?)\))?(?::([\s\S]*))?$")
_LIST_TYPES = frozenset({"contains-all", "contains-any", "icontains-all", "icontains-any"})
_PREDICATES = {"is-json": "is_json", "contains-json": "contains_json"}


def assertion_from_string(text: str) -> dict[str, Any]:
    """One promptfoo ``__expected`` cell as an assertion object, by promptfoo's own CSV rules.

    ``fn:`` / ``javascript:`` / ``eval:`` -> ``javascript``; ``grade:`` / ``llm-rubric:`` ->
    ``llm-rubric``; ``python:`` -> ``python``; ``[not-]TYPE[(threshold)][:value]`` for a known
    type (the ``-any`` / ``-all`` types split their value on commas); anything else is ``equals``
    with the whole cell as its value.
    """
    for prefix, kind in (("javascript:", "javascript"), ("fn:", "javascript"), ("eval:", "javascript")):
        if text.startswith(prefix):
            return {"type": kind, "value": text[len(prefix) :].strip()}
    for prefix in ("grade:", "llm-rubric:"):
        if text.startswith(prefix):
            return {"type": "llm-rubric", "value": text[len(prefix) :]}
    if text.startswith("python:"):
        return {"type": "python", "value": text[len("python:") :].strip()}
    match = _FROM_STRING.match(text)
    if match and match.group(2) in ASSERTION_TYPES:
        negated, kind, threshold, value = match.groups()
        assertion: dict[str, Any] = {"type": f"{negated or ''}{kind}"}
        if value is not None:
            assertion["value"] = [part.strip() for part in value.split(",")] if kind in _LIST_TYPES else value
        if threshold is not None:
            assertion["threshold"] = float(threshold)
        return assertion
    return {"type": "equals", "value": text}


def is_json(output: Any, expected: Any) -> bool:
    """promptfoo ``is-json``: the output is JSON text (strict: no NaN, no repeated key), or a JSON value."""
    if not isinstance(output, str):
        return output is not None
    try:
        loads_strict(output)
    except StrictJSONError:
        return False
    return True


def contains_json(output: Any, expected: Any) -> bool:
    """promptfoo ``contains-json``: an object or array written as JSON appears somewhere in the output text."""
    if not isinstance(output, str):
        return isinstance(output, dict | list)
    decoder = json.JSONDecoder()
    for index, char in enumerate(output):
        if char in "{[":
            try:
                decoder.raw_decode(output, index)
            except ValueError:
                continue
            return True
    return False


@dataclass(slots=True)
class MappedAssertions:
    """What a test's assertions become.

    Attributes:
        expected: The first ``equals`` value, the case's expected value (:data:`MISSING` if none).
        specs: Scorer specs ``{"name", "args"}``, in the test's order: every one must pass.
        unscored: The assertion types with no Evalsite equivalent (``"javascript"``,
            ``"not-contains"``, ``"is-json (JSON schema)"``...), in the test's order, repeated
            when a test repeats them.
    """

    expected: Any = MISSING
    specs: list[dict[str, Any]] = field(default_factory=list)
    unscored: list[str] = field(default_factory=list)


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return json.dumps(value)
    return None


def _texts(value: Any) -> list[str] | None:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if isinstance(value, list) and value and all(_text(item) is not None for item in value):
        return [str(_text(item)) for item in value]
    return None


def map_assertions(asserts: list[dict[str, Any]]) -> MappedAssertions:
    """Map a test's (already ``$ref``-resolved) assertion objects; see the module docstring.

    An assertion whose value does not fit the equivalent (``contains`` with an object value, an
    ``llm-rubric`` with no text) is reported in ``unscored`` like a type with no equivalent.
    """
    mapped = MappedAssertions()
    for assertion in asserts:
        kind = str(assertion.get("type", "?"))
        if "transform" in assertion:
            mapped.unscored.append(f"{kind} (transform)")
            continue
        spec = _spec(kind, assertion.get("value"), mapped)
        if spec is None:
            mapped.unscored.append(kind)
        elif spec:
            mapped.specs.append(spec)
    return mapped


def _spec(kind: str, value: Any, mapped: MappedAssertions) -> dict[str, Any] | None:
    """The spec for one assertion; ``{}`` when it became the expected value; ``None`` when unmapped."""
    if kind == "equals":
        if mapped.expected is MISSING and value is not None:
            mapped.expected = value
            return {"name": "exact_match", "args": {"strip": False}}
        text = _text(value)
        return None if text is None else _regex(re.escape(text), fullmatch=True)
    if kind in ("contains", "icontains"):
        text = _text(value)
        if text is None:
            return None
        return {"name": "contains", "args": {"value": text, "casefold": kind == "icontains"}}
    if kind in _LIST_TYPES:
        needles = _texts(value)
        if needles is None:
            return None
        return {
            "name": "contains",
            "args": {"value": needles, "mode": kind.rsplit("-", 1)[1], "casefold": kind.startswith("i")},
        }
    if kind == "starts-with":
        text = _text(value)
        return None if text is None else _regex(r"\A" + re.escape(text))
    if kind == "regex":
        return _regex(value) if isinstance(value, str) else None
    if kind in _PREDICATES:
        if value not in (None, ""):
            mapped.unscored.append(f"{kind} (JSON schema)")
        function = _PREDICATES[kind]
        return {"name": "predicate", "args": {"fn": f"{__name__}.{function}", "label": function}}
    if kind == "llm-rubric":
        return {"name": "rubric_judge", "args": {"rubric": value}} if isinstance(value, str) and value.strip() else None
    return None


def _regex(pattern: str, *, fullmatch: bool = False) -> dict[str, Any]:
    args: dict[str, Any] = {"pattern": pattern, "strip": False}
    if fullmatch:
        args["fullmatch"] = True
    return {"name": "regex", "args": args}
