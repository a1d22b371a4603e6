"""Case banks read one case at a time, for importers that write as they go (memory flat for a
file of any size): :func:`stream_cases`, and the content hash of cases streamed in id order
(:func:`sorted_cases_content_hash`, the same value as :func:`evalcore.loaders.cases_content_hash`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields

from evalcore.jsonvalue import MISSING, json_encoder
from evalcore.loaders import _no_cases, _prepare, hash_record
from evalcore.loaders._io import CaseBankSource, SourceFile
from evalcore.loaders._json import canonical_json
from evalcore.loaders._jsonl import Records
from evalcore.loaders._records import RecordBuilder
from evalcore.splits import DEFAULT_RATIOS
from evalcore.types import Case


@dataclass(slots=True)
class CaseBankStream:
    """A case bank read one case at a time, with memory flat for a file of any size
    (:func:`stream_cases`). Iterate it once: ``(case, split_hashed)`` per case, in file order.

    Attributes:
        name: The eval set name (as :attr:`LoadedCaseBank.name`).
        path: The file, as the caller named it.
        format, dialect, warnings: As :class:`LoadedCaseBank`'s.
    """

    name: str
    path: str
    format: str
    dialect: str | None
    warnings: list[str]
    _source: SourceFile
    _builder: RecordBuilder
    _records: Records

    def __iter__(self) -> Iterator[tuple[Case, bool]]:
        builder = self._builder
        build = builder.build
        count = 0
        for line, record in self._records:
            case = build(record, line)
            yield case, builder.split_hashed
            count += 1
        if not count:
            raise _no_cases(self._source)
        builder.finish()


def stream_cases(
    path: CaseBankSource,
    *,
    name: str | None = None,
    mapping: dict[str, str] | None = None,
    set_name: str | None = None,
    split_ratios: Sequence[float] = DEFAULT_RATIOS,
    file_format: str | None = None,
    split_aliases: Mapping[str, str] | None = None,
) -> CaseBankStream:
    """Open a case bank to read it one case at a time without keeping its ids (an importer
    writing as it goes: memory O(1) per case, not O(cases)).

    The checks of :func:`load_cases` apply to each record as it is reached, except one: a
    duplicate id is *not* detected here (that needs every id seen), so the caller must (e.g.
    with the unique index it writes into) and report it, e.g. by calling :func:`load_cases`,
    which names both lines. No auto ids (they need every id seen). JSONL is streamed; JSON, CSV
    and the other formats are parsed whole first, as by :func:`iter_cases`.

    Raises:
        CaseBankError: File-level problems at once; a record's problem when it is reached.
        ValueError: On a bad ``mapping``, ``split_ratios``, ``set_name`` or ``split_aliases``.
    """
    source, builder, records, found = _prepare(
        path, mapping, False, set_name, split_ratios, file_format, name, split_aliases, track_ids=False
    )
    return CaseBankStream(
        name=builder.set_name,
        path=source.display,
        format=found.format,
        dialect=found.dialect,
        warnings=list(found.warnings),
        _source=source,
        _builder=builder,
        _records=records,
    )


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
