"""Tool calls as data: the calls an agent made (actual) and the calls a case expects.

Parsing only; matching and the ``tool_calls`` scorer live in ``evalcore.scorers.trajectory``,
whose module docstring documents every accepted shape and the value rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.scorers.base import ScoreContext
from evalcore.tool_arguments import read_tool_arguments
from evalcore.tracing import SPAN_BEGIN, SPAN_END

OMITTABLE = ""
"""BFCL's marker, inside a list of accepted values, for "this argument may be omitted"."""


@dataclass(slots=True)
class ActualCall:
    """One tool call the agent made.

    Attributes:
        name: The tool (function) name.
        arguments: The arguments, or ``None`` when they could not be parsed (always a mismatch).
    """

    name: str
    arguments: dict[str, Any] | None


@dataclass(slots=True)
class ExpectedCall:
    """One tool call a case expects.

    Attributes:
        name: The tool (function) name.
        arguments: Argument name -> list of accepted values (``""`` = may be omitted).
        nested: True for BFCL-shaped expectations, where dicts inside accepted values map keys
            to lists of accepted values; False for plain literal expectations.
    """

    name: str
    arguments: dict[str, list[Any]]
    nested: bool = False


def _parse_arguments(raw: Any) -> dict[str, Any] | None:
    """Arguments as a dict, read as everywhere else (:func:`~evalcore.tool_arguments.read_tool_arguments`);
    ``None`` when they are unusable (not strict JSON, not an object): a mismatch, not a NaN that
    would later make the score unstorable."""
    arguments = read_tool_arguments(raw)
    return None if arguments.error else arguments.value


def _plain_call_fields(item: Any) -> tuple[str, Any] | None:
    """``(name, raw arguments)`` of a plain / OpenAI / ADK-shaped call, else ``None``."""
    if isinstance(item, dict):
        if isinstance(item.get("function"), dict) and isinstance(item["function"].get("name"), str):
            inner = item["function"]
            return inner["name"], inner.get("arguments", inner.get("args"))
        if isinstance(item.get("name"), str):
            return item["name"], item.get("arguments", item.get("args"))
        if isinstance(item.get("tool_name"), str):
            return item["tool_name"], item.get("tool_input")
        return None
    name = getattr(item, "name", None)
    if isinstance(name, str) and hasattr(item, "arguments"):
        return name, item.arguments
    return None


def _is_bfcl_call(item: Any) -> bool:
    return isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item.values())), dict)


def parse_actual_calls(items: Any) -> list[ActualCall]:
    """Parse actual calls from any shape expected calls are read from (see :func:`call_items`).

    Each item may be plain, OpenAI-style, ADK-style or BFCL-style.

    Raises:
        ValueError: No list of calls in ``items``, or an item is no recognisable call.
    """
    calls: list[ActualCall] = []
    for index, item in enumerate(call_items(items)):
        plain = _plain_call_fields(item)
        if plain is not None:
            calls.append(ActualCall(plain[0], _parse_arguments(plain[1])))
        elif _is_bfcl_call(item):
            ((name, args),) = item.items()
            calls.append(ActualCall(str(name), dict(args)))
        else:
            raise ValueError(f"tool call #{index} is not a call: {item!r}")
    return calls


def _looks_like_calls(value: Any) -> bool:
    """True when ``value`` is one of the call-list shapes of :func:`call_items`, all items calls."""
    if not isinstance(value, list | dict):
        return False
    try:
        items = call_items(value)
    except ValueError:
        return False
    return all(_plain_call_fields(v) is not None or _is_bfcl_call(v) for v in items)


def _event_field(event: Any, key: str) -> Any:
    return event.get(key) if isinstance(event, dict) else getattr(event, key, None)


def calls_from_events(events: list[Any]) -> list[ActualCall]:
    """The ``execute_tool`` spans of a trace, in start order, as calls.

    Events may be :class:`~evalcore.tracing.TraceEvent` objects or their dict form.
    """
    begins: list[tuple[str, str, dict[str, Any]]] = []
    end_payloads: dict[str, dict[str, Any]] = {}
    for event in events:
        payload = _event_field(event, "payload") or {}
        if payload.get("kind") != "execute_tool":
            continue
        kind = _event_field(event, "type")
        if kind == SPAN_BEGIN:
            begins.append((str(payload.get("span_id")), str(_event_field(event, "name")), payload))
        elif kind == SPAN_END:
            end_payloads[str(payload.get("span_id"))] = payload
    calls = []
    for span_id, name, payload in begins:
        raw = payload.get("arguments")
        if raw is None:
            raw = end_payloads.get(span_id, {}).get("arguments")
        calls.append(ActualCall(name, _parse_arguments(raw)))
    return calls


def actual_calls(ctx: ScoreContext) -> tuple[list[ActualCall], str]:
    """The calls the target made, and where they were found.

    The recorded calls and the output are read in every shape expected calls are read in
    (:func:`call_items`), so a target returning exactly a case's expected value (an ADK
    ``{"final_response", "tool_calls"}`` dict, a list of turns) made exactly those calls.

    Returns:
        ``(calls, source)`` with source ``"metadata"``, ``"output"``, ``"events"`` or ``"none"``.

    Raises:
        ValueError: ``run.metadata["tool_calls"]`` is present but malformed.
    """
    recorded = ctx.run.metadata.get("tool_calls") if ctx.run is not None else None
    if recorded is not None:
        return parse_actual_calls(recorded), "metadata"
    if _looks_like_calls(ctx.output):
        return parse_actual_calls(ctx.output), "output"
    from_trace = calls_from_events(ctx.events)
    if from_trace:
        return from_trace, "events"
    return [], "none"


def _accepted_values(value: Any) -> list[Any]:
    # A bare value in a BFCL-shaped map (never seen in BFCL data) is its single accepted value.
    if not isinstance(value, list):
        return [value]
    # An empty accepted list would accept nothing; a few BFCL live answers (e.g. live_simple_112-68-0,
    # array parameters) use it to mean "the empty list", so it is read that way.
    return list(value) if value else [[]]


def as_accepted_map(args: dict[str, Any]) -> dict[str, list[Any]]:
    return {str(k): _accepted_values(v) for k, v in args.items()}


def _parse_expected_call(item: Any, index: int) -> ExpectedCall:
    plain = _plain_call_fields(item)
    if plain is not None:
        args = _parse_arguments(plain[1])
        if args is None:
            raise ValueError(f"expected call #{index} ({plain[0]}): arguments are not an object")
        return ExpectedCall(plain[0], {k: [v] for k, v in args.items()}, nested=False)
    if _is_bfcl_call(item):
        ((name, args),) = item.items()
        return ExpectedCall(str(name), as_accepted_map(args), nested=True)
    raise ValueError(f"expected call #{index} is not a call: {item!r}")


def _is_turn(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and _plain_call_fields(item) is None
        and ("tool_calls" in item or "final_response" in item)
        and not _is_bfcl_call(item)
    )


def call_items(value: Any, *, side: str = "") -> list[Any]:
    """The call items held by any accepted shape, in order (the same for actual and expected).

    Shapes: a list of calls; ``{"tool_calls": [...], ...}`` (ADK-derived cases, e.g. with a
    ``final_response``); or a list of per-turn dicts ``[{"final_response": ..., "tool_calls":
    [...]}, ...]``, flattened in turn order.

    Args:
        value: The value to read.
        side: ``"expected"`` or ``""``, only to word the error messages.

    Raises:
        ValueError: A shape that holds no list of calls.
    """
    prefix = f"{side} " if side else ""
    if isinstance(value, dict):
        if not isinstance(value.get("tool_calls"), list):
            raise ValueError(f"{prefix}value is a dict without a 'tool_calls' list")
        value = value["tool_calls"]
    if not isinstance(value, list | tuple):
        raise ValueError(f"{prefix}tool calls must be a list, got {type(value).__name__}")
    if value and all(_is_turn(t) for t in value):
        flat: list[Any] = []
        for number, turn in enumerate(value, start=1):
            if not isinstance(turn.get("tool_calls"), list):
                raise ValueError(f"{prefix}turn {number} has no 'tool_calls' list")
            flat.extend(turn["tool_calls"])
        return flat
    return list(value)


def expected_calls(expected: Any) -> list[ExpectedCall]:
    """Parse a case's expected value into expected calls.

    Accepts every shape of :func:`call_items`: a list of calls, ``{"tool_calls": [...], ...}``,
    or a list of per-turn dicts ``[{"final_response": ..., "tool_calls": [...]}, ...]``.

    Raises:
        ValueError: Missing expected value or a shape that holds no expected calls.
    """
    if expected is MISSING:
        raise ValueError("the case has no expected value (expected tool calls are needed)")
    return [_parse_expected_call(item, i) for i, item in enumerate(call_items(expected, side="expected"))]
