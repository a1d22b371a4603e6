"""Sets have versions (issue 13 §4): each import or edit that changes a set's cases records the
next :class:`~apps.evals.models.SetVersion` (content hash, time, who, from where, counts added /
updated / removed); a run records the version it was prepared against; two versions diff by
case id.

A version's ``fingerprints`` map every case id to the first 16 hex digits of the BLAKE2b hash of
the case's stored columns (input, expected, tags, split, metadata as the database keeps them),
read in one query. Added / updated / removed are counted against the previous version's map, so
they hold whatever changed the cases (a file, the admin, a captured case).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Max

from apps.evals.models import EvalCase, EvalSet, SetVersion


def case_fingerprints(eval_set_id: int) -> dict[str, str]:
    """``{case id: 16-hex-digit fingerprint}`` of the set's stored cases (one query, raw columns)."""
    table = EvalCase._meta.db_table
    sql = f"SELECT case_id, input, expected, tags, split, metadata FROM {table} WHERE eval_set_id = %s"
    found: dict[str, str] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [eval_set_id])
        for case_id, *columns in cursor.fetchall():
            digest = hashlib.blake2b(digest_size=8)
            for value in columns:
                digest.update(b"\x00" + (value if isinstance(value, str) else repr(value)).encode("utf-8"))
            found[case_id] = digest.hexdigest()
    return found


@dataclass(slots=True)
class VersionDiff:
    """Case ids added, removed and changed from version ``a`` to version ``b`` (sorted)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def diff_fingerprints(before: dict[str, str], after: dict[str, str]) -> VersionDiff:
    """What changed from ``before`` to ``after`` (two fingerprint maps)."""
    return VersionDiff(
        added=sorted(set(after) - set(before)),
        removed=sorted(set(before) - set(after)),
        changed=sorted(k for k in set(before) & set(after) if before[k] != after[k]),
    )


def diff_versions(a: SetVersion, b: SetVersion) -> VersionDiff:
    """The cases added, removed and changed from version ``a`` to ``b`` (any order of numbers)."""
    return diff_fingerprints(a.fingerprints or {}, b.fingerprints or {})


def record_set_version(eval_set: EvalSet, *, source: str, user: Any = None) -> SetVersion | None:
    """Record the set's current cases as its next version, unless they equal the latest one.

    Call inside the transaction that changed the cases, after ``content_hash`` is up to date.

    Returns:
        The new version, or ``None`` when nothing changed since the latest.
    """
    latest = SetVersion.objects.filter(eval_set=eval_set).order_by("-number").first()
    if latest is not None and latest.content_hash == eval_set.content_hash:
        return None
    fingerprints = case_fingerprints(eval_set.pk)
    change = diff_fingerprints(latest.fingerprints if latest else {}, fingerprints)
    if latest is not None and change.empty:
        return None
    number = (SetVersion.objects.filter(eval_set=eval_set).aggregate(m=Max("number"))["m"] or 0) + 1
    return SetVersion.objects.create(
        eval_set=eval_set,
        number=number,
        content_hash=eval_set.content_hash,
        created_by=user if getattr(user, "pk", None) else None,
        source=source[:1000],
        n_cases=len(fingerprints),
        added=len(change.added),
        updated=len(change.changed),
        removed=len(change.removed),
        fingerprints=fingerprints,
    )


def current_version(eval_set: EvalSet) -> SetVersion | None:
    """The set's latest version (``None`` for a set imported before versions were recorded)."""
    return SetVersion.objects.filter(eval_set=eval_set).order_by("-number").defer("fingerprints").first()
