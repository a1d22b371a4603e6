"""The content hash of a case bank: sha256 over the cases' canonical records in id order.

:func:`cases_content_hash` sorts the cases first; :func:`sorted_cases_content_hash` takes them
already in id order (streamed from a database: memory O(1)). Both give the same value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import fields
from operator import attrgetter
from typing import Any

from evalcore.jsonvalue import MISSING, json_encoder
from evalcore.loaders._json import canonical_json
from evalcore.types import Case


def cases_content_hash(cases: Iterable[Case]) -> str:
    """sha256 hex over the cases' canonical records, independent of case order.

    Each case becomes its canonical JSONL record (:func:`evalcore.serial.to_record`, assigned split included)
    serialised by canonical JSON (sorted keys, no spaces, UTF-8 as is); the records are sorted by
    case id and joined with ``\\n``. Reordering a file keeps the hash; changing any id, input,
    expected value, tag, split or metadata value changes it. ``[]`` hashes the empty string.
    """
    return sorted_cases_content_hash(sorted(cases, key=attrgetter("id")))


_CASE_ATTRS = tuple(f.name for f in fields(Case))


def hash_record(case: Case) -> dict[str, Any]:
    """The case's record as the content hash reads it: :func:`evalcore.serial.to_record`'s keys
    and values (``expected`` left out when missing), built directly (a fifth of the time; the
    keys' order is the canonical JSON's, so only the values matter). Not a copy: read it only."""
    record = {name: getattr(case, name) for name in _CASE_ATTRS}
    if case.expected is MISSING:
        del record["expected"]
    return record


def sorted_cases_content_hash(cases: Iterable[Case]) -> str:
    """:func:`evalcore.loaders.cases_content_hash` of cases already in id order (streamed:
    memory O(1)); the same value.

    Raises:
        ValueError: The cases are not in strictly increasing id order.
    """
    digest = hashlib.sha256()
    previous: str | None = None
    for case in cases:
        if previous is not None:
            if case.id <= previous:
                raise ValueError(f"cases out of id order: {case.id!r} after {previous!r}")
            digest.update(b"\n")
        previous = case.id
        digest.update(_record_text(case).encode())
    return digest.hexdigest()


_canonical = json_encoder(sort_keys=True, compact=True)  # canonical_json's text, set up once
_HASHED_FIELDS = ("expected", "id", "input", "metadata", "split", "tags")


def _record_text(case: Case) -> str:
    """``canonical_json(hash_record(case))``, written field by field (no record dict)."""
    head = "{" if case.expected is MISSING else '{"expected":' + _canonical(case.expected) + ","
    return (
        f'{head}"id":{_canonical(case.id)},"input":{_canonical(case.input)},"metadata":{_canonical(case.metadata)},'
        f'"split":{_canonical(case.split)},"tags":{_canonical(case.tags)}}}'
    )


if tuple(sorted(f.name for f in fields(Case))) != _HASHED_FIELDS:  # pragma: no cover - a new Case field

    def _record_text(case: Case) -> str:
        return canonical_json(hash_record(case))
