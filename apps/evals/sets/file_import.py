"""A case-bank file imported into its set as it is read (the CLI's ``eval --set FILE`` and
``import``): memory stays flat for a file of any size.

Two common cases never hold the set in memory:

* a **new set** (or one with no cases): the cases are inserted a chunk at a time; the set's
  unique ``(set, case id)`` index catches a duplicate id, and the content hash is computed from
  the stored cases afterwards, in id order (the same value the loader computes);
* the **same file again** (every case stored as the file has it, at its position, and nothing
  else stored): the file is compared with the stored cases a chunk at a time and nothing is
  written.

Any other import (cases changed, added or removed; auto ids) goes through
:func:`apps.evals.sets.cases.import_cases` with the whole bank loaded. A file with a problem is loaded
whole too, so its first problem in file order is the one reported (a duplicate names both
lines), exactly as :func:`evalcore.loaders.load_cases` reports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from django.db import connection, transaction

from apps.core.bulk import columns, insert_rows
from apps.core.storable import case_bank_nul_refusal
from apps.evals.models import EvalCase, EvalSet
from apps.evals.queries.sets import split_counts
from apps.evals.sets.cases import ImportSummary, decoded_cases, import_cases
from apps.evals.sets.versions import record_set_version
from evalcore.jsonvalue import json_encoder, to_json
from evalcore.loaders import CaseBankError, load_cases
from evalcore.loaders.errors import too_deep_error
from evalcore.loaders.stream import CaseBankStream, sorted_cases_content_hash, stream_cases
from evalcore.types import Case

CHUNK = 2000
"""Cases per insert or comparison."""

_FIELDS = ("eval_set", "case_id", "input", "expected", "has_expected", "tags", "split", "metadata", "position")
_COLUMNS = columns(EvalCase, _FIELDS)
_dumps = json_encoder(ascii=True)  # as json.dumps writes (what import_cases stores)


class _NotStreamable(Exception):
    """The file must be imported whole (a duplicate id, or a set whose cases change)."""


def import_case_file(
    path: str,
    *,
    mapping: dict[str, str] | None = None,
    auto_id: bool = False,
    set_name: str | None = None,
    prune_captured: bool = False,
    split_aliases: Mapping[str, str] | None = None,
    user: Any = None,
    keep_edited: bool = False,
) -> ImportSummary:
    """Import the case bank at ``path`` into its set (see the module docstring for when it is
    streamed), in one transaction; what :func:`apps.evals.sets.cases.import_cases` does with the loaded
    bank, with the loader's dialect and warnings on the summary.

    Raises:
        CaseBankError: A problem in the file (the first one in file order); nothing is written.
            A value nested so deeply that reading or storing it hits Python's recursion limit is
            one too (the last resort: the readers refuse nesting over ``EVALSITE_IMPORT_MAX_DEPTH``).
        ValueError: A bad ``mapping``, ``set_name`` or ``split_aliases``.
    """
    try:
        return _import_case_file(path, mapping, auto_id, set_name, prune_captured, split_aliases, user, keep_edited)
    except RecursionError:
        raise too_deep_error(path) from None


def _import_case_file(
    path: str,
    mapping: dict[str, str] | None,
    auto_id: bool,
    set_name: str | None,
    prune_captured: bool,
    split_aliases: Mapping[str, str] | None,
    user: Any,
    keep_edited: bool,
) -> ImportSummary:
    forbid_nul = case_bank_nul_refusal()
    if not auto_id:
        stream = stream_cases(
            path, mapping=mapping, set_name=set_name, split_aliases=split_aliases, forbid_nul=forbid_nul
        )
        try:
            with transaction.atomic():
                summary = _import_streamed(stream, path, split_aliases, user)
            summary.dialect, summary.warnings = stream.dialect, stream.warnings
            return summary
        except (CaseBankError, _NotStreamable):
            pass  # loaded whole below: it reports the file's first problem, or imports the change
    bank = load_cases(
        path, mapping=mapping, auto_id=auto_id, set_name=set_name, split_aliases=split_aliases, forbid_nul=forbid_nul
    )
    summary = import_cases(
        name=bank.name,
        cases=bank.cases,
        content_hash=bank.content_hash,
        source_path=path,
        hashed_splits=bank.hashed_splits,
        prune_captured=prune_captured,
        legacy_auto_ids=bank.legacy_auto_ids,
        split_aliases=split_aliases,
        user=user,
        keep_edited=keep_edited,
    )
    summary.dialect, summary.warnings = bank.dialect, bank.warnings
    return summary


def _import_streamed(
    stream: CaseBankStream, path: str, split_aliases: Mapping[str, str] | None, user: Any
) -> ImportSummary:
    """A new set's cases inserted, or the same file recognised, a chunk at a time.

    Raises:
        _NotStreamable: A duplicate id, or the set's stored cases differ from the file.
        CaseBankError: From the file.
    """
    eval_set, _ = EvalSet.objects.get_or_create(name=stream.name)
    stored = EvalCase.objects.filter(eval_set=eval_set).count()
    if stored:
        if _same_as_stored(eval_set, stream) != stored:
            raise _NotStreamable
        created = 0
        unchanged = stored
    else:
        created = _insert(eval_set, stream)
        unchanged = 0
    eval_set.source_path = path or eval_set.source_path
    eval_set.split_aliases = dict(split_aliases or {})
    if created or not eval_set.content_hash:
        eval_set.content_hash = stored_content_hash(eval_set.pk)
    eval_set.save()
    record_set_version(eval_set, source=f"import {path}".strip(), user=user)
    return ImportSummary(eval_set, created, 0, 0, split_counts(eval_set), unchanged=unchanged)


def _rows(eval_set: EvalSet, cases: Iterator[tuple[Case, bool]]) -> Iterator[list[tuple[Any, ...]]]:
    """The cases as ``EvalCase`` rows (``_COLUMNS`` order, as ``import_cases`` writes them), a
    chunk at a time."""
    chunk: list[tuple[Any, ...]] = []
    for position, (case, _) in enumerate(cases):
        chunk.append(
            (
                eval_set.pk,
                case.id,
                _dumps(to_json(case.input)),
                _dumps(to_json(case.expected)) if case.has_expected else None,
                case.has_expected,
                _dumps(case.tags) if case.tags else "[]",
                case.split,
                _dumps(to_json(case.metadata)) if case.metadata else "{}",
                position,
            )
        )
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _insert(eval_set: EvalSet, stream: CaseBankStream) -> int:
    """Insert every case of a set that has none; the number inserted.

    Raises:
        _NotStreamable: A case id came twice (the unique index kept one row).
    """
    total = 0
    for chunk in _rows(eval_set, iter(stream)):
        if insert_rows(EvalCase, _COLUMNS, chunk, unique=_COLUMNS[:2]) < len(chunk):
            raise _NotStreamable  # a duplicate id: load_cases names both of its lines
        total += len(chunk)
    return total


def _same_as_stored(eval_set: EvalSet, stream: CaseBankStream) -> int:
    """How many of the file's cases are stored exactly as the file has them, at their position.

    Raises:
        _NotStreamable: At the first case that is not (the import must write).
    """
    quote = connection.ops.quote_name
    names = ", ".join(quote(c) for c in _COLUMNS[1:])
    table = quote(EvalCase._meta.db_table)
    matched = 0
    for chunk in _rows(eval_set, iter(stream)):
        ids = [row[1] for row in chunk]
        sql = f"SELECT {names} FROM {table} WHERE eval_set_id = %s AND case_id IN ({', '.join(['%s'] * len(ids))})"
        with connection.cursor() as cursor:
            cursor.execute(sql, [eval_set.pk, *ids])
            found = {row[0]: row for row in cursor.fetchall()}
        for row in chunk:
            have = found.get(row[1])
            if have is None or not _same_row(have, row[1:]):
                raise _NotStreamable
        matched += len(chunk)
    return matched


def _same_row(stored: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """Whether a stored ``(case_id, input, expected, has_expected, tags, split, metadata,
    position)`` row holds the same values as the one the file gives (JSON by value)."""
    for index, (old, value) in enumerate(zip(stored, new, strict=True)):
        if old == value:
            continue
        if index in (1, 2, 4, 6) and old is not None and value is not None and _json(old) == json.loads(value):
            continue
        if index == 3 and bool(old) == bool(value):
            continue
        return False
    return True


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def stored_content_hash(eval_set_id: int) -> str:
    """The set's content hash from its stored cases (the value the loader computes for the same
    cases), read in id order a chunk at a time: memory stays flat."""
    return sorted_cases_content_hash(_stored_in_id_order(eval_set_id))


def _stored_in_id_order(eval_set_id: int) -> Iterator[Case]:
    """The set's cases in case-id order (code points, as Python sorts), streamed by one query."""
    collate = ' COLLATE "C"' if connection.vendor == "postgresql" else ""  # code-point order
    names = ", ".join(connection.ops.quote_name(c) for c in _COLUMNS[1:8])
    sql = (
        f"SELECT {names} FROM {connection.ops.quote_name(EvalCase._meta.db_table)} "
        f"WHERE eval_set_id = %s ORDER BY case_id{collate}"
    )
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, [eval_set_id])
        while rows := cursor.fetchmany(CHUNK):
            yield from decoded_cases(rows)
