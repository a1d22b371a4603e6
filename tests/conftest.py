"""Shared fixtures: persona users (owner, teammate, outsider) and small factories."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.support.databases import drop_subprocess_databases
from tests.support.fixtures import stand_in_llm  # noqa: F401 - the local chat-completions stand-in
from tests.support.signals import restore_default_sigint, signal_handlers_kept

if os.environ.get("EVALSITE_MUTATION_DB") == "1":  # `make mutation`: migrate once, copy per mutant
    from tests.support.mutation_db import django_db_setup  # noqa: F401


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C works in the test process and its children even when the suite was started with
    SIGINT ignored (``nohup``, ``cmd &`` in a script, some CI runners): the interrupt tests
    press it. Runs in every pytest-xdist worker too."""
    restore_default_sigint()
    # The CLI reads the project folder's .env (evalsite.paths.load_env_file): not a developer's
    # .env in the checkout the CLI tests run from (tests that want one set this themselves).
    os.environ.setdefault("EVALSITE_ENV_FILE", "")


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """Each test starts with the SIGINT / SIGTERM handlers the session had (see
    :func:`tests.support.signals.signal_handlers_kept`)."""
    with signal_handlers_kept():
        yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings(request: pytest.FixtureRequest) -> Iterator[None]:
    """The SQLite test database is a file, as in production, not Django's in-memory default.

    Django's default test database is an in-memory SQLite database in shared-cache mode. There,
    a write from a second thread (the result writer, a shard chain, a heartbeat) is refused at
    once with "database table is locked": no busy timeout applies, so a test could fail where a
    user's file database (WAL, a 20 s busy timeout, IMMEDIATE transactions) simply waits. The
    file lives in a fresh folder on ``/dev/shm`` (memory-backed) when it exists, is removed at the
    end of the session, and gets pytest-django's ``_gwN`` suffix per xdist worker.
    ``EVALSITE_TEST_DB`` names the file instead; PostgreSQL is left as it is.
    """
    from django.conf import settings

    folder = None
    default = settings.DATABASES["default"]
    test = default.setdefault("TEST", {})
    if default["ENGINE"].endswith("sqlite3") and not test.get("NAME"):
        shm = "/dev/shm"
        base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
        folder = tempfile.mkdtemp(prefix="evalsite-test-db-", dir=base)
        test["NAME"] = os.path.join(folder, "evalsite-test.sqlite3")
    request.getfixturevalue("django_db_modify_db_settings_parallel_suffix")
    yield
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing() -> Iterator[None]:
    """Users created in the test process get a 1-iteration PBKDF2 hash (see
    :mod:`tests.support.fast_hasher`): same format, so subprocesses still verify it."""
    from django.conf import settings
    from django.test.utils import override_settings

    from tests.support.fast_hasher import fast_password_hashers

    with override_settings(PASSWORD_HASHERS=fast_password_hashers(list(settings.PASSWORD_HASHERS))):
        yield


@pytest.fixture(scope="session", autouse=True)
def _subprocess_databases():
    """Drop the PostgreSQL databases made for CLI / server subprocesses (none on SQLite)."""
    yield
    drop_subprocess_databases()


def ensure_roles() -> None:
    """The viewer/member groups of migration 0002_roles, recreated if a transactional test's
    flush removed them (a flush drops data that migrations created)."""
    from importlib import import_module

    from django.contrib.auth.models import Group, Permission

    roles = import_module("apps.evals.migrations.0002_roles")
    reviews = import_module("apps.evals.migrations.0011_review_roles")
    for name, pairs in (
        ("viewer", roles.VIEW + reviews.VIEW),
        ("member", roles.VIEW + roles.MEMBER + reviews.VIEW + reviews.MEMBER),
    ):
        group, created = Group.objects.get_or_create(name=name)
        if created or group.permissions.count() != len(pairs):
            perms = [Permission.objects.get(content_type__app_label=a, codename=c) for a, c in pairs]
            group.permissions.set(perms)


@pytest.fixture
def member(django_user_model):
    """A member: reads, starts runs, uses the playground, captures cases."""
    from django.contrib.auth.models import Group

    ensure_roles()
    user = django_user_model.objects.create_user("member", password="member-pass-123")
    user.groups.add(Group.objects.get(name="member"))
    return user


@pytest.fixture
def viewer(django_user_model):
    """A viewer: reads only."""
    from django.contrib.auth.models import Group

    ensure_roles()
    user = django_user_model.objects.create_user("viewer", password="viewer-pass-123")
    user.groups.add(Group.objects.get(name="viewer"))
    return user


@pytest.fixture
def outsider(django_user_model):
    """A logged-in user with no role."""
    return django_user_model.objects.create_user("outsider", password="outsider-pass-123")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser("admin", password="admin-pass-123")
