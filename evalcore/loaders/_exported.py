"""Evalsite's own exports read back as case banks: the run's data is left out, the cases kept.

A row of an Evalsite export (a run, a comparison, a review queue: :mod:`evalcore.tables`) is a
canonical case record (``id``, ``input``, ``expected``, ``tags``, ``split``, ``metadata``) plus
what the export adds under one key, :data:`EXPORT_KEY` (``"evalsite"``): an object in JSONL,
``evalsite.*`` columns in CSV and Parquet. A file whose first record has that key (or such a
column) is read as an export:

* the ``evalsite`` key and every ``evalsite.*`` field are dropped (not kept in metadata, as
  other unused fields are);
* several rows may describe one case (one per repeat of a run): the case is read from its first
  row and later rows with the same ``id`` are skipped.

A file whose first record has no such field is read exactly as before, record for record.
"""

from __future__ import annotations

from typing import Any

from evalcore.loaders._jsonl import Records

EXPORT_KEY = "evalsite"
"""The key under which an Evalsite export keeps a row's run data (``evalsite.`` prefixes its CSV columns)."""

_PREFIX = EXPORT_KEY + "."


def is_export_record(record: dict[str, Any]) -> bool:
    """The record carries an export's run data (:data:`EXPORT_KEY`, or a column under it)."""
    return EXPORT_KEY in record or any(key.startswith(_PREFIX) for key in record)


def without_export_fields(records: Records) -> Records:
    """``records`` as they are, unless the first one is an export row (see the module docstring)."""
    iterator = iter(records)
    first = next(iterator, None)
    if first is None:
        return
    if not is_export_record(first[1]):
        yield first
        yield from iterator
        return
    yield from _strip(first, iterator)


def _strip(first: tuple[int, dict[str, Any]], rest: Records) -> Records:
    seen: set[str] = set()
    for line, record in _chain(first, rest):
        kept = {key: value for key, value in record.items() if key != EXPORT_KEY and not key.startswith(_PREFIX)}
        case_id = kept.get("id")
        if isinstance(case_id, str | int):  # other types: the builder names the error
            key = str(case_id)  # the builder reads 7 and "7" as one id
            if key in seen:
                continue  # another row (repeat) of a case already read
            seen.add(key)
        yield line, kept


def _chain(first: tuple[int, dict[str, Any]], rest: Records) -> Records:
    yield first
    yield from rest
