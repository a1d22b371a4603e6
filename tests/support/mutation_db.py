"""For ``make mutation``: migrate the test database once, copy it per mutant.

mutmut runs pytest once per mutant (in a forked child). With pytest-django's default set-up each
of those sessions that reaches a database test migrates a fresh SQLite database first (seconds on
a busy machine, most of a mutant's time). With ``EVALSITE_MUTATION_DB=1`` (``make mutation`` sets
it) ``tests/conftest.py`` takes this module's ``django_db_setup`` in place of pytest-django's: it
migrates once into a template file, then gives every session its own copy of it, so parallel
mutants never share a database file.

The template lives in ``var/`` under the directory pytest runs in (``mutants/`` for mutmut), named
by a hash of the migration files, so a changed migration builds a new one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django import DjangoDbBlocker


def _migrations_digest() -> str:
    """Hash of every migration file's path and text (a new or changed migration changes it)."""
    digest = hashlib.sha256()
    for path in sorted(Path.cwd().glob("apps/*/migrations/*.py")):
        digest.update(str(path.relative_to(Path.cwd())).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _build_template(template: Path) -> None:
    """Migrate a new SQLite file and move it to ``template`` (atomically: racing builders are fine)."""
    from django.db import connections
    from django.test.utils import setup_databases

    connection = connections["default"]
    build = template.with_name(f"{template.name}.{os.getpid()}.tmp")
    build.unlink(missing_ok=True)
    connection.settings_dict["TEST"]["NAME"] = str(build)
    setup_databases(verbosity=0, interactive=False, keepdb=False, serialized_aliases=[])
    connection.close()
    os.replace(build, template)


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment: None, django_db_blocker: DjangoDbBlocker) -> Iterator[None]:
    """Point the default database at a private copy of the migrated template (SQLite only).

    Passwords are hashed with MD5 for the session: the persona fixtures create users and log
    in, and the real hasher's deliberate slowness would be most of a page test's time.
    """
    from django.db import connections
    from django.test.utils import override_settings

    override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]).enable()

    connection = connections["default"]
    if connection.vendor != "sqlite":
        raise pytest.UsageError("tests.support.mutation_db needs the SQLite backend (unset DATABASE_URL)")
    template = Path.cwd() / "var" / f"mutation-template-{_migrations_digest()}.sqlite3"
    template.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="evalsite-mutant-db-"))
    copy = work / "db.sqlite3"
    with django_db_blocker.unblock():
        if not template.exists():
            _build_template(template)
        shutil.copyfile(template, copy)
        connection.close()
        connection.settings_dict["NAME"] = str(copy)
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            connection.close()
        shutil.rmtree(work, ignore_errors=True)
