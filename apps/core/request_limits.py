"""Request bodies refused before they are held: each route's size limit, and OTLP's token first.

Django reads a whole request body before any view (or CSRF check, or token check) runs, and
daphne even queues all of it in memory before Django starts: an anonymous 1 GB POST once took
``serve`` from 0.39 to 1.24 GB. Two guards apply one policy (:func:`body_rule`):

- :func:`limit_request_bodies`, ASGI middleware around the HTTP app (``evalsite.asgi``): it
  checks ``Content-Length`` and the OTLP token from the headers, then counts the bytes
  ``receive()`` hands over and answers 413 once they pass the limit (the app never gets more
  than the limit plus one chunk). This is the guard under any ASGI server that streams bodies.
- :mod:`apps.core.daphne_limits`, the same checks inside daphne's HTTP parser (``evalsite
  serve``), because daphne buffers a body whole before the ASGI app sees a byte of it.

Limits: ``/api/otlp/...`` takes ``EVALSITE_OTLP_MAX_BYTES`` and, for a POST, a valid API token
before its body; a ``multipart/form-data`` upload under ``/admin/`` (the case-bank upload)
takes ``EVALSITE_UPLOAD_MAX_BYTES``; every other body takes Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``None``: no limit), the size Django itself refuses.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from evalcore.otel.otlp import JSON, media_type, status_body

OTLP_PREFIX = "/api/otlp/"
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[..., Awaitable[None]]


@dataclass(frozen=True, slots=True)
class BodyRule:
    """What one request may send.

    Attributes:
        limit: The most body bytes taken (``None``: no limit).
        setting: The setting that names the limit (said in the 413).
        token_required: The body is read only after a valid API token (OTLP POSTs).
    """

    limit: int | None
    setting: str
    token_required: bool = False


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer given instead of reading a body.

    Attributes:
        status: 401 or 413.
        content_type: The answer's media type.
        body: The answer's bytes.
        headers: Extra headers (``WWW-Authenticate`` on a 401).
    """

    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """The answer's headers as ASGI sends them (``Connection: close``: the rest of the
        body is never read)."""
        return [
            (b"content-type", self.content_type.encode("latin-1")),
            (b"content-length", str(len(self.body)).encode()),
            (b"connection", b"close"),
            *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers),
        ]


def body_rule(path: str, content_type: str) -> BodyRule:
    """The limit for a request to ``path`` whose body has media type ``content_type``."""
    if path.startswith(OTLP_PREFIX):
        return BodyRule(settings.EVALSITE_OTLP_MAX_BYTES, "EVALSITE_OTLP_MAX_BYTES", token_required=True)
    if path.startswith("/admin/") and content_type.lower().startswith("multipart/form-data"):
        return BodyRule(settings.EVALSITE_UPLOAD_MAX_BYTES, "EVALSITE_UPLOAD_MAX_BYTES")
    return BodyRule(settings.DATA_UPLOAD_MAX_MEMORY_SIZE, "DATA_UPLOAD_MAX_MEMORY_SIZE")


def bearer_token(authorization: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value (``""``: none)."""
    kind, _, raw = authorization.partition(" ")
    return raw.strip() if kind.lower() == "bearer" else ""


def _answer(path: str, content_type: str, status: int, message: str, **headers: str) -> Refusal:
    extra = tuple((k.replace("_", "-"), v) for k, v in headers.items())
    if path.startswith(OTLP_PREFIX):  # OTLP answers a google.rpc.Status in the request's encoding
        media = media_type(content_type) or JSON
        return Refusal(status, media, status_body(media, status, message), extra)
    if path.startswith("/api/"):
        body = json.dumps({"message": message, "field": None}).encode()
        return Refusal(status, "application/json", body, extra)
    return Refusal(status, "text/plain; charset=utf-8", (message + "\n").encode(), extra)


def too_large(path: str, content_type: str, rule: BodyRule) -> Refusal:
    """The 413 for a body over ``rule``'s limit."""
    message = f"request body too large (the limit is {rule.limit} bytes, {rule.setting})"
    return _answer(path, content_type, 413, message)


def unauthenticated(path: str, content_type: str, *, sent: bool) -> Refusal:
    """The 401 for an OTLP POST with no token (``sent`` False) or an unknown one."""
    message = "send an Evalsite API token: Authorization: Bearer esk_... (`evalsite token create`)"
    if sent:
        message = "the API token is unknown, revoked or expired"
    return _answer(path, content_type, 401, message, WWW_Authenticate='Bearer realm="evalsite"')


def head_refusal(
    *, method: str, path: str, content_type: str, authorization: str, length: int | None
) -> Refusal | None:
    """The refusal the request head alone decides (a declared length over the limit, an OTLP
    POST without a bearer token), else ``None``; a token that is sent is checked by the caller
    (:func:`token_is_valid`, a database read)."""
    rule = body_rule(path, content_type)
    if length is not None and rule.limit is not None and length > rule.limit:
        return too_large(path, content_type, rule)
    if rule.token_required and method.upper() == "POST" and not bearer_token(authorization):
        return unauthenticated(path, content_type, sent=False)
    return None


def token_is_valid(raw: str) -> bool:
    """Whether ``raw`` is a live API token of an active user (sync: a database read)."""
    from apps.core.auth import user_for_token

    return user_for_token(raw) is not None


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _length(raw: str) -> int | None:
    raw = raw.strip()
    return int(raw) if raw.isascii() and raw.isdigit() else None


class _BodyTooLarge(Exception):
    """Raised into the app from ``receive()`` once the body passes its limit."""


async def _send_refusal(send: Send, refusal: Refusal) -> None:
    await send({"type": "http.response.start", "status": refusal.status, "headers": refusal.raw_headers()})
    await send({"type": "http.response.body", "body": refusal.body})


def limit_request_bodies(app: AsgiApp) -> AsgiApp:
    """ASGI middleware: refuse a body over its route's limit as it arrives (413) and an OTLP
    POST without a valid token before its body (401); see the module docstring."""
    from channels.db import database_sync_to_async

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        path = str(scope.get("path") or "/")
        content_type = _header(headers, b"content-type")
        authorization = _header(headers, b"authorization")
        method = str(scope.get("method") or "GET")
        refusal = head_refusal(
            method=method,
            path=path,
            content_type=content_type,
            authorization=authorization,
            length=_length(_header(headers, b"content-length")),
        )
        rule = body_rule(path, content_type)
        if refusal is None and rule.token_required and method.upper() == "POST":
            if not await database_sync_to_async(token_is_valid)(bearer_token(authorization)):
                refusal = unauthenticated(path, content_type, sent=True)
        if refusal is not None:
            await _send_refusal(send, refusal)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body") or b"")
                if rule.limit is not None and received > rule.limit:
                    raise _BodyTooLarge
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message.get("type") == "http.response.start"
            await send(message)

        try:
            await app(scope, counted_receive, watched_send)
        except _BodyTooLarge:
            if not started:
                await _send_refusal(send, too_large(path, content_type, rule))

    return guarded
