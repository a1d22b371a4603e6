"""One SQLite table of JSON values by key, shared by the engine's file caches (the judge's answers,
:class:`evalcore.judge.cache.SqliteJudgeCache`; the targets' answers,
:class:`evalcore.target_cache.SqliteTargetCache`).

One connection (stdlib ``sqlite3``, WAL journal, ``synchronous=NORMAL``) guarded by a lock: safe
to share between the tasks of one event loop and between threads; WAL lets another process (a
second CLI run, a worker) use the file at the same time.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Self


class SqliteTable:
    """The connection, the lock and the reads every such cache has; subclasses write.

    Args:
        path: The database file (created with its table if absent), or ``":memory:"``.
        table: The table's name (a fixed identifier of the subclass, never user input).
        create: The ``CREATE TABLE IF NOT EXISTS`` statement; the table has ``key`` and ``value``
            (JSON text) columns.

    Raises:
        sqlite3.DatabaseError: The file is not a SQLite database.
    """

    def __init__(self, path: str | Path, table: str, create: str) -> None:
        self.path = str(path)
        self._table = table
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(create)

    def get(self, key: str) -> dict[str, Any] | None:
        """The JSON value stored under ``key``, or ``None``."""
        with self._lock:
            row = self._conn.execute(f"SELECT value FROM {self._table} WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute(f"SELECT COUNT(*) FROM {self._table}").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
