"""Project middleware."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.views.defaults import page_not_found

from apps.core.storable import unstorable_reason


class IdOutOfRangeMiddleware:
    """An id too large for the database's integer columns (``/sets/99999999999999999999/``,
    ``?set=1e30``-style digits) names no row: answer the 404 page instead of a 500.

    The database driver raises ``OverflowError`` when such a number reaches a query; catching the
    kind once here covers every page, path converter and filter.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, OverflowError):
            return page_not_found(request, Http404("no such id (the number is out of range)"))
        return None


FORM_CONTENT_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class UnstorableTextMiddleware:
    """A page's query parameter or posted form field holding text no database stores as typed (a
    NUL character, which PostgreSQL refuses and SQLite keeps, or a lone surrogate): answer a 400
    naming the field, on every database, before any view reads it.

    Django's form fields refuse a NUL themselves; views that read ``request.POST`` or
    ``request.GET`` directly (a review's comment, a run's name and notes) did not, and PostgreSQL
    answered 500. Checking the kind once here covers every page; the API refuses the same text in
    its own parser (``evalsite.api.TextParser``, a 422 naming the field) and is not checked here.
    A posted body is only read when it is a form (which the CSRF check reads anyway).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if request.path.startswith("/api/"):
            return None
        sources = [("query parameter", request.GET)]
        if request.method == "POST" and request.content_type in FORM_CONTENT_TYPES:
            sources.append(("field", request.POST))
        for kind, data in sources:
            for name, values in data.lists():
                for text in (name, *values):
                    reason = unstorable_reason(text)
                    if reason is not None:
                        return HttpResponseBadRequest(
                            f"Refused: the {kind} {name!r} {reason}.\n", content_type="text/plain; charset=utf-8"
                        )
        return None


class ApiJsonErrorsMiddleware:
    """Every error answered under ``/api/`` is JSON ``{"message", "field"}`` (README, API).

    The API's own errors already are; this catches the ones made elsewhere in plain text or
    HTML: django-ninja's 405 for a method a route does not have, Django's debug pages, any
    middleware's refusal. The status and the ``Allow`` header are kept. First in
    ``MIDDLEWARE``, so it sees every answer last.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/api/") or response.status_code < 400:
            return response
        if request.path.startswith("/api/otlp/"):  # OTLP answers errors in its own shape (google.rpc.Status)
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        if response.status_code == 405:
            allowed = response.get("Allow", "")
            message = f"method {request.method} is not allowed here" + (f" (allowed: {allowed})" if allowed else "")
        else:
            message = response.reason_phrase.lower() if response.reason_phrase else "error"
        answer = JsonResponse({"message": message, "field": None}, status=response.status_code)
        for header in ("Allow", "WWW-Authenticate", "Retry-After"):
            if response.has_header(header):
                answer[header] = response[header]
        return answer
