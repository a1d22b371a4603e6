"""Sets have versions (issue 13 §4): each import or edit that changes a set's cases records the
next :class:`~apps.evals.models.SetVersion` (content hash, time, who, from where, counts added /
updated / removed); a run records the version it was prepared against; two versions diff by
case id.

A version's :class:`~apps.evals.models.SetVersionCase` rows hold every case id with the first 16
hex digits of the BLAKE2b hash of the case's stored columns (input, expected, tags, split,
metadata as the database keeps them), read a chunk at a time. Added / updated / removed are
counted against the previous version's rows in the database, so they hold whatever changed the
cases (a file, the admin, a captured case), and memory stays flat for a set of any size.

Each content a version holds is also kept once as a :class:`~apps.evals.models.CaseSnapshot`
(keyed by the set and the fingerprint, copied in the database by :func:`snapshot_cases`), so a
run's export writes the cases as its version held them after they were edited or removed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Max

from apps.core.bulk import columns, insert_rows
from apps.evals.models import CaseSnapshot, EvalCase, EvalSet, SetVersion, SetVersionCase


def case_fingerprint(columns: Iterable[Any]) -> str:
    """The fingerprint of a case's stored ``(input, expected, tags, split, metadata)`` columns:
    BLAKE2b (8 bytes) over each column's text (``repr`` of a non-text value), each preceded by a
    NUL byte."""
    text = "".join(["\x00" + (value if isinstance(value, str) else repr(value)) for value in columns])
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def iter_fingerprints(eval_set_id: int, *, chunk: int = 2000) -> Iterator[list[tuple[str, str]]]:
    """``(case id, fingerprint)`` of the set's stored cases, ``chunk`` at a time (raw columns, each
    chunk its own query: keyset on the set's unique case-id index)."""
    table = connection.ops.quote_name(EvalCase._meta.db_table)
    columns = "case_id, input, expected, tags, split, metadata"
    after: str | None = None
    while True:
        with connection.cursor() as cursor:
            if after is None:
                cursor.execute(
                    f"SELECT {columns} FROM {table} WHERE eval_set_id = %s ORDER BY case_id LIMIT %s",
                    [eval_set_id, chunk],
                )
            else:
                cursor.execute(
                    f"SELECT {columns} FROM {table} WHERE eval_set_id = %s AND case_id > %s ORDER BY case_id LIMIT %s",
                    [eval_set_id, after, chunk],
                )
            rows = cursor.fetchall()
        if not rows:
            return
        after = rows[-1][0]
        yield [(row[0], case_fingerprint(row[1:])) for row in rows]
        if len(rows) < chunk:
            return


@dataclass(slots=True)
class VersionDiff:
    """Case ids added, removed and changed from version ``a`` to version ``b`` (sorted)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def _change_sql(kind: str, count: bool) -> str:
    """SQL over two versions' rows (params: a, b): the case ids (or their count) added, removed or
    changed from version ``a`` to ``b``."""
    table = connection.ops.quote_name(SetVersionCase._meta.db_table)
    what = "COUNT(*)" if count else "x.case_id"
    if kind == "changed":
        return (
            f"SELECT {what} FROM {table} x JOIN {table} y ON y.version_id = %s AND y.case_id = x.case_id "
            "WHERE x.version_id = %s AND x.fingerprint <> y.fingerprint"
        )
    # added: in b, not in a; removed: in a, not in b
    return (
        f"SELECT {what} FROM {table} x WHERE x.version_id = %s AND NOT EXISTS "
        f"(SELECT 1 FROM {table} y WHERE y.version_id = %s AND y.case_id = x.case_id)"
    )


def _change_params(kind: str, a: int, b: int) -> list[int]:
    return {"added": [b, a], "removed": [a, b], "changed": [a, b]}[kind]


def _changes(a: int, b: int) -> tuple[int, int, int]:
    """How many cases were added, changed and removed from version ``a`` to ``b`` (by id)."""
    counts = []
    with connection.cursor() as cursor:
        for kind in ("added", "changed", "removed"):
            cursor.execute(_change_sql(kind, True), _change_params(kind, a, b))
            counts.append(int(cursor.fetchone()[0]))
    return counts[0], counts[1], counts[2]


def diff_versions(a: SetVersion, b: SetVersion) -> VersionDiff:
    """The cases added, removed and changed from version ``a`` to ``b`` (any order of numbers)."""
    found: dict[str, list[str]] = {}
    with connection.cursor() as cursor:
        for kind in ("added", "removed", "changed"):
            cursor.execute(_change_sql(kind, False), _change_params(kind, a.pk, b.pk))
            found[kind] = sorted(row[0] for row in cursor.fetchall())
    return VersionDiff(**found)


_ROW_COLUMNS = columns(SetVersionCase, ("version", "case_id", "fingerprint"))


def record_set_version(eval_set: EvalSet, *, source: str, user: Any = None) -> SetVersion | None:
    """Record the set's current cases as its next version, unless they equal the latest one.

    Call inside the transaction that changed the cases, after ``content_hash`` is up to date.
    The fingerprints are written and compared a chunk at a time: memory stays flat.

    Returns:
        The new version, or ``None`` when nothing changed since the latest.
    """
    latest = SetVersion.objects.filter(eval_set=eval_set).order_by("-number").first()
    if latest is not None and latest.content_hash == eval_set.content_hash:
        return None
    number = (SetVersion.objects.filter(eval_set=eval_set).aggregate(m=Max("number"))["m"] or 0) + 1
    version = SetVersion.objects.create(
        eval_set=eval_set,
        number=number,
        content_hash=eval_set.content_hash,
        created_by=user if getattr(user, "pk", None) else None,
        source=source[:1000],
    )
    n_cases = 0
    for rows in iter_fingerprints(eval_set.pk):
        insert_rows(SetVersionCase, _ROW_COLUMNS, [(version.pk, case_id, fp) for case_id, fp in rows])
        n_cases += len(rows)
    if latest is None:
        added, updated, removed = n_cases, 0, 0
    else:
        added, updated, removed = _changes(latest.pk, version.pk)
        if not (added or updated or removed):
            version.delete()
            return None
    version.n_cases, version.added, version.updated, version.removed = n_cases, added, updated, removed
    version.save(update_fields=["n_cases", "added", "updated", "removed"])
    snapshot_cases(version)
    return version


def snapshot_sql() -> str:
    """SQL (params: set id, version id, set id) copying the content of a version's cases whose
    fingerprint has no :class:`~apps.evals.models.CaseSnapshot` yet from the set's stored cases:
    one statement in the database, memory flat (also used by migration 0022)."""
    quote = connection.ops.quote_name
    snap, rows, cases = (quote(m._meta.db_table) for m in (CaseSnapshot, SetVersionCase, EvalCase))
    return (
        f"INSERT INTO {snap} (eval_set_id, fingerprint, input, expected, has_expected, tags, split, metadata) "
        "SELECT c.eval_set_id, v.fingerprint, c.input, c.expected, c.has_expected, c.tags, c.split, c.metadata "
        f"FROM {rows} v JOIN {cases} c ON c.eval_set_id = %s AND c.case_id = v.case_id "
        f"WHERE v.version_id = %s AND NOT EXISTS (SELECT 1 FROM {snap} s WHERE s.eval_set_id = %s "
        "AND s.fingerprint = v.fingerprint) ON CONFLICT DO NOTHING"
    )


def snapshot_cases(version: SetVersion) -> None:
    """Keep the content of the version's cases that no snapshot holds yet (an unchanged case costs
    nothing). Call while the set's stored cases are the version's: in the transaction that
    recorded it (:func:`record_set_version` does)."""
    with connection.cursor() as cursor:
        cursor.execute(snapshot_sql(), [version.eval_set_id, version.pk, version.eval_set_id])


def current_version(eval_set: EvalSet) -> SetVersion | None:
    """The set's latest version (``None`` for a set imported before versions were recorded)."""
    return SetVersion.objects.filter(eval_set=eval_set).order_by("-number").first()
