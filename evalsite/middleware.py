"""Project middleware."""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found


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
