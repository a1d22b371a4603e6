"""A run's per-case digest (issue 30, floor 5): what comparing it needs of each result, as compact
numpy arrays, so two million-result runs are compared by merging two arrays
(:mod:`apps.evals.queries.compare_digest`) rather than by a SQL join of two million rows.

The arrays, one entry per result, in the order ``ORDER BY case_id, repeat_index`` gives on the
database (the compare table's tie-break, so the digest orders ties as the SQL path does):

* ``key`` (uint64): the first 8 bytes of BLAKE2b over ``case_id``, a NUL byte and the repeat
  index: the join key of two runs. A run whose keys collide (about 3e-8 for a million results)
  has no digest and is compared in SQL;
* ``by_key`` (uint32): the positions sorted by ``key``, for the merge;
* ``case`` (uint32): the index of the distinct case id (equal for a case's repeats);
* ``passed`` (bool), ``score`` (float64, NaN where none) and ``id`` (int64, the result's id).

About 33 bytes a result (33 MB for a million). Built in memory on the first comparison that
needs it (a read never writes) and kept in this process (the last :data:`KEEP` runs); a digest
that no longer matches its run (a resume added results: its counters or its highest result id
moved) is built again. A stored digest (``RunDigest``, written by :func:`store_digest` when
:data:`STORE_FROM` allows: off by default, see there) is read instead of building one.
"""

from __future__ import annotations

import hashlib
import io
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connection

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, RunDigest

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

VERSION = 1
"""The layout of the stored arrays; a stored digest of another version is ignored."""

KEEP = 4
"""Digests kept in this process (the runs compared last)."""

STORE_FROM: int | None = None
"""Results from which a run's digest is stored as the run ends (``None``: never, the default). A
digest is otherwise built in memory on the run's first comparison and kept in that process.
Storing one at the run's end put the digest's arrays (and the lists they are built from) in the
running process: the peak memory of a million-case ``evalsite eval`` would grow with the run,
which issue 30's memory floor forbids (flat within 10% from 10,000 to 1,000,000 cases); and at
10,000 cases it cost ~0.3 s of a ~2 s CLI run (numpy's import and a read of the whole run)."""

LIVE = (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING)

_ARRAYS = ("key", "by_key", "case", "passed", "score", "id")


@dataclass(frozen=True, slots=True)
class Stamp:
    """The state of a run a digest was built from: a digest serves the run while it matches."""

    n_done: int
    status: str
    max_result_id: int


@dataclass(frozen=True, slots=True)
class Digest:
    """One run's digest (see the module's note for each array)."""

    stamp: Stamp
    key: npt.NDArray[np.uint64]
    by_key: npt.NDArray[np.uint32]
    case: npt.NDArray[np.uint32]
    passed: npt.NDArray[np.bool_]
    score: npt.NDArray[np.float64]
    id: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.key.size)


class DigestUnavailable(Exception):
    """The run has no digest: it is live, or two of its cases hash alike (compare it in SQL)."""


def current_stamps(*runs: EvalRun) -> list[Stamp]:
    """What a digest of each run must match now: its counters and status (as loaded) and its
    highest result id (results of an ended run are only ever added, by a resume, so a new result
    moves it); one query of one indexed lookup per run."""
    table = EvalResult._meta.db_table
    lookups = ", ".join(f"(SELECT MAX(id) FROM {table} WHERE eval_run_id = %s)" for _ in runs)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {lookups}", [run.pk for run in runs])
        tops = cursor.fetchone()
    return [Stamp(run.n_done, str(run.status), top or 0) for run, top in zip(runs, tops, strict=True)]


def _key(case_id: str, repeat_index: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{case_id}\0{repeat_index}".encode(), digest_size=8).digest(), "little")


def build_digest(eval_run: EvalRun) -> Digest:
    """Read ``eval_run``'s results (one streamed query) into a digest. A read.

    Raises:
        DigestUnavailable: The run is live, or two of its (case, repeat) keys hash alike.
    """
    import numpy as np

    if eval_run.status in LIVE:
        raise DigestUnavailable(f"run {eval_run.pk} is {eval_run.status}")
    # each fetched chunk becomes arrays at once: the lists never hold more than a chunk (Python
    # ints and floats of a million results would take ~150 MB beside ~33 MB of arrays)
    parts: list[tuple[Any, ...]] = []
    table = EvalResult._meta.db_table
    previous: str | None = None
    case_index = -1
    nan = float("nan")
    top = 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, case_id, repeat_index, passed, score FROM {table} WHERE eval_run_id = %s "
            "ORDER BY case_id, repeat_index",
            [eval_run.pk],
        )
        while rows := cursor.fetchmany(10_000):
            keys: list[int] = []
            cases: list[int] = []
            for _, case_id, repeat_index, _, _ in rows:
                if case_id != previous:
                    previous = case_id
                    case_index += 1
                keys.append(_key(case_id, repeat_index))
                cases.append(case_index)
            ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
            top = max(top, int(ids.max()))
            parts.append(
                (
                    np.array(keys, dtype=np.uint64),
                    np.array(cases, dtype=np.uint32),
                    np.fromiter((bool(row[3]) for row in rows), dtype=np.bool_, count=len(rows)),
                    np.fromiter((nan if row[4] is None else row[4] for row in rows), dtype=np.float64, count=len(rows)),
                    ids,
                )
            )
    key, case, passed, score, result_ids = (
        np.concatenate([part[i] for part in parts]) if parts else np.array([], dtype=dtype)
        for i, dtype in enumerate((np.uint64, np.uint32, np.bool_, np.float64, np.int64))
    )
    by_key = np.argsort(key, kind="stable").astype(np.uint32)
    if key.size > 1 and bool((np.diff(key[by_key]) == 0).any()):
        raise DigestUnavailable(f"two cases of run {eval_run.pk} hash alike")
    stamp = Stamp(eval_run.n_done, str(eval_run.status), top)
    return Digest(stamp, key, by_key, case, passed, score, result_ids)


def _pack(digest: Digest) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{name: getattr(digest, name) for name in _ARRAYS})
    return buffer.getvalue()


def _unpack(stamp: Stamp, data: bytes) -> Digest:
    import numpy as np

    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return Digest(stamp, *(arrays[name] for name in _ARRAYS))


_table: bool | None = None


def _stored_digests() -> bool:
    """Whether the digest table exists (a database migrated while 0029 was an empty placeholder
    lacks it: ``evalsite migrate evals 0028`` then ``evalsite migrate`` makes it); read once per
    process. Without it digests are built in memory only."""
    global _table
    if _table is None:
        _table = RunDigest._meta.db_table in connection.introspection.table_names()
        if not _table:
            log.warning("no %s table: run digests are built in memory only", RunDigest._meta.db_table)
    return _table


def store_digest(eval_run_id: str) -> None:
    """Build and store the digest of a run that just ended with at least :data:`STORE_FROM` cases
    done (called once by ``finish_eval_run``, after its commit; about 2 s a million results). A
    failure is logged, never raised: the run's end is written already, and a comparison builds
    the digest in memory when none is stored."""
    if STORE_FROM is None:
        return
    try:
        eval_run = EvalRun.objects.filter(pk=eval_run_id).first()
        if eval_run is None or eval_run.status in LIVE or eval_run.n_done < STORE_FROM:
            return
        if not _stored_digests():
            return
        digest = build_digest(eval_run)
        stamp = digest.stamp
        RunDigest.objects.update_or_create(
            eval_run=eval_run,
            defaults={
                "version": VERSION,
                "n_done": stamp.n_done,
                "status": stamp.status,
                "n_results": len(digest),
                "max_result_id": stamp.max_result_id,
                "data": _pack(digest),
            },
        )
    except DigestUnavailable:
        RunDigest.objects.filter(eval_run_id=eval_run_id).delete()
    except Exception:
        log.exception("building the digest of eval run %s", eval_run_id)


def stored_digest(eval_run: EvalRun, stamp: Stamp) -> Digest | None:
    """The digest stored for ``eval_run`` when it was built from the run as it is now (``stamp``),
    else ``None`` (none stored, another layout, or the run changed since)."""
    if not _stored_digests():
        return None
    row = (
        RunDigest.objects.filter(
            eval_run=eval_run,
            version=VERSION,
            n_done=stamp.n_done,
            status=stamp.status,
            max_result_id=stamp.max_result_id,
        )
        .values_list("data", flat=True)
        .first()
    )
    return None if row is None else _unpack(stamp, bytes(row))


_kept: OrderedDict[tuple[str, Stamp], Digest] = OrderedDict()
_lock = threading.Lock()


def run_digest(eval_run: EvalRun, stamp: Stamp | None = None) -> Digest:
    """``eval_run``'s digest as the run is now (``stamp``: its :func:`current_stamps`, read when
    not given): kept in this process, else the stored one, else built from its results (in
    memory: a read never writes).

    Raises:
        DigestUnavailable: The run is live, or two of its keys hash alike.
    """
    if eval_run.status in LIVE:
        raise DigestUnavailable(f"run {eval_run.pk} is {eval_run.status}")
    if stamp is None:
        (stamp,) = current_stamps(eval_run)
    cache_key = (str(eval_run.pk), stamp)
    with _lock:
        found = _kept.get(cache_key)
        if found is not None:
            _kept.move_to_end(cache_key)
            return found
    digest = stored_digest(eval_run, stamp)
    if digest is None:
        digest = build_digest(eval_run)
        if digest.stamp != stamp:  # results arrived between the two reads: use it once, keep none
            return digest
    with _lock:
        _kept[cache_key] = digest
        while len(_kept) > KEEP:
            _kept.popitem(last=False)
    return digest


def forget_kept() -> None:
    """Drop the digests kept in this process (tests)."""
    with _lock:
        _kept.clear()
