"""A database of its own for a subprocess the tests start (the CLI, ``evalsite serve``).

On the default backend that is a SQLite file (``EVALSITE_DB``). When the suite runs on
PostgreSQL (``DATABASE_URL`` set, as ``scripts/test-postgres.sh`` does) it is a fresh database
on the same server, so the subprocess exercises PostgreSQL too and never writes to the database
``DATABASE_URL`` names (a developer's real data). The databases made here are dropped by
:func:`drop_subprocess_databases` (the session fixture in ``tests/conftest.py`` calls it).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    import psycopg

_PREFIX = "test_evalsite_sub_"
_created: set[str] = set()


def _connect(url: str) -> psycopg.Connection:
    import psycopg  # only when PostgreSQL is in use: SQLite-only setups need not install it

    parts = urlsplit(url)
    return psycopg.connect(
        host=parts.hostname or None,
        port=parts.port or None,
        user=parts.username or None,
        password=parts.password or None,
        dbname=parts.path.lstrip("/") or "postgres",
        autocommit=True,  # CREATE / DROP DATABASE cannot run in a transaction
    )


def subprocess_db_env(path: Path) -> dict[str, str]:
    """Environment variables that give a subprocess the database identified by ``path``.

    Args:
        path: A file path unique to the test (under ``tmp_path``); the SQLite file itself, or
            the key of a PostgreSQL database created on first use (same path, same database).

    Returns:
        ``{"EVALSITE_DB": path}`` on SQLite; on PostgreSQL also ``DATABASE_URL`` pointing at the
        database made for ``path``.
    """
    env = {"EVALSITE_DB": str(path)}
    url = os.environ.get("DATABASE_URL")
    if not url:
        return env
    name = _PREFIX + hashlib.sha1(str(path).encode()).hexdigest()[:16]
    if name not in _created:
        with _connect(url) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        _created.add(name)
    parts = urlsplit(url)
    env["DATABASE_URL"] = urlunsplit(parts._replace(path="/" + name))
    return env


def drop_subprocess_databases() -> None:
    """Drop the PostgreSQL databases :func:`subprocess_db_env` created (no-op on SQLite)."""
    url = os.environ.get("DATABASE_URL")
    if not url or not _created:
        return
    with _connect(url) as conn:
        for name in sorted(_created):
            # FORCE: a server the test started may still hold a connection while it exits
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _created.clear()
