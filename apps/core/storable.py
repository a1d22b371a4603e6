"""What stored text may not hold: a NUL character (U+0000) or a lone UTF-16 surrogate (U+D800–U+DFFF).

Both are text Python can hold and a database cannot write. PostgreSQL's ``text`` and ``jsonb``
cannot hold a NUL (the write fails with ``DataError``, and a result writer's whole batch with it);
SQLite can. A surrogate code point (half of a UTF-16 pair, e.g. ``"\\ud83d"`` from an emoji cut in
two, or what ``surrogateescape`` makes of an undecodable byte) has no UTF-8 form at all, so no
backend can write it (the driver raises ``UnicodeEncodeError`` before the database sees the row).
Every string the model fields and the bulk writer store has each such character replaced by U+FFFD,
the Unicode replacement character, a visible marker (the case page shows ``�`` where it was), so a
target whose output holds one stores the same thing on every backend and no run fails for it.
(Report files and exports keep the value as the run produced it, where their format can carry it;
the API refuses both in what it is sent; a case file holding a lone surrogate is refused by the
loaders, with its line and field.)
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
"""What a NUL character or a surrogate code point in stored text becomes."""

NUL_REPLACEMENT = REPLACEMENT
"""What a NUL character in stored text becomes (the same :data:`REPLACEMENT`)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_encodable(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form, i.e. holds no surrogate code point (U+D800–U+DFFF).

    ASCII text answers at once; other text is encoded once (about 1 µs per KB, a third of a
    regular-expression search), which only fails when a surrogate is there.
    """
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_text(text: str) -> str:
    """``text`` with each NUL character and each surrogate code point replaced by :data:`REPLACEMENT`
    (one per code point: the two halves of a pair Python keeps apart become two)."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if not utf8_encodable(text):
        text = _SURROGATE.sub(REPLACEMENT, text)
    return text


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


def unstorable_reason(text: str) -> str | None:
    """Why people's typed ``text`` (a form field, a query parameter, a review comment, a run's
    name) cannot be stored as typed, or ``None`` when it can: it holds a NUL character
    (PostgreSQL refuses it, SQLite keeps it: refused on both, so both answer alike) or a lone
    surrogate (no database can encode it). Typed text is refused, not replaced: what a person
    typed is saved as typed or not at all."""
    if "\x00" in text:
        return "may not contain a NUL character (U+0000)"
    if not utf8_encodable(text):
        return "may not contain a lone UTF-16 surrogate (U+D800-U+DFFF): no database can store it"
    return None


def holds_unstorable(json_text: str) -> bool:
    """Whether JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) holds a NUL
    character or a surrogate code point: JSON always escapes a NUL as ``\\u0000`` (a false alarm
    on a literal backslash-u0000 only costs a walk); a surrogate stays a raw code point."""
    return "\\u0000" in json_text or not utf8_encodable(json_text)


def case_bank_nul_refusal() -> str | None:
    """Why an imported case bank may not hold a NUL character on this database, or ``None`` when it
    may (SQLite keeps the case as the file has it; on PostgreSQL the import would fail inside its
    ``COPY`` with no file, line or field named, so the loader refuses it instead). A lone surrogate
    is refused on every database (the loaders do that themselves)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        return "PostgreSQL (this site's database) cannot store it"
    return None
