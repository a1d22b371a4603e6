"""A new SQLite database as a copy of a migrated template, instead of running every migration.

Running Evalsite's ~100 migrations on a new file costs seconds (each one is imported, planned
and applied, and every app's ``post_migrate`` fills content types and permissions); copying a
file that went through exactly those migrations costs milliseconds. The template is keyed by a
hash of everything that decides what ``migrate`` writes: every migration file of every installed
app (name and bytes), the installed apps in order, and the Django and SQLite versions. A changed,
added or removed migration makes a new key, so a stale template is never used: the first new
database after the change is migrated as before and becomes the template for the next ones.

Templates live in ``EVALSITE_SCHEMA_CACHE`` (default ``$XDG_CACHE_HOME/evalsite/schema``, else
``~/.cache/evalsite/schema``; ``off`` turns the cache off), one ``<key>.sqlite3`` each, written
with ``VACUUM INTO`` to a temporary name and renamed, so a reader sees a whole template or none.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

OFF = "off"


def cache_dir() -> Path | None:
    """Where templates are kept (``EVALSITE_SCHEMA_CACHE``), ``None`` when the cache is off."""
    from django.conf import settings

    configured = str(getattr(settings, "EVALSITE_SCHEMA_CACHE", "") or "").strip()
    if configured.lower() == OFF:
        return None
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "evalsite" / "schema"


def schema_key() -> str:
    """A hash of everything ``migrate`` reads to build a new database (see the module doc).

    Reads the migration folders' file names and bytes only (no migration module is imported).
    """
    import django
    from django.apps import apps

    digest = hashlib.sha256()
    digest.update(f"django {django.__version__} sqlite {sqlite3.sqlite_version}\n".encode())
    for config in apps.get_app_configs():
        digest.update(f"app {config.label} {config.name}\n".encode())
        module_name = migrations_module_name(config.label, config.name)
        spec = importlib.util.find_spec(module_name) if module_name else None
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        for folder in folders:
            for path in sorted(Path(folder).glob("*.py")):
                digest.update(f"file {path.name} {path.stat().st_size}\n".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def migrations_module_name(label: str, package: str) -> str | None:
    """The migrations package of the app ``label`` (its Python package ``package``), as
    ``django.db.migrations.loader.MigrationLoader.migrations_module`` names it: the
    ``MIGRATION_MODULES`` setting's entry (``None``: the app has no migrations), else
    ``<package>.migrations``. Here so that a command need not import the migration loader."""
    from django.conf import settings

    modules = settings.MIGRATION_MODULES
    if label in modules:
        return modules[label] or None
    return f"{package}.migrations"


def is_new(path: str) -> bool:
    """Whether ``path`` holds no database yet (no file, or an empty one)."""
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return True


def copy_template(path: str) -> bool:
    """Create the SQLite database ``path`` (which holds none yet) from the template of this
    schema. Call holding the migration lock, with no connection open on ``path``.

    Returns:
        True when a template was copied (nothing left to migrate); False when there is none yet
        (or the cache is off or unreadable): migrate, then :func:`save_template`.
    """
    folder = cache_dir()
    if folder is None:
        return False
    template = folder / f"{schema_key()}.sqlite3"
    if not template.is_file():
        return False
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        shutil.copyfile(template, tmp)
        os.replace(tmp, target)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        log.debug("could not copy the schema template %s", template, exc_info=True)
        return False
    return True


def save_template(path: str) -> None:
    """Keep the freshly migrated database ``path`` as the template of this schema (a no-op when
    the cache is off or cannot be written: the template is an optimisation)."""
    folder = cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        template = folder / f"{schema_key()}.sqlite3"
        if template.is_file():
            return
        fd, tmp = tempfile.mkstemp(prefix=".schema-", suffix=".sqlite3", dir=folder)
        os.close(fd)
        os.unlink(tmp)  # VACUUM INTO writes a new file
        try:
            with sqlite3.connect(path) as source:
                source.execute("VACUUM INTO ?", (tmp,))
            source.close()
            os.replace(tmp, template)
        finally:
            Path(tmp).unlink(missing_ok=True)
    except (OSError, sqlite3.Error):
        log.debug("could not save the schema template of %s", path, exc_info=True)
