"""The suite's SQLite database behaves as a user's does: a writer in a second thread waits for
the first one's transaction instead of being refused (tests/conftest.py puts the test database
in a file; Django's in-memory default refuses it at once with "database table is locked", which
once stopped a shard chain mid-run in CI).
"""

from __future__ import annotations

import os
import threading

import pytest
from django.contrib.auth.models import Group
from django.db import DatabaseError, connection, connections, transaction

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's own locking"),
]


def test_the_test_database_is_a_wal_file_with_a_busy_timeout():
    name = str(connection.settings_dict["NAME"])
    assert "memory" not in name and os.path.isfile(name), name
    with connection.cursor() as cursor:
        assert cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000


def test_a_second_threads_write_waits_for_the_open_transaction_and_commits():
    holding, second_done = threading.Event(), threading.Event()
    outcome: list[object] = []

    def second_writer() -> None:
        holding.wait()
        try:
            Group.objects.create(name="second")
            outcome.append("written")
        except DatabaseError as exc:  # the failure the test is about, reported below
            outcome.append(exc)
        finally:
            second_done.set()
            connections.close_all()

    thread = threading.Thread(target=second_writer)
    thread.start()
    with transaction.atomic():
        Group.objects.create(name="first")
        holding.set()
        # the second write cannot finish while this transaction holds the write lock: it either
        # waits (right) or is refused at once (wrong); give a refusal time to show
        finished_while_held = second_done.wait(timeout=1.0)
    thread.join()
    assert outcome == ["written"], outcome
    assert not finished_while_held
    assert set(Group.objects.filter(name__in=["first", "second"]).values_list("name", flat=True)) == {"first", "second"}
