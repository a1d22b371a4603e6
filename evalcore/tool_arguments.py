"""A tool call's arguments, read one way wherever they arrive: a model's answer (OpenAI-compatible
endpoints, scripted models) and a stored call a scorer compares.

Arguments come as JSON text (the chat-completions wire form), as an object (some servers, scripted
models, traces and stored metadata), or not at all. :func:`read_tool_arguments` turns any of them
into an object plus the text, or says why they are unusable:

==============================  ==========================  =====================
arguments                       ``value``                   ``error``
==============================  ==========================  =====================
``None``, ``""``, blank text    ``{}``                      ``None``
an object (``Mapping``)         a ``dict`` of it            ``None``
JSON text of an object          the parsed object           ``None``
JSON text of anything else      ``{}``                      names the JSON type
text that is not strict JSON    ``{}``                      says why
any other Python value          ``{}``                      names the type
==============================  ==========================  =====================

The text must be strict JSON (:func:`evalcore.strictjson.loads_strict`): ``NaN`` / ``Infinity``
are no JSON and could not be stored in a trace, and a repeated key read last-wins is a guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalcore.strictjson import StrictJSONError, loads_strict


@dataclass(frozen=True, slots=True)
class ToolArguments:
    """A tool call's arguments, read.

    Attributes:
        value: The arguments object (``{}`` when there were none or they are unusable).
        text: The arguments as JSON text: as sent when they came as text, else the object dumped
            (``""`` when there were none).
        error: Why the arguments are unusable, or ``None`` when they are fine.
    """

    value: dict[str, Any]
    text: str
    error: str | None = None


def read_tool_arguments(raw: Any) -> ToolArguments:
    """Read a tool call's arguments, whatever form they came in (see the module doc's table).

    Args:
        raw: JSON text, an object, or ``None``.

    Returns:
        The :class:`ToolArguments`. Never raises.
    """
    if raw is None:
        return ToolArguments({}, "")
    if isinstance(raw, Mapping):
        return ToolArguments(dict(raw), json.dumps(raw, ensure_ascii=False, default=repr))
    if not isinstance(raw, str):  # the text kept says what came, so a later re-read finds the same fault
        text = json.dumps(raw, ensure_ascii=False, default=repr)
        return ToolArguments({}, text, f"arguments must be a JSON object, got {type(raw).__name__}")
    if not raw.strip():
        return ToolArguments({}, raw)
    try:
        value = loads_strict(raw)
    except StrictJSONError as exc:
        return ToolArguments({}, raw, f"arguments are not valid JSON ({exc})")
    except RecursionError:
        return ToolArguments({}, raw, "arguments are not valid JSON (nested too deeply)")
    if not isinstance(value, dict):
        return ToolArguments({}, raw, f"arguments must be a JSON object, got {type(value).__name__}")
    return ToolArguments(value, raw)
