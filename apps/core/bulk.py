"""Bulk writes below the ORM: rows built once as tuples, inserted with one statement per batch.

The ORM's ``bulk_create`` prepares every value of every row through its field (≈0.3 ms per
result row with its run and events); here the caller builds plain tuples of database values and
:func:`insert_rows` hands them to the driver at once: ``executemany`` on SQLite (one prepared
statement, run inside the caller's IMMEDIATE transaction), ``COPY ... FROM STDIN`` on PostgreSQL
(psycopg 3). Values are written as given: the caller applies what a field would (redaction,
JSON, datetimes; see :func:`json_text` and :func:`db_datetime`).

:func:`reserve_ids` hands out primary keys first, so rows of one batch can point at each other
(an event at its run) without reading ids back.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Field, Model

from apps.core.storable import holds_unstorable, storable, storable_text
from evalcore.jsonvalue import json_encoder
from evalcore.redact import configured_secrets, redact, redact_text


def columns(model: type[Model], names: Sequence[str]) -> list[str]:
    """The database columns of ``model``'s fields ``names`` (``run`` -> ``run_id``)."""
    found = [model._meta.get_field(name) for name in names]
    return [field.column for field in found if isinstance(field, Field) and field.column]


def _pk_column(model: type[Model]) -> str:
    pk = model._meta.pk
    if pk is None or not pk.column:
        raise TypeError(f"{model.__name__} has no primary key column")
    return pk.column


def insert_rows(
    model: type[Model],
    cols: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    unique: Sequence[str] = (),
    savepoint: bool = True,
) -> int:
    """Insert ``rows`` (tuples of database values, in ``cols`` order) into ``model``'s table.

    Call inside ``transaction.atomic()``. With ``unique`` (the columns of a unique constraint),
    a row that is already stored is skipped, not an error: writes are idempotent. On PostgreSQL
    the ``COPY`` runs in a savepoint so a clash can fall back to ``INSERT ... ON CONFLICT``;
    ``savepoint=False`` (a caller that retries the whole transaction on a clash) saves those two
    round trips and lets ``IntegrityError`` abort the transaction.

    Returns:
        The number of rows inserted (``len(rows)`` unless some were already stored).

    Raises:
        django.db.IntegrityError: A constraint other than ``unique`` failed.
    """
    if not rows:
        return 0
    table = model._meta.db_table
    quote = connection.ops.quote_name
    names = _column_list(connection.vendor, tuple(cols))
    if connection.vendor == "postgresql":
        if not savepoint:
            _copy(table, names, rows)
            return len(rows)
        try:
            with transaction.atomic():  # a savepoint: undone on a clash
                _copy(table, names, rows)
            return len(rows)
        except IntegrityError:
            if not unique:
                raise
    conflict = f" ON CONFLICT ({', '.join(quote(c) for c in unique)}) DO NOTHING" if unique else ""
    if connection.vendor == "sqlite":
        return _sqlite_insert(f"INSERT INTO {quote(table)} ({names}) VALUES ", len(cols), conflict, rows)
    sql = f"INSERT INTO {quote(table)} ({names}) VALUES ({', '.join(['%s'] * len(cols))}){conflict}"
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
        count = cursor.rowcount
    return len(rows) if count is None or count < 0 else count


@functools.lru_cache(maxsize=128)
def _column_list(vendor: str, cols: tuple[str, ...]) -> str:
    """``"a", "b"``: the quoted column list (built once per table and backend: a writer inserts
    into the same three tables on every batch)."""
    return ", ".join(connection.ops.quote_name(c) for c in cols)


def _copy(table: str, names: str, rows: Sequence[Sequence[Any]]) -> None:
    """``COPY`` the rows in (PostgreSQL); psycopg's own errors become Django's."""
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(f"COPY {connection.ops.quote_name(table)} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


_SQLITE_CHUNKS = (64, 32, 16, 8, 4, 2, 1)
"""Rows per multi-row ``INSERT`` on SQLite: a batch is cut into these sizes, so each table has a
few prepared statements (SQLite caches them) instead of one per batch size."""
_sqlite_statements: dict[tuple[str, int, str, int], str] = {}


def _sqlite_insert(head: str, width: int, conflict: str, rows: Sequence[Sequence[Any]]) -> int:
    """``rows`` inserted with multi-row ``INSERT ... VALUES (...), (...)`` statements: a fifth less
    work per row than ``executemany`` (one statement step for many rows), with ``?`` placeholders
    given to the driver directly (Django's cursor wrapper rewrites ``%s`` with a regex over the
    whole statement). Returns the rows inserted (fewer when ``conflict`` skipped some)."""
    inserted = 0
    total = len(rows)
    start = 0
    with connection.cursor() as cursor, connection.wrap_database_errors:
        raw = cursor.cursor  # the sqlite3 cursor under Django's wrappers
        while start < total:
            size = next(k for k in _SQLITE_CHUNKS if k <= total - start)
            key = (head, width, conflict, size)
            sql = _sqlite_statements.get(key)
            if sql is None:
                one = "(" + ", ".join(["?"] * width) + ")"
                sql = _sqlite_statements[key] = head + ", ".join([one] * size) + conflict
            params = list(chain.from_iterable(rows[start : start + size]))
            sqlite3.Cursor.execute(raw, sql, params)
            inserted += raw.rowcount
            start += size
    return inserted


def update_rows(model: type[Model], cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """``UPDATE`` rows by primary key: each row is ``(*values in cols order, pk)``."""
    if not rows:
        return
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(c)} = %s" for c in cols)
    pk = quote(_pk_column(model))
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {quote(model._meta.db_table)} SET {sets} WHERE {pk} = %s", rows)


def update_where(model: type[Model], values: dict[str, Any], where: dict[str, Any]) -> int:
    """``UPDATE`` ``model``'s rows matching ``where`` (field -> value, all equal) with ``values``,
    below the ORM: one statement, no query compilation (a writer's per-batch bookkeeping).

    ``values`` maps a field name to its new value (prepared by the field, as ``save()`` would:
    JSON, datetimes) or to ``("+", n)`` for ``column = column + n``.

    Returns:
        The number of rows updated.
    """
    quote = connection.ops.quote_name
    sets: list[str] = []
    params: list[Any] = []
    for name, value in values.items():
        field = _concrete_field(model, name)
        column = quote(str(field.column))
        if isinstance(value, tuple) and value[:1] == ("+",):
            sets.append(f"{column} = {column} + %s")
            params.append(value[1])
        else:
            sets.append(f"{column} = %s")
            params.append(field.get_db_prep_save(value, connection))
    conditions: list[str] = []
    for name, value in where.items():
        field = _concrete_field(model, name)
        conditions.append(f"{quote(str(field.column))} = %s")
        params.append(field.get_db_prep_value(value, connection))
    sql = f"UPDATE {quote(model._meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def _concrete_field(model: type[Model], name: str) -> Field:  # type: ignore[type-arg]
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.column:
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return field


def reserve_ids(model: type[Model], count: int) -> list[int]:
    """``count`` primary keys for new rows of ``model`` (an auto-increment key), never reused.

    SQLite: call inside the writing (IMMEDIATE) transaction, which holds the database's write
    lock, so no other process can take the same ids. PostgreSQL: drawn from the table's sequence.
    """
    if count <= 0:
        return []
    table = model._meta.db_table
    pk = _pk_column(model)
    quote = connection.ops.quote_name
    if connection.vendor == "postgresql":
        return _pg_ids(table, pk, count)
    with connection.cursor() as cursor:
        if connection.vendor != "sqlite":
            raise NotImplementedError(f"reserve_ids: {connection.vendor} is not supported")
        cursor.execute(f"SELECT COALESCE(MAX({quote(pk)}), 0) FROM {quote(table)}")
        top = cursor.fetchone()[0]
        # AUTOINCREMENT never reuses the id of a deleted last row: its counter is in sqlite_sequence
        cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
        seq = cursor.fetchone()
        start = max(top, seq[0] if seq else 0) + 1
    return list(range(start, start + count))


_PG_ID_BLOCK = 512
"""Sequence values drawn at once on PostgreSQL (a writer needs a few per batch: one round trip
per block instead of one per batch; a value never used is a gap, as any rolled-back insert's)."""
_pg_id_blocks: dict[tuple[str, str, str], list[int]] = {}
_pg_id_lock = threading.Lock()


def _pg_ids(table: str, pk: str, count: int) -> list[int]:
    """``count`` values of the table's primary-key sequence, from this process's block."""
    with _pg_id_lock:
        block = _pg_id_blocks.setdefault((str(connection.settings_dict.get("NAME")), table, pk), [])
        if len(block) < count:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                    [table, pk, max(count - len(block), _PG_ID_BLOCK)],
                )
                block.extend(row[0] for row in cursor.fetchall())
        taken, block[:] = block[:count], block[count:]
    return taken


def db_datetime(value: datetime) -> Any:
    """An aware datetime as the database backend stores it (text on SQLite)."""
    return connection.ops.adapt_datetimefield_value(value)


def timestamp_writer() -> Callable[[float], Any]:
    """A function writing a Unix time (seconds) as the current connection's backend stores an
    aware datetime: on SQLite the UTC text Django writes (``2026-12-01 00:32:58.123456``),
    elsewhere an aware datetime. The backend is looked up once (a bulk writer calls this once
    per batch, then the function per value)."""
    return _sqlite_timestamp if connection.vendor == "sqlite" else _aware_datetime


def datetime_writer() -> Callable[[datetime], Any]:
    """:func:`db_datetime` for the current connection, its backend looked up once (per batch)."""
    return _sqlite_datetime if connection.vendor == "sqlite" else db_datetime


def _aware_datetime(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _sqlite_timestamp(ts: float) -> str:
    """``datetime.fromtimestamp(ts, UTC).replace(tzinfo=None).isoformat(" ")``, the same text,
    with the date and time of day formatted once per second (a writer stores ~3 per case)."""
    frac, whole = math.modf(ts)
    micros = round(frac * 1e6)  # as fromtimestamp rounds: half to even
    if micros >= 1_000_000:
        whole, micros = whole + 1.0, micros - 1_000_000
    elif micros < 0:
        whole, micros = whole - 1.0, micros + 1_000_000
    cached = _last_second
    if cached[0] != whole:
        t = time.gmtime(whole)
        cached = (
            whole,
            f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}",
        )
        globals()["_last_second"] = cached
    return f"{cached[1]}.{micros:06d}" if micros else cached[1]


_last_second: tuple[float, str] = (math.nan, "")


def _sqlite_datetime(value: datetime) -> Any:
    # as Django's SQLite backend writes an aware value (USE_TZ: made naive in UTC, then str())
    if value.tzinfo is None:
        return db_datetime(value)  # a naive value: Django's own rules (and its error)
    return str(value.astimezone(UTC).replace(tzinfo=None))


@dataclass(slots=True, frozen=True)
class Encoders:
    """How one batch writes values, looked up once for the batch (see :func:`encoders`).

    Attributes:
        secrets: The secret values to redact (:func:`secrets`).
        timestamp: A Unix time (seconds) -> the stored form of an aware datetime.
        datetime: An aware datetime -> its stored form.
    """

    secrets: list[str]
    timestamp: Callable[[float], Any]
    datetime: Callable[[datetime], Any]


def encoders() -> Encoders:
    """The :class:`Encoders` of the current connection and environment (call once per batch)."""
    return Encoders(secrets(), timestamp_writer(), datetime_writer())


def secrets() -> list[str]:
    """The secret values to redact now (read once per batch: see :func:`evalcore.redact.configured_secrets`)."""
    return configured_secrets()


def json_text(value: Any, secret_values: list[str], *, redacted: bool = True) -> str | None:
    """``value`` as the JSON text a ``RedactedJSONField`` writes: every string redacted first
    (``redacted=False``: as an ``OutputJSONField`` writes a target's output, never redacted).

    One ``json.dumps`` in the common case (nothing to redact); a value holding a secret or a
    URL credential is redacted with :func:`evalcore.redact.redact` and serialized again.

    Args:
        value: A JSON-able value.
        secret_values: From :func:`secrets`.

    Returns:
        The JSON text, or ``None`` (SQL NULL) for ``None``, as the ORM saves it.

    Raises:
        ValueError: NaN or an infinity inside ``value`` (not JSON).
        TypeError: ``value`` is not JSON-able.
    """
    if value is None:
        return None
    text = dumps(value)
    if redacted and holds_secret(text, secret_values):
        value = redact(value, secret_values)
        text = dumps(value)
    if holds_unstorable(text):  # no database stores U+0000 or a lone surrogate (apps.core.storable)
        text = dumps(storable(value))
    return text


dumps: Callable[[Any], str] = json_encoder()
"""``json.dumps(value, ensure_ascii=False, allow_nan=False)`` with its encoder built once (the C
encoder called directly: see :func:`evalcore.jsonvalue.json_encoder`).

Raises:
    ValueError: NaN or an infinity inside the value.
    TypeError: The value is not JSON-able.
"""


def clean_text(value: str, secret_values: list[str]) -> str:
    """``value`` as a ``RedactedTextField`` / ``RedactedCharField`` writes it."""
    return storable_text(redact_text(value, secret_values)) if value else value


def holds_secret(text: str, secret_values: list[str]) -> bool:
    """Whether JSON ``text`` contains a secret (raw or JSON-escaped) or a URL credential."""
    for secret in secret_values:
        if secret in text or _escaped(secret) in text:
            return True
    return "://" in text and "@" in text and redact_text(text, []) != text


@functools.lru_cache(maxsize=256)
def _escaped(secret: str) -> str:
    return json.dumps(secret, ensure_ascii=False)[1:-1]
