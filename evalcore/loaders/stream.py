"""Case banks read one case at a time, for importers that write as they go (memory flat for a
file of any size): :func:`stream_cases`, and the content hash of cases streamed in id order
(:func:`sorted_cases_content_hash`, the same value as :func:`evalcore.loaders.cases_content_hash`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from evalcore.loaders import _no_cases, _prepare
from evalcore.loaders._hashing import sorted_cases_content_hash
from evalcore.loaders._io import CaseBankSource, SourceFile
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
    forbid_nul: str | None = None,
) -> CaseBankStream:
    """Open a case bank to read it one case at a time without keeping its ids (an importer
    writing as it goes: memory O(1) per case, not O(cases)).

    The checks of :func:`load_cases` apply to each record as it is reached, except one: a
    duplicate id is *not* detected here (that needs every id seen), so the caller must (e.g.
    with the unique index it writes into) and report it, e.g. by calling :func:`load_cases`,
    which names both lines. No auto ids (they need every id seen). JSONL is streamed; JSON, CSV
    and the other formats are parsed whole first, as by :func:`iter_cases`. ``forbid_nul``: as
    :func:`load_cases`'s.

    Raises:
        CaseBankError: File-level problems at once; a record's problem when it is reached.
        ValueError: On a bad ``mapping``, ``split_ratios``, ``set_name`` or ``split_aliases``.
    """
    source, builder, records, found = _prepare(
        path,
        mapping,
        False,
        set_name,
        split_ratios,
        file_format,
        name,
        split_aliases,
        track_ids=False,
        forbid_nul=forbid_nul,
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


__all__ = ["CaseBankStream", "sorted_cases_content_hash", "stream_cases"]
