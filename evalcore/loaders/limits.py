"""The size limits of imports: what a small file may grow into once read.

A few hundred bytes of promptfoo config can name ten million tests (list-valued vars multiply), a
YAML file can repeat one anchor a billion times through aliases, and a zip member of an Inspect
``.eval`` log can inflate a thousandfold. Each reader checks its limit *before* the memory is
spent (the product of the vars' lengths before expanding them, the aliased size of a YAML
document before building it, the decompressed bytes of a member as they stream), and refuses
with one line naming the file and the limit.

====================================  =============  =============================================
environment variable                  default        what it limits
====================================  =============  =============================================
``EVALSITE_IMPORT_MAX_CASES``         100,000        cases one promptfoo file expands to (its
                                                     tests and the files it names, every
                                                     combination of list-valued vars counted)
``EVALSITE_IMPORT_MAX_YAML_NODES``    1,000,000      YAML values a document's aliases add (an
                                                     alias counts the whole value it repeats);
                                                     a document without aliases is not limited
``EVALSITE_IMPORT_MAX_DEPTH``         100            levels of lists and objects inside each
                                                     other in one value of a case file or a
                                                     promptfoo config, YAML and JSON alike
                                                     (checked as a YAML document is composed,
                                                     before Python's recursion limit is near)
``EVALSITE_INSPECT_MAX_MEMBER_MB``    256            decompressed size of one member of an
                                                     Inspect ``.eval`` log, in MiB
``EVALSITE_IMPORT_MAX_INFLATED_MB``   512            decompressed size of a gzip-compressed
                                                     case file read whole (JSON, YAML, CSV,
                                                     Arrow), and of an Inspect ``.eval`` log's
                                                     header and samples in all (checked against
                                                     the sizes the archive declares before any
                                                     member is read, and counted as they are
                                                     read), in MiB
====================================  =============  =============================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_CASES",
    "MAX_DEPTH",
    "MAX_INFLATED_MB",
    "MAX_MEMBER_MB",
    "MAX_YAML_NODES",
    "Limit",
    "nested_deeper_than",
    "too_deep_reason",
]


@dataclass(frozen=True, slots=True)
class Limit:
    """One import limit: its default, and the environment variable that raises (or lowers) it.

    Attributes:
        env: The environment variable read at each use (so a test or a server may change it).
        default: The value when the variable is unset or empty.
        what: What it counts, for messages (``"cases"``).
    """

    env: str
    default: int
    what: str

    def value(self) -> int:
        """The limit in force.

        Raises:
            ValueError: The variable is set to something other than a positive whole number.
        """
        raw = os.environ.get(self.env, "").strip().replace("_", "")
        if not raw:
            return self.default
        if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"{self.env} must be a positive whole number (a limit on {self.what}), got {raw!r}")
        return int(raw)

    def how_to_raise(self) -> str:
        """The advice a refusal ends with: ``set EVALSITE_X to raise it``."""
        return f"set {self.env} to raise it"


MAX_CASES = Limit("EVALSITE_IMPORT_MAX_CASES", 100_000, "cases per file")
"""Cases one promptfoo file may expand to."""

MAX_YAML_NODES = Limit("EVALSITE_IMPORT_MAX_YAML_NODES", 1_000_000, "values YAML aliases add")
"""YAML values a document's aliases may add to it."""

MAX_MEMBER_MB = Limit("EVALSITE_INSPECT_MAX_MEMBER_MB", 256, "MiB per .eval member")
"""Decompressed MiB of one member of an Inspect ``.eval`` log."""

MAX_INFLATED_MB = Limit("EVALSITE_IMPORT_MAX_INFLATED_MB", 512, "MiB a gzip file or an .eval log inflates to")
"""Decompressed MiB of a gzip-compressed case file that is read whole, and of an Inspect ``.eval``
log's members in all."""

MAX_DEPTH = Limit("EVALSITE_IMPORT_MAX_DEPTH", 100, "levels of nesting")
"""How many levels of lists and objects one imported value may nest (YAML and JSON alike)."""

TOO_DEEP_NOTE = "lists or objects inside each other"


def too_deep_reason(limit: int) -> str:
    """The refusal of a value nested deeper than ``limit`` (one line, with how to raise it)."""
    return (
        f"a value is nested more than {limit} levels deep ({TOO_DEEP_NOTE}), over the limit "
        f"({MAX_DEPTH.how_to_raise()}); nothing imported"
    )


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether a JSON-like ``value`` nests lists / tuples / dicts more than ``limit`` levels deep
    (a scalar is level 0, ``[]`` level 1). Walked without recursion; a flat value costs one check."""
    if not isinstance(value, dict | list | tuple):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False
