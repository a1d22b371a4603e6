"""The OTLP/HTTP traces endpoint: ``POST /api/otlp/v1/traces``.

A stock OpenTelemetry exporter reaches it with ``OTEL_EXPORTER_OTLP_ENDPOINT=<site>/api/otlp``
(exporters append ``/v1/traces``) and ``OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20esk_...``.
The token is an Evalsite API token (``evalsite token create``) of a member. Answers follow OTLP,
not the JSON API's error shape: 200 with an ``ExportTraceServiceResponse`` (``partial_success``
when spans were refused), else a ``google.rpc.Status`` body in the request's encoding: 400 a body
that is not an export request, 401 no or a bad token, 403 not a member, 405 not a POST, 413 over
``EVALSITE_OTLP_MAX_BYTES``, 415 neither protobuf nor JSON, 503 the database is busy (OTLP
senders retry a 503). Spans stored without a mapping (no GenAI or OpenInference attributes) are
counted and named in the 200's ``partial_success.error_message`` (``rejected_spans`` 0). Storing:
:mod:`apps.traces.otel_ingest`.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from apps.core.access import can_start_runs
from apps.core.auth import role_powers, scope_note, user_for_token
from apps.traces.otel_ingest import ingest_spans
from evalcore.otel.otlp import JSON, OtlpError, decode_body, decode_request, export_response, media_type, status_body

log = logging.getLogger(__name__)


def _answer(media: str, status: int, message: str, **headers: str) -> HttpResponse:
    response = HttpResponse(status_body(media, status, message), status=status, content_type=media)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _bearer(request: HttpRequest) -> str:
    kind, _, raw = request.headers.get("Authorization", "").partition(" ")
    return raw.strip() if kind.lower() == "bearer" else ""


def _read_body(request: HttpRequest, limit: int) -> bytes:
    """The raw body, refused past ``limit`` bytes (declared or read)."""
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise OtlpError(f"the request body is over {limit} bytes (the limit, EVALSITE_OTLP_MAX_BYTES)", status=413)
    body = request.read(limit + 1)
    if len(body) > limit:
        raise OtlpError(f"the request body is over {limit} bytes (the limit, EVALSITE_OTLP_MAX_BYTES)", status=413)
    return body


@csrf_exempt  # bearer tokens only: no cookie, nothing for a CSRF check to protect
def otlp_traces(request: HttpRequest) -> HttpResponse:
    """Receive one OTLP/HTTP trace export request and store its spans."""
    media = media_type(request.headers.get("Content-Type", "")) or JSON
    if request.method != "POST":
        return _answer(media, 405, "send spans with POST (OTLP/HTTP)", Allow="POST")
    user = user_for_token(_bearer(request))
    if user is None:
        message = "send an Evalsite API token: Authorization: Bearer esk_... (`evalsite token create`)"
        if _bearer(request):
            message = "the API token is unknown, revoked or expired"
        return _answer(media, 401, message, WWW_Authenticate='Bearer realm="evalsite"')
    if not can_start_runs(user):
        note = scope_note(user) if can_start_runs(role_powers(user)) else ""  # else the role is the limit
        return _answer(media, 403, f"user {user.username!r} needs the member role to send traces" + note)
    if media_type(request.headers.get("Content-Type", "")) is None:
        shown = request.headers.get("Content-Type", "") or "none"
        return _answer(JSON, 415, f"Content-Type {shown!r}: send application/x-protobuf or application/json")
    limit = settings.EVALSITE_OTLP_MAX_BYTES
    try:
        body = decode_body(_read_body(request, limit), request.headers.get("Content-Encoding", ""), limit=limit)
        decoded = decode_request(body, media)
    except OtlpError as exc:
        return _answer(media, exc.status, exc.message)
    try:
        outcome = ingest_spans(decoded.spans, user=user)
    except DatabaseError:
        log.warning("OTLP spans not stored: the database refused the write", exc_info=True)
        return _answer(media, 503, "the database is busy; send the spans again", Retry_After="1")
    # a warning with 0 rejected spans is OTLP's way to say "stored, but look" (partial_success)
    message = "; ".join([*decoded.problems, *filter(None, [outcome.unmapped_message()])])
    return HttpResponse(
        export_response(media, rejected=decoded.rejected, message=message), status=200, content_type=media
    )
