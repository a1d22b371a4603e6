"""Project middleware."""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse
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
