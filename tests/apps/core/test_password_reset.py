"""Password reset with mail configured: the request does the same work for a known and an
unknown address (it queues the lookup and the mail; nothing is sent inside the request), the
mail still reaches a known address, and requests are rate-limited per address and per client."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import clear_url_caches

from apps.core import password_reset
from apps.core.models import PasswordResetAttempt

IMMEDIATE = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
DUMMY = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
RESET = "/accounts/password_reset/"


@pytest.fixture
def reset_pages(settings: Any) -> Iterator[None]:
    """The URLs as they are with an e-mail backend configured (``evalsite.urls`` read again)."""
    import evalsite.urls

    settings.PASSWORD_RESET_ENABLED = True
    importlib.reload(evalsite.urls)
    clear_url_caches()
    yield
    settings.PASSWORD_RESET_ENABLED = False
    importlib.reload(evalsite.urls)
    clear_url_caches()


@pytest.fixture
def known(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("known", email="known@example.com", password="known-pass-123")


def _queries(client: Any, email: str, ip: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        answer = client.post(RESET, {"email": email}, REMOTE_ADDR=ip)
    assert answer.status_code == 302 and answer["Location"].endswith("/accounts/password_reset/done/")
    # the statements, without what differs by design (the address's hash, the time, savepoint names)
    return [
        re.sub(r'"s\d+_x\d+"', '"savepoint"', q["sql"].split(" WHERE ")[0].split(" VALUES ")[0])
        for q in captured.captured_queries
    ]


@pytest.mark.django_db
def test_known_and_unknown_addresses_do_the_same_work(client, settings, reset_pages, known) -> None:
    settings.TASKS = DUMMY  # queued, not run: what the request itself does
    known_work = _queries(client, "known@example.com", "10.0.0.1")
    unknown_work = _queries(client, "nobody@example.com", "10.0.0.2")
    assert known_work == unknown_work
    assert mail.outbox == []  # nothing is sent inside the request, for either


@pytest.mark.django_db
def test_the_queued_task_sends_the_mail_to_a_known_address_only(client, settings, reset_pages, known) -> None:
    settings.TASKS = IMMEDIATE
    client.post(RESET, {"email": "nobody@example.com"})
    assert mail.outbox == []
    client.post(RESET, {"email": "known@example.com"})
    assert [m.to for m in mail.outbox] == [["known@example.com"]]
    assert "/accounts/reset/" in mail.outbox[0].body and "http://testserver/" in mail.outbox[0].body


@pytest.mark.django_db
def test_requests_are_limited_per_address_and_per_client(client, settings, reset_pages, known) -> None:
    settings.TASKS = IMMEDIATE
    for n in range(password_reset.PER_ADDRESS):
        assert client.post(RESET, {"email": "known@example.com"}, REMOTE_ADDR=f"10.0.1.{n}").status_code == 302
    refused = client.post(RESET, {"email": "KNOWN@example.com"}, REMOTE_ADDR="10.0.1.99")
    assert refused.status_code == 429 and "this address" in refused.content.decode()
    assert len(mail.outbox) == password_reset.PER_ADDRESS
    # the same answer for an address nobody has
    for n in range(password_reset.PER_ADDRESS):
        client.post(RESET, {"email": "ghost@example.com"}, REMOTE_ADDR=f"10.0.2.{n}")
    assert client.post(RESET, {"email": "ghost@example.com"}, REMOTE_ADDR="10.0.2.99").status_code == 429
    # one client trying many addresses
    for n in range(password_reset.PER_CLIENT):
        assert client.post(RESET, {"email": f"u{n}@example.com"}, REMOTE_ADDR="10.0.3.1").status_code == 302
    refused = client.post(RESET, {"email": "another@example.com"}, REMOTE_ADDR="10.0.3.1")
    assert refused.status_code == 429 and "from your address" in refused.content.decode()
    # addresses are not stored as typed
    assert not PasswordResetAttempt.objects.filter(address_hash__contains="@").exists()
