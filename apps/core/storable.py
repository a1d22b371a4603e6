"""What stored text may not hold: a NUL character (U+0000).

PostgreSQL's ``text`` and ``jsonb`` cannot hold one (the write fails with ``DataError``, and a
result writer's whole batch with it), SQLite can. Every string the model fields and the bulk
writer store has it replaced by U+FFFD, the Unicode replacement character, so a target whose
output holds a NUL stores the same thing on every backend and no run fails for it. (Report files
and exports keep the value as the run produced it; the API refuses NUL in what it is sent.)
"""

from __future__ import annotations

from typing import Any

NUL_REPLACEMENT = "\ufffd"
"""What a NUL character in stored text becomes."""


def storable_text(text: str) -> str:
    """``text`` with each NUL character replaced by :data:`NUL_REPLACEMENT`."""
    return text.replace("\x00", NUL_REPLACEMENT) if "\x00" in text else text


def storable(value: Any) -> Any:
    """A JSON-like value (dict, list, tuple, str, scalars) with every string, dict keys included,
    passed through :func:`storable_text`; other objects are returned unchanged."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(storable(item) for item in value)
    return value


def holds_nul(json_text: str) -> bool:
    """Whether JSON text holds a NUL character (JSON always escapes it as ``\\u0000``; a false
    alarm on a literal backslash-u0000 only costs a walk)."""
    return "\\u0000" in json_text


def case_bank_nul_refusal() -> str | None:
    """Why an imported case bank may not hold a NUL character on this database, or ``None`` when it
    may (SQLite keeps the case as the file has it; on PostgreSQL the import would fail inside its
    ``COPY`` with no file, line or field named, so the loader refuses it instead)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        return "PostgreSQL (this site's database) cannot store it"
    return None
