"""Rules: the instructions an agent is given, each with an id and its text.

Rules are declared in three places, merged in this order (a later one with the same id replaces
an earlier one's text):

1. on the target: ``TargetSpec(rules=[...])`` (``Rule`` objects, ``{"id", "text"}`` dicts or
   ``(id, text)`` pairs);
2. in ``rules.toml`` in the agents folder (beside the target modules), one table per target id,
   each key a rule id and each value its text::

       # agents/rules.toml
       [support-bot]
       R1 = "Always answer in English."
       R2 = "Never quote a price in {currency}; link to the price page instead."

   A table named ``"*"`` applies to every target of the folder;
3. per case, in ``metadata.rules``: a list of ``{"id", "text"}`` objects.

A rule text may hold ``{placeholders}``: the template parts the agent fills in at run time (see
:mod:`evalcore.rules.presence` for how they are matched).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalcore.errors import InvalidInputError

RULES_FILE = "rules.toml"
"""Name of the rules file read from an agents folder."""

ALL_TARGETS = "*"
"""The ``rules.toml`` table whose rules apply to every target of the folder."""

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


class RuleError(InvalidInputError):
    """A malformed rule declaration; the message names the file (or place) and the field.

    An :class:`~evalcore.errors.InvalidInputError` (so also a ``ValueError``): HTTP 400 in the API.
    """

    field = "rules"


@dataclass(slots=True, frozen=True)
class Rule:
    """One instruction given to an agent; its record (:func:`evalcore.serial.to_record`)
    ``{"id", "text", "source"}`` is what scorer specs and score details store.

    Attributes:
        id: Short stable id (letters, digits, ``_.-``; at most 64 characters), e.g. ``"R2"``.
        text: The instruction as it should reach the model; ``{name}`` marks a template slot.
        source: Where it was declared: ``"target"``, ``"file"`` or ``"case"``.
    """

    id: str
    text: str
    source: str = "target"


def parse_rule(value: Any, *, where: str, source: str = "target") -> Rule:
    """One rule from a :class:`Rule`, an ``{"id", "text"}`` mapping or an ``(id, text)`` pair.

    Args:
        value: The declaration.
        where: The place named in errors, e.g. ``"agents/rules.toml: support-bot"`` or
            ``"case q1: metadata.rules[0]"``.
        source: Recorded on the rule.

    Raises:
        RuleError: A missing, empty or non-string id or text, an id with other characters, or
            another type of value; the message names ``where`` and the field.
    """
    if isinstance(value, Rule):
        return Rule(value.id, value.text, value.source if value.source != "target" else source)
    if isinstance(value, Mapping):
        extra = sorted(set(value) - {"id", "text", "source"})
        if extra:
            raise RuleError(f"{where}: unknown field(s) {', '.join(extra)} (a rule has 'id' and 'text')")
        rule_id, text = value.get("id"), value.get("text")
    elif isinstance(value, tuple | list) and len(value) == 2:
        rule_id, text = value
    else:
        raise RuleError(f"{where}: a rule is an object {{'id', 'text'}}, got {type(value).__name__}")
    if not isinstance(rule_id, str) or not _ID.match(rule_id):
        raise RuleError(
            f"{where}.id: a rule id is 1-64 letters, digits or '_.-' starting with a letter or digit, got {rule_id!r}"
        )
    if not isinstance(text, str) or not text.strip():
        raise RuleError(f"{where}.text: rule {rule_id!r} needs a non-empty text, got {text!r}")
    return Rule(rule_id, text.strip(), source)


def parse_rules(values: Any, *, where: str, source: str = "target") -> list[Rule]:
    """A list of rules (see :func:`parse_rule`); ids must be unique.

    Raises:
        RuleError: Not a list, a bad rule (named by index), or a repeated id.
    """
    if values is None:
        return []
    if not isinstance(values, list | tuple):
        raise RuleError(f"{where}: rules must be a list of {{'id', 'text'}} objects, got {type(values).__name__}")
    rules = [parse_rule(value, where=f"{where}[{index}]", source=source) for index, value in enumerate(values)]
    _check_unique(rules, where)
    return rules


def _check_unique(rules: Iterable[Rule], where: str) -> None:
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise RuleError(f"{where}: rule id {rule.id!r} is declared twice")
        seen.add(rule.id)


def load_rules_file(path: str | Path) -> dict[str, list[Rule]]:
    """Read a ``rules.toml``: target id (or ``"*"``) -> its rules, in file order.

    Raises:
        RuleError: Unreadable file, invalid TOML (with its line), a top-level value that is not a
            table, or a rule whose text is not a non-empty string; the message names the file
            and the field (``<target>.<rule id>``).
    """
    display = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise RuleError(f"{display}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise RuleError(f"{display}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{display}: invalid TOML: {exc}") from None
    result: dict[str, list[Rule]] = {}
    for target_id, table in data.items():
        if not isinstance(table, dict):
            raise RuleError(
                f'{display}: {target_id}: expected a table [{target_id}] of rule id = "text" lines, '
                f"got a {type(table).__name__}"
            )
        result[target_id] = [
            parse_rule((rule_id, text), where=f"{display}: {target_id}.{rule_id}", source="file")
            for rule_id, text in table.items()
        ]
    return result


def target_rules(target_id: str, declared: Iterable[Any] = (), folder: str | Path | None = None) -> list[Rule]:
    """The rules of one target: those declared on it, then the folder's ``rules.toml`` (``"*"``
    table first, then the target's own table); a later rule with the same id replaces an earlier one.

    Args:
        target_id: The target's id.
        declared: ``TargetSpec.rules``.
        folder: The agents folder (``None``: no rules file is read). A missing file is no error.

    Raises:
        RuleError: A malformed declaration or rules file.
    """
    merged: dict[str, Rule] = {r.id: r for r in parse_rules(list(declared), where=f"target {target_id!r}: rules")}
    if folder is not None:
        path = Path(folder) / RULES_FILE
        if path.is_file():
            tables = load_rules_file(path)
            for rule in (*tables.get(ALL_TARGETS, []), *tables.get(target_id, [])):
                merged[rule.id] = rule
    return list(merged.values())


def case_rules(metadata: Mapping[str, Any], *, case_id: str) -> list[Rule]:
    """The rules a case declares in ``metadata.rules`` (``[]`` when it has none).

    Raises:
        RuleError: A malformed list, named ``case <id>: metadata.rules[<i>].<field>``.
    """
    return parse_rules(metadata.get("rules"), where=f"case {case_id!r}: metadata.rules", source="case")


def merge_rules(*groups: Iterable[Rule]) -> list[Rule]:
    """Rules of several groups, in order; a later rule with an id already seen replaces it in place."""
    merged: dict[str, Rule] = {}
    for group in groups:
        for rule in group:
            merged[rule.id] = rule
    return list(merged.values())
