"""daphne with request bodies refused as they arrive (the policy: :mod:`apps.core.request_limits`).

daphne's HTTP parser (Twisted's) spools a whole body to a file and then queues all of it for the
ASGI app in memory, so middleware sees the first byte only after the last one is held. Here the
checks run in the parser instead: once the head is in (the path, ``Content-Length``, the OTLP
token, read from the database while the connection is paused), and on every body chunk. A
refused request gets its 401 / 413 at once with ``Connection: close``; what the client goes on
sending is read and dropped (never stored) for at most :data:`LINGER_S` seconds, so a client that
sends its whole body before reading the answer still gets it, then the connection is closed.

Imported only by ``evalsite serve`` (importing daphne installs Twisted's asyncio reactor).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from channels.db import database_sync_to_async
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server
from twisted.internet import reactor
from twisted.web import http

from apps.core.request_limits import (
    BodyRule,
    Refusal,
    bearer_token,
    body_rule,
    head_refusal,
    token_is_valid,
    too_large,
    unauthenticated,
)

LINGER_S = 5.0
"""How long a refused request's remaining body is read and dropped before the connection closes."""

_REASONS = {401: b"Unauthorized", 413: b"Content Too Large"}


class LimitedWebRequest(WebRequest):  # type: ignore[misc]
    """daphne's request with the body checks of :mod:`apps.core.request_limits`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rule: BodyRule | None = None
        self._received = 0
        self._refused = False
        self._checking = False
        self._completed: tuple[bytes, bytes, bytes] | None = None
        self._path = ""
        self._content_type = ""

    def _header(self, name: bytes) -> str:
        values = self.requestHeaders.getRawHeaders(name) or []
        return values[0].decode("latin-1") if values else ""

    def gotLength(self, length: int | None) -> None:
        """The head is in: refuse now if it decides, or check the OTLP token before the body."""
        super().gotLength(length)
        # Twisted keeps the request line on the channel until the body is in (HTTP/1.1)
        raw_path = getattr(self.channel, "_path", b"/") or b"/"
        method = (getattr(self.channel, "_command", b"GET") or b"GET").decode("latin-1")
        self._path = raw_path.split(b"?", 1)[0].decode("latin-1")
        self._content_type = self._header(b"content-type")
        self._rule = body_rule(self._path, self._content_type)
        authorization = self._header(b"authorization")
        refusal = head_refusal(
            method=method,
            path=self._path,
            content_type=self._content_type,
            authorization=authorization,
            length=length,
        )
        if refusal is not None:
            self._refuse(refusal)
        elif self._rule.token_required and method.upper() == "POST":
            self._checking = True
            self.channel.transport.pauseProducing()  # read no body until the token is known
            check = asyncio.ensure_future(database_sync_to_async(token_is_valid)(bearer_token(authorization)))
            check.add_done_callback(self._token_checked)

    def _token_checked(self, check: asyncio.Future[bool]) -> None:
        self._checking = False
        if self.channel is None or self._refused:
            return
        valid = not check.cancelled() and check.exception() is None and check.result()
        if not valid:
            self._refuse(unauthenticated(self._path, self._content_type, sent=True))
            return
        self.channel.transport.resumeProducing()
        if self._completed is not None:  # the whole (small) body came with the head
            super().requestReceived(*self._completed)

    def handleContentChunk(self, data: bytes) -> None:
        """Store a body chunk, or drop it once refused; refuse at the first byte over the limit."""
        if self._refused:
            return
        self._received += len(data)
        rule = self._rule
        if rule is not None and rule.limit is not None and self._received > rule.limit:
            self._refuse(too_large(self._path, self._content_type, rule))
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        """The body is complete: hand it to the app, unless refused or its token is in doubt."""
        if self._refused:
            self._close()
        elif self._checking:
            self._completed = (command, path, version)
        else:
            super().requestReceived(command, path, version)

    def _refuse(self, refusal: Refusal) -> None:
        self._refused = True
        channel = self.channel
        if channel is None or channel.transport is None:
            return
        transport = channel.transport
        head = b"HTTP/1.1 %d %s\r\n" % (refusal.status, _REASONS.get(refusal.status, b"Refused"))
        head += b"".join(b"%s: %s\r\n" % (name, value) for name, value in refusal.raw_headers())
        transport.write(head + b"\r\n" + refusal.body)
        self.content.close()  # what was stored so far is dropped
        transport.resumeProducing()  # keep reading (and dropping) so the client reads the answer
        cast(Any, reactor).callLater(LINGER_S, self._close)

    def _close(self) -> None:
        channel = self.channel
        if channel is not None and channel.transport is not None and getattr(channel.transport, "connected", False):
            channel.transport.loseConnection()

    def connectionLost(self, reason: Any) -> None:
        """A refused request never reached the app: nothing of daphne's to clean up."""
        if self not in self.server.connections:  # refused, or gone before its body was in
            http.Request.connectionLost(self, reason)  # type: ignore[no-untyped-call]
            return
        super().connectionLost(reason)


class LimitedHTTPFactory(HTTPFactory):  # type: ignore[misc]
    """daphne's HTTP factory building :class:`LimitedWebRequest` requests."""

    def buildProtocol(self, addr: Any) -> Any:
        """daphne's protocol, with our request class."""
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = LimitedWebRequest
        channel = getattr(protocol, "_channel", protocol)  # Twisted wraps the HTTP/1.1 channel
        send_continue = channel._send100Continue

        def continue_unless_refused() -> None:
            # Twisted answers "Expect: 100-continue" right after the head: not after a refusal
            if not (channel.requests and getattr(channel.requests[-1], "_refused", False)):
                send_continue()

        channel._send100Continue = continue_unless_refused
        return protocol


class LimitedServer(Server):  # type: ignore[misc]
    """daphne's server whose HTTP requests are :class:`LimitedWebRequest`.

    ``Server.run`` makes its factory and listens with it in one method; assigning
    ``http_factory`` here swaps in :class:`LimitedHTTPFactory`.
    """

    @property
    def http_factory(self) -> Any:
        """The HTTP factory (always a :class:`LimitedHTTPFactory`)."""
        return self._limited_http_factory

    @http_factory.setter
    def http_factory(self, factory: Any) -> None:
        self._limited_http_factory = factory if isinstance(factory, LimitedHTTPFactory) else LimitedHTTPFactory(self)
