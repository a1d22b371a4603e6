"""rs3-03 at the ASGI level: :func:`limit_request_bodies` around the real Django app, fed a body
chunk by chunk as an ASGI server that streams bodies would. The app never receives more than
the route's limit plus one chunk, and an OTLP POST without a valid token none at all."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.asgi import get_asgi_application

from apps.core.auth import create_api_token
from apps.core.request_limits import body_rule, limit_request_bodies

CHUNK = 64 * 1024


class Fed:
    """What the app was handed, and what the client got back."""

    def __init__(self) -> None:
        self.app_bytes = 0
        self.sent: list[dict[str, Any]] = []

    @property
    def status(self) -> int:
        return int(next(m["status"] for m in self.sent if m["type"] == "http.response.start"))

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


def _feed(path: str, *, total: int, headers: list[tuple[bytes, bytes]], declared: bool = False) -> Fed:
    """POST ``total`` bytes in ``CHUNK`` pieces through the middleware into the Django app."""
    fed = Fed()
    django_app = get_asgi_application()

    async def counting_app(scope: Any, receive: Any, send: Any) -> None:
        async def counted() -> Any:
            message = await receive()
            fed.app_bytes += len(message.get("body", b""))
            return message

        await django_app(scope, counted, send)

    chunks = [b"x" * min(CHUNK, total - start) for start in range(0, total, CHUNK)]
    queue = iter(chunks)

    async def receive() -> dict[str, Any]:
        piece = next(queue, None)
        if piece is None:
            await asyncio.sleep(3600)  # a client still connected, sending nothing more
        return {"type": "http.request", "body": piece, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        fed.sent.append(message)

    if declared:
        headers = [*headers, (b"content-length", str(total).encode())]
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    asyncio.run(asyncio.wait_for(limit_request_bodies(counting_app)(scope, receive, send), 60))
    return fed


@pytest.mark.django_db(transaction=True)
def test_a_chunked_page_body_stops_at_the_limit_plus_one_chunk(settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    fed = _feed("/accounts/login/", total=8 * 1024 * 1024, headers=[(b"content-type", b"text/plain")])
    assert fed.status == 413
    assert b"DATA_UPLOAD_MAX_MEMORY_SIZE" in fed.body
    assert fed.app_bytes <= 1024 * 1024 + CHUNK


@pytest.mark.django_db(transaction=True)
def test_a_declared_length_over_the_limit_reaches_no_app(settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    fed = _feed("/api/runs", total=2 * 1024 * 1024, headers=[(b"content-type", b"application/json")], declared=True)
    assert fed.status == 413
    assert json.loads(fed.body)["message"].startswith("request body too large")
    assert fed.app_bytes == 0


@pytest.mark.django_db(transaction=True)
def test_otlp_without_a_valid_token_gets_401_before_any_body() -> None:
    json_type = (b"content-type", b"application/json")
    for headers in ([json_type], [json_type, (b"authorization", b"Bearer esk_" + b"n" * 43)]):
        fed = _feed("/api/otlp/v1/traces", total=4 * 1024 * 1024, headers=headers)
        assert fed.status == 401
        assert fed.app_bytes == 0
        assert dict((k, v) for k, v in fed.sent[0]["headers"])[b"www-authenticate"] == b'Bearer realm="evalsite"'


@pytest.mark.django_db(transaction=True)
def test_otlp_with_a_valid_token_is_held_to_the_otlp_limit(settings: Any) -> None:
    settings.EVALSITE_OTLP_MAX_BYTES = 512 * 1024
    user = User.objects.create_user("sender", password="pw")
    _, raw = create_api_token(user=user)
    headers = [(b"content-type", b"application/json"), (b"authorization", f"Bearer {raw}".encode())]
    fed = _feed("/api/otlp/v1/traces", total=4 * 1024 * 1024, headers=headers)
    assert fed.status == 413
    assert b"EVALSITE_OTLP_MAX_BYTES" in fed.body
    assert fed.app_bytes <= 512 * 1024 + CHUNK


def test_each_route_has_its_limit(settings: Any) -> None:
    settings.EVALSITE_UPLOAD_MAX_BYTES = 7
    assert body_rule("/api/otlp/v1/traces", "application/x-protobuf").setting == "EVALSITE_OTLP_MAX_BYTES"
    assert body_rule("/admin/evals/evalset/upload/", "multipart/form-data; boundary=x").limit == 7
    assert body_rule("/admin/login/", "application/x-www-form-urlencoded").setting == "DATA_UPLOAD_MAX_MEMORY_SIZE"
    assert body_rule("/accounts/login/", "multipart/form-data; boundary=x").setting == "DATA_UPLOAD_MAX_MEMORY_SIZE"
