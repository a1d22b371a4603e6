"""The part of Nunjucks that promptfoo test files use in assertion values: ``{{ var }}``.

promptfoo renders an assertion's value with the test's ``vars`` before checking
(``Does this describe {{topic}} accurately?`` reaches its judge as ``... describe photosynthesis
accurately?``). :func:`render` does the same for the one construct such values use: an
expression naming a var, optionally followed by ``.field`` / ``[0]`` / ``["key"]`` lookups,
with Nunjucks' ``{{-`` / ``-}}`` whitespace control and ``{# comments #}``. Values print as
Nunjucks prints them (JavaScript's ``String``): a missing var or ``null`` prints nothing,
``true`` / ``false``, ``1`` for ``1.0``, a list as its items joined by commas, an object as
``[object Object]``.

Nothing else is evaluated: no filters, tags (``{% if %}``), calls or arithmetic. A template
that holds any is not rendered (:class:`UnsupportedTemplate`), so the caller can say so instead
of checking against half-rendered text. With ``strict=True`` a name (or field) the vars do not
hold raises :class:`UndefinedVariable` instead of printing nothing, so an assertion whose needle
would silently become ``""`` can be reported. Rendering is a lookup in plain data: it cannot run code.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["UndefinedVariable", "UnsupportedTemplate", "has_template", "render"]

_TAG = re.compile(r"\{\{(-?)(.*?)(-?)\}\}|\{#.*?#\}|\{%", re.DOTALL)
_NAME = r"[A-Za-z_$][A-Za-z0-9_$]*"
_PATH = re.compile(rf"""\s*({_NAME})((?:\s*\.\s*{_NAME}|\s*\[\s*(?:[0-9]{{1,9}}|"[^"\\]*"|'[^'\\]*')\s*\])*)\s*""")
_STEP = re.compile(rf"""\.\s*({_NAME})|\[\s*([0-9]{{1,9}}|"[^"\\]*"|'[^'\\]*')\s*\]""")


class UnsupportedTemplate(ValueError):
    """The template uses Nunjucks beyond ``{{ var.path }}`` (a filter, a tag, an expression)."""


class UndefinedVariable(ValueError):
    """A ``{{ name }}`` (or ``{{ name.field }}``) the vars do not hold, under ``strict=True``."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name!r} is not defined in the test's vars")
        self.name = name


def has_template(text: str) -> bool:
    """True when ``text`` holds Nunjucks syntax (``{{``, ``{%`` or ``{#``)."""
    return "{{" in text or "{%" in text or "{#" in text


def render(text: str, variables: Mapping[str, Any], *, strict: bool = False) -> str:
    """``text`` with each ``{{ name.path }}`` replaced by its value in ``variables``.

    Args:
        text: A promptfoo assertion value.
        variables: The test's vars (plain JSON values).
        strict: Raise :class:`UndefinedVariable` for a name (or a field / item) ``variables``
            does not hold, instead of printing nothing as Nunjucks does (a ``null`` var still
            prints nothing: it is defined).

    Raises:
        UnsupportedTemplate: A tag, a filter or an expression other than a var lookup; the
            message quotes it.
        UndefinedVariable: Under ``strict``, the first lookup that finds nothing; ``.name``
            is the name (and path) as written.
    """
    out: list[str] = []
    position = 0
    trim_next = False
    for match in _TAG.finditer(text):
        literal = text[position : match.start()]
        if trim_next:
            literal = literal.lstrip()
        token = match.group(0)
        if token == "{%":
            raise UnsupportedTemplate(f"a Nunjucks tag ({text[match.start() : match.start() + 40]!r}...)")
        if token.startswith("{#"):
            out.append(literal)
            trim_next = False
            position = match.end()
            continue
        left, expression, right = match.groups()
        if left:
            literal = literal.rstrip()
        out.append(literal)
        out.append(_print(_lookup(expression, variables, strict=strict)))
        trim_next = bool(right)
        position = match.end()
    rest = text[position:]
    out.append(rest.lstrip() if trim_next else rest)
    return "".join(out)


def _lookup(expression: str, variables: Mapping[str, Any], *, strict: bool = False) -> Any:
    found = _PATH.fullmatch(expression)
    if found is None:
        raise UnsupportedTemplate(f"{{{{{expression}}}}} is more than a var lookup (filters and expressions)")
    if strict and found.group(1) not in variables:
        raise UndefinedVariable(found.group(1))
    value: Any = variables.get(found.group(1))
    for step in _STEP.finditer(found.group(2)):
        name, index = step.groups()
        key: Any = name if name is not None else (int(index) if index.isdigit() else index[1:-1])
        defined = True
        if isinstance(value, Mapping):
            defined = str(key) in value
            value = value.get(str(key))
        elif isinstance(value, list) and isinstance(key, int):
            defined = key < len(value)
            value = value[key] if defined else None
        elif isinstance(value, list | str) and key == "length":
            value = len(value)
        else:
            defined = False  # a field of a string, a number or null
            value = None
        if strict and not defined:
            raise UndefinedVariable(re.sub(r"\s+", "", expression))
    return value


def _print(value: Any) -> str:
    """A value as Nunjucks prints it (JavaScript's ``String(value)``; nothing for null)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else json.dumps(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(_print(item) for item in value)
    return "[object Object]"
