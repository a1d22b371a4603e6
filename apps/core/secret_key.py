"""The secret key when ``EVALSITE_SECRET_KEY`` is unset: random, made on first use, kept in the
data folder (mode 0600) so sessions survive restarts and every process of one install agrees.

Imported by the settings module, so it must not import Django.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

KEY_FILE = "secret_key"

OLD_PUBLIC_KEY = "dev-only-insecure-key-change-me-in-production-0123456789"
"""The constant earlier versions used by default; it is public, so `check --deploy` flags it."""


def data_folder_secret_key(data_dir: Path) -> str:
    """The key stored in ``data_dir/secret_key``, created (0600, atomically) when missing.

    Several processes starting at once (server, worker, CLI) agree on one key: the file is
    written aside and hard-linked into place, so exactly one creator wins and the others read it.
    When the folder cannot be written, a per-process random key is used and a warning printed
    (sessions then end when the process stops).
    """
    path = Path(data_dir) / KEY_FILE
    try:
        key = path.read_text(encoding="ascii").strip()
        if len(key) >= 50:
            return key
    except OSError:
        pass
    key = secrets.token_urlsafe(50)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(key + "\n")
        try:
            os.link(temp, path)
        except FileExistsError:
            key = path.read_text(encoding="ascii").strip()
        finally:
            temp.unlink(missing_ok=True)
    except OSError as exc:
        print(
            f"warning: cannot keep a secret key in {path} ({exc}); using a temporary one "
            "(set EVALSITE_SECRET_KEY to keep sessions across restarts)",
            file=sys.stderr,
        )
    return key
