"""A damaged SQLite file is refused at start, in one line (rs3-16).

SQLite opens a file with corrupt pages without complaint and fails (or answers wrong) only when a
query reaches them: ``serve`` started and a CLI run exited 0 on such a file. :func:`damage`
runs ``PRAGMA quick_check`` (the b-tree structure of every table and index, without the
index-against-table cross-check of ``integrity_check``) once per file and process, from the
commands that open the database (``serve`` and the CLI commands, through
``apps.evals.cli.console.check_database``).

Its cost grows with the file (this machine, 2 shared cores): a 225 MB database holding a
100,000-case run (100,000 results, 200,000 trace events) takes 0.4-0.6 s with the file in the page
cache and 2.6 s cold; a 90 MB one of 100,000 cases and results with the search index, 0.83 s
warm (``integrity_check``: 1.94 s). It is bounded by ``EVALSITE_DB_CHECK_S`` (default 2 s; ``0``
turns the check off): past the budget the check stops and the file is used (the part read was
sound), so a very large or cold database costs at most that much at start.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

DEFAULT_BUDGET_S = 2.0
"""Default of ``EVALSITE_DB_CHECK_S``: the most the start-up check may take."""

_checked: set[tuple[str, int]] = set()


def check_budget_s() -> float:
    """``EVALSITE_DB_CHECK_S`` (seconds, ``0``: no check); :data:`DEFAULT_BUDGET_S` when unset or
    not a number."""
    raw = os.environ.get("EVALSITE_DB_CHECK_S", "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_BUDGET_S
    except ValueError:
        return DEFAULT_BUDGET_S
    return value if value >= 0 and value == value else DEFAULT_BUDGET_S


def damage(path: str | Path, budget_s: float | None = None) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong in the SQLite file ``path`` (its first line), or
    ``None``: sound, not checked within the budget, already checked by this process, missing,
    or not a file.

    Args:
        path: The database file.
        budget_s: The most the check may take (default :func:`check_budget_s`).
    """
    budget = check_budget_s() if budget_s is None else budget_s
    file = Path(path)
    try:
        stat = file.stat()
    except OSError:
        return None
    key = (str(file.resolve()), stat.st_ino)
    if budget <= 0 or key in _checked or not file.is_file():
        return None
    deadline = time.monotonic() + budget
    try:
        conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True, timeout=budget)
    except sqlite3.Error:
        return None  # cannot open read-only here: the caller's own open reports what is wrong
    try:
        # checked every 10,000 virtual-machine steps: a non-zero answer interrupts the check
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        rows = conn.execute("PRAGMA quick_check(5)").fetchall()
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            _checked.add(key)
            return None  # over budget: what was read is sound
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    except sqlite3.DatabaseError as exc:  # "database disk image is malformed", "file is not a database"
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    finally:
        conn.close()
    # one answer may span lines ("*** in database main ***" then a line per page): one line each
    found = ["; ".join(line for line in str(r[0]).splitlines() if line.strip()) for r in rows if r and r[0] != "ok"]
    if found:
        return found[0] + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
    _checked.add(key)
    return None


def damage_message(path: str | Path, problem: str) -> str:
    """The one line that refuses a damaged file: which file, what SQLite found, what to do."""
    return (
        f"{path}: the database file is damaged ({problem}); nothing was changed. Restore it from a "
        f"backup, or recover what is readable with `sqlite3 {path} .recover | sqlite3 recovered.sqlite3` "
        "and use that file (--db / EVALSITE_DB)"
    )
