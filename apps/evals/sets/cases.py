"""Eval sets' writes: importing a case bank into a set, refreshing set hashes; and the small reads
the import and the run paths share (cases per split, a split's cases as engine cases).

Views, the API, admin actions and management commands call these functions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import batched
from typing import Any

from django.db import connection, transaction

from apps.core.bulk import columns, insert_rows, update_rows
from apps.evals.models import EvalCase, EvalSet, SetVersion, SetVersionCase
from apps.evals.queries.sets import split_counts
from apps.evals.results.readback import stored_case
from apps.evals.sets.versions import iter_fingerprints, record_set_version
from evalcore.jsonvalue import MISSING, json_encoder, to_json
from evalcore.loaders import cases_content_hash
from evalcore.splits import assign_split
from evalcore.types import Case


@dataclass(slots=True)
class ImportSummary:
    """What an import did: the set, and how many cases were created, updated, unchanged, removed.

    ``dialect`` and ``warnings`` come from the loader (:class:`evalcore.loaders.LoadedCaseBank`):
    the other tool whose file it was, and what it read but cannot honour.
    """

    eval_set: EvalSet
    created: int
    updated: int
    removed: int
    split_counts: dict[str, int]
    unchanged: int = 0
    kept_captured: int = 0
    kept_edited: list[str] = field(default_factory=list)
    """Ids of the cases edited since the set's last import that ``keep_edited`` left as they are."""
    dialect: str | None = None
    warnings: list[str] = field(default_factory=list)


def import_cases(
    *,
    name: str,
    cases: list[Case],
    content_hash: str = "",
    source_path: str = "",
    description: str = "",
    split_ratios: tuple[float, float, float] = (0.6, 0.2, 0.2),
    hashed_splits: frozenset[str] | set[str] = frozenset(),
    prune_captured: bool = False,
    legacy_auto_ids: Mapping[str, str] | None = None,
    split_aliases: Mapping[str, str] | None = None,
    user: Any = None,
    keep_edited: bool = False,
) -> ImportSummary:
    """Create or replace an eval set's cases from a loaded case bank, in one transaction.

    ``keep_edited`` (``make demo``'s refresh of the example sets): a case someone changed since
    the set's last import (:func:`edited_since_import`: in the admin, say) is left as it is, and
    kept when the file no longer holds it; their ids are :attr:`ImportSummary.kept_edited`.

    The set afterwards holds ``cases`` (cases absent from the file are removed; their past
    results stay, keyed by case id), plus the cases captured in the portal (from the playground
    or a trace: ``metadata["source"]`` in :data:`PORTAL_CAPTURE_SOURCES`), which a file never holds: they are kept after
    the file's cases (``kept_captured``) unless ``prune_captured``. A case without a split gets one from the stable hash
    of (set name, case id), so it never moves when others are added; a case already stored
    keeps its split unless the file names one (``hashed_splits``: ids whose split the loader
    hashed, i.e. the file gave none).

    ``legacy_auto_ids`` (derived id -> the id the first auto-id scheme gave the same case, from
    :attr:`evalcore.loaders.LoadedCaseBank.legacy_auto_ids`): a set imported before auto ids came
    from the input alone keeps the ids it holds. A derived id the set does not have yet takes
    over the stored case with its old-scheme id, or else a stored ``auto-`` case with the same
    input (its label was corrected), so that case is updated in place, keeping its split and
    its results, instead of being removed and created again.

    ``split_aliases`` (the file's split names -> evalsite's, as the loader applied them) are
    recorded on the set, replacing those of the previous import: the set says how its file's
    split names were read.

    When the cases changed, the set's next version is recorded
    (:func:`apps.evals.sets.versions.record_set_version`, by ``user`` when given).
    """
    with transaction.atomic():
        eval_set, _ = EvalSet.objects.get_or_create(name=name)
        eval_set.source_path = source_path or eval_set.source_path
        existing = _stored_rows(eval_set.pk)
        edited = edited_since_import(eval_set) if keep_edited and existing else set()
        if legacy_auto_ids and existing:
            cases, hashed_splits, renamed = _keep_legacy_auto_ids(cases, existing, legacy_auto_ids, hashed_splits)
            if renamed:
                content_hash = cases_content_hash(cases)
        eval_set.content_hash = content_hash
        eval_set.split_aliases = dict(split_aliases or {})
        if description:
            eval_set.description = description
        eval_set.save()
        to_create: list[tuple[Any, ...]] = []
        to_update: list[tuple[Any, ...]] = []
        created = updated = 0
        seen: set[str] = set()
        for position, case in enumerate(cases):
            seen.add(case.id)
            if case.id in edited:
                continue  # someone's edit wins over the file (keep_edited)
            row = existing.get(case.id)
            # a file without a split never moves a stored case: a split curated in the admin stays
            if row is not None and (case.split is None or case.id in hashed_splits):
                split = row.split
            else:
                split = case.split or assign_split(name, case.id, split_ratios)
            values = (
                _dumps(to_json(case.input)),
                _dumps(to_json(case.expected)) if case.has_expected else None,
                case.has_expected,
                _dumps(list(case.tags)) if case.tags else "[]",
                split,
                _dumps(to_json(case.metadata)) if case.metadata else "{}",
                position,
            )
            if row is None:
                to_create.append((eval_set.pk, case.id, *values))
                created += 1
            elif row.differs(values):
                to_update.append((*values, row.pk))
                # a case that only moved in the file is rewritten but not "updated": its content
                # (what the set's versions compare) is the same
                updated += row.differs(values[:-1], content_only=True)
            if len(to_create) + len(to_update) >= _CHUNK:  # written as it goes: memory stays flat
                _write_case_rows(to_create, to_update)
        _write_case_rows(to_create, to_update)
        absent = [row for cid, row in existing.items() if cid not in seen]
        captured = [] if prune_captured else [row for row in absent if _captured_in_portal(row)]
        kept_absent = [existing[cid] for cid in existing.keys() - seen if cid in edited]
        kept_absent = [row for row in kept_absent if row not in captured]
        removed_ids = [row.pk for row in absent if row not in captured and row not in kept_absent]
        for chunk in batched(removed_ids, 500):
            EvalCase.objects.filter(pk__in=chunk).delete()
        if captured:
            moved = sorted(captured, key=lambda r: r.position)
            EvalCase.objects.bulk_update(
                [EvalCase(pk=row.pk, position=len(cases) + offset) for offset, row in enumerate(moved)],
                ["position"],
                batch_size=500,
            )
        if captured or edited:
            refresh_set_hashes([eval_set.pk], record=False)  # the file plus the captured and edited cases
            eval_set.refresh_from_db(fields=["content_hash"])
        record_set_version(eval_set, source=f"import {source_path}".strip(), user=user)
    return ImportSummary(
        eval_set,
        created,
        updated,
        len(removed_ids),
        split_counts(eval_set),
        unchanged=len(cases) - created - updated - len(edited & seen),
        kept_captured=len(captured),
        kept_edited=sorted(edited),
    )


def kept_edited_line(case_ids: Sequence[str], *, shown: int = 5) -> str:
    """One line saying which edited cases an import left as they are (:attr:`ImportSummary.kept_edited`)."""
    listed = ", ".join(case_ids[:shown]) + (f" and {len(case_ids) - shown} more" if len(case_ids) > shown else "")
    return (
        f"kept {len(case_ids)} case(s) edited since the last import as they are ({listed}); "
        "`evalsite import FILE` without --keep-edited overwrites them"
    )


IMPORT_SOURCE_PREFIX = "import"
"""How an import's set version names its source (``import <path>``: :func:`import_cases`)."""


def edited_since_import(eval_set: EvalSet) -> set[str]:
    """Ids of the set's cases whose stored content differs from what its last import wrote.

    Compares each stored case's fingerprint (:func:`apps.evals.sets.versions.case_fingerprint`)
    with its fingerprint in the newest set version an import recorded; cases that version did
    not hold (captured in the portal, added in the admin) are not edits of the file's cases.
    A set with no import version has none.
    """
    imports = SetVersion.objects.filter(eval_set=eval_set, source__startswith=IMPORT_SOURCE_PREFIX)
    version = imports.order_by("-number").first()
    if version is None:
        return set()
    imported = dict(SetVersionCase.objects.filter(version=version).values_list("case_id", "fingerprint"))
    return {
        case_id
        for rows in iter_fingerprints(eval_set.pk)
        for case_id, fingerprint in rows
        if case_id in imported and imported[case_id] != fingerprint
    }


_CHUNK = 5000  # case rows per insert / update statement
_dumps = json_encoder(ascii=True)  # json.dumps's text, its encoder set up once


def _write_case_rows(to_create: list[tuple[Any, ...]], to_update: list[tuple[Any, ...]]) -> None:
    """Insert and update the rows gathered so far, then forget them."""
    insert_rows(EvalCase, _CASE_COLUMNS, to_create)
    update_rows(EvalCase, _CASE_COLUMNS[2:], to_update)
    to_create.clear()
    to_update.clear()


_CASE_FIELDS = ("eval_set", "case_id", "input", "expected", "has_expected", "tags", "split", "metadata", "position")
_CASE_COLUMNS = columns(EvalCase, _CASE_FIELDS)


@dataclass(slots=True)
class _StoredRow:
    """A stored case as the database holds it (JSON columns as their text)."""

    pk: int
    input: str
    expected: str | None
    has_expected: bool
    tags: str
    split: str
    metadata: str
    position: int

    def differs(self, values: tuple[Any, ...], *, content_only: bool = False) -> bool:
        """Whether the row's ``(input, expected, has_expected, tags, split, metadata, position)``
        differ from ``values`` (JSON compared by value when the texts differ); with
        ``content_only``, ``values`` leaves out the position and so does the comparison."""
        stored: tuple[Any, ...] = (
            self.input,
            self.expected,
            bool(self.has_expected),
            self.tags,
            self.split,
            self.metadata,
            self.position,
        )
        if content_only:
            stored = stored[:-1]
        for index, (old, new) in enumerate(zip(stored, values, strict=True)):
            if old == new:
                continue
            if index in (0, 1, 3, 5) and old is not None and new is not None and _json(old) == json.loads(new):
                continue
            return True
        return False

    def decoded(self, column: str) -> Any:
        return _json(getattr(self, column))


def _json(value: Any) -> Any:
    """A JSON column's value (its text on SQLite and psycopg; already decoded by other drivers)."""
    return json.loads(value) if isinstance(value, str) else value


def _stored_rows(set_pk: int) -> dict[str, _StoredRow]:
    """The set's stored cases by case id, read as raw rows (no model instances)."""
    names = ", ".join(connection.ops.quote_name(c) for c in ["id", *_CASE_COLUMNS[1:]])
    sql = f"SELECT {names} FROM {connection.ops.quote_name(EvalCase._meta.db_table)} WHERE eval_set_id = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [set_pk])
        return {row[1]: _StoredRow(row[0], *row[2:]) for row in cursor.fetchall()}


# ``metadata["source"]`` of the cases the portal adds (a playground conversation, an ingested
# trace): a case-bank file never holds them, so a re-import keeps them. Every capture path writes
# through :func:`apps.evals.sets.capture.add_captured_case`, which refuses a source not listed here.
PORTAL_CAPTURE_SOURCES = frozenset({"playground", "trace"})


def _captured_in_portal(row: _StoredRow) -> bool:
    """A case added in the portal (a capture), not by a case-bank file."""
    metadata = row.decoded("metadata")
    return isinstance(metadata, dict) and metadata.get("source") in PORTAL_CAPTURE_SOURCES


def _keep_legacy_auto_ids(
    cases: list[Case],
    existing: dict[str, _StoredRow],
    legacy_auto_ids: Mapping[str, str],
    hashed_splits: frozenset[str] | set[str],
) -> tuple[list[Case], set[str], int]:
    """Give derived-id cases the ids a set made with the first auto-id scheme holds for them.

    Returns:
        ``(cases with ids replaced, hashed_splits with the same renames, number renamed)``.
    """
    incoming = {case.id for case in cases}
    free = {cid: row for cid, row in existing.items() if cid.startswith("auto-") and cid not in incoming}
    if not free:
        return cases, set(hashed_splits), 0
    by_input: dict[str, list[str]] = {}
    for cid, row in free.items():
        by_input.setdefault(json.dumps(row.decoded("input"), sort_keys=True), []).append(cid)
    renamed: list[Case] = []
    splits = set(hashed_splits)
    count = 0
    for case in cases:
        old = legacy_auto_ids.get(case.id)
        if old is None or case.id in existing:
            renamed.append(case)
            continue
        if old not in free:  # the label changed too: the stored case with the same input
            same = [cid for cid in by_input.get(json.dumps(to_json(case.input), sort_keys=True), []) if cid in free]
            old = same[0] if same else None
        if old is None:
            renamed.append(case)
            continue
        del free[old]
        if case.id in splits:
            splits.discard(case.id)
            splits.add(old)
        renamed.append(dataclasses.replace(case, id=old))
        count += 1
    return renamed, splits, count


def refresh_set_hashes(
    set_ids: Iterable[int], *, source: str = "edited", user: Any = None, record: bool = True
) -> None:
    """Recompute the content hash of sets whose cases changed outside an import (admin edits,
    captured cases), so the next eval run records the set it really ran; and (``record``)
    record each changed set's next version, from ``source`` by ``user``.

    Same hash as the loader's (``evalcore.loaders.cases_content_hash``), streamed from the
    database.
    """
    for set_id in set(set_ids):
        rows = EvalCase.objects.filter(eval_set_id=set_id).iterator(chunk_size=2000)
        EvalSet.objects.filter(pk=set_id).update(content_hash=cases_content_hash(stored_case(r) for r in rows))
        if record:
            record_set_version(EvalSet.objects.get(pk=set_id), source=source, user=user)


def set_cases(eval_set: EvalSet, split: str, case_ids: Sequence[str] | None = None) -> list[Case]:
    """The set's cases as engine cases, filtered by split (``all`` for every split), in order;
    with ``case_ids``, only those (a shard's cases).

    Read as raw rows (one query, no model instances): 100,000 cases in well under a second.
    """
    quote = connection.ops.quote_name
    names = ", ".join(quote(c) for c in _CASE_COLUMNS[1:8])
    sql = f"SELECT {names} FROM {quote(EvalCase._meta.db_table)} WHERE eval_set_id = %s"
    params: list[Any] = [eval_set.pk]
    if split != "all":
        sql += " AND split = %s"
        params.append(split)
    if case_ids is not None:
        sql += f" AND case_id IN ({', '.join(['%s'] * len(case_ids))})" if case_ids else " AND 0 = 1"
        params.extend(case_ids)
    sql += " ORDER BY position, case_id"
    cases: list[Case] = []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(_CHUNK):  # in chunks: the raw rows never all held at once
            cases.extend(decoded_cases(rows))
    return cases


def split_size(eval_set_id: int, split: str) -> int:
    """How many cases one split of a set holds (``all``: every split): one counting query."""
    cases = EvalCase.objects.filter(eval_set_id=eval_set_id)
    return (cases if split == "all" else cases.filter(split=split)).count()


def iter_set_cases(
    eval_set_id: int, split: str, *, chunk: int = 1000, first: int | None = None
) -> Iterator[list[Case]]:
    """The set's cases as engine cases in :func:`set_cases`' order, ``chunk`` at a time.

    Each chunk is its own query (keyset on ``(position, case_id)``, served by the set's order
    indexes), so memory stays O(chunk) for a set of any size and no read stays open between
    chunks (an open SQLite read would hold back the WAL checkpoints of a run's writer).
    ``first``: the size of the first chunk (default ``chunk``): a small one is read sooner, so a
    run's first cases start sooner.
    """
    limit = first or chunk
    quote = connection.ops.quote_name
    names = ", ".join(quote(c) for c in _CASE_COLUMNS[1:9])
    where = f"{quote('eval_set_id')} = %s" + (f" AND {quote('split')} = %s" if split != "all" else "")
    base: list[Any] = [eval_set_id] if split == "all" else [eval_set_id, split]
    table = quote(EvalCase._meta.db_table)
    order = f"{quote('position')}, {quote('case_id')}"
    after: tuple[int, str] | None = None
    while True:
        if after is None:
            sql, params = f"SELECT {names} FROM {table} WHERE {where} ORDER BY {order} LIMIT %s", [*base, limit]
        else:
            sql = f"SELECT {names} FROM {table} WHERE {where} AND ({order}) > (%s, %s) ORDER BY {order} LIMIT %s"
            params = [*base, after[0], after[1], limit]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if not rows:
            return
        after = (rows[-1][7], rows[-1][0])
        yield decoded_cases(rows)
        if len(rows) < limit:
            return
        limit = chunk


def decoded_cases(rows: list[Any]) -> list[Case]:
    """``(case_id, input, expected, has_expected, tags, split, metadata)`` rows as engine cases."""
    inputs, expecteds, tags, metadata = (_decode_column([row[i] for row in rows]) for i in (1, 2, 4, 6))
    return [
        Case(
            id=row[0],
            input=inputs[i],
            expected=expecteds[i] if row[3] else MISSING,
            tags=tags[i] if type(tags[i]) is list else list(tags[i] or []),  # decoded fresh: not shared
            split=row[5],
            metadata=metadata[i] if type(metadata[i]) is dict else dict(metadata[i] or {}),
        )
        for i, row in enumerate(rows)
    ]


def _decode_column(values: list[Any]) -> list[Any]:
    """A JSON column's values decoded: texts in one ``json.loads`` of their array (fast)."""
    if all(v is None or isinstance(v, str) for v in values):  # SQL NULL is None, as JSON null
        return list(json.loads("[" + ",".join("null" if v is None else v for v in values) + "]"))
    return [None if v is None else _json(v) for v in values]
