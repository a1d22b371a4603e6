"""The API's paginator: django-ninja's page-number pagination in the API's page shape."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Schema
from ninja.pagination import PageNumberPagination
from pydantic import Field

MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50


class PageIn(Schema):
    """Pagination query parameters: ``page`` (1-based) and ``page_size`` (1..500)."""

    page: int = Field(1, ge=1)
    page_size: int = Field(DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)


class PageOut(Schema):
    """A page of rows (a paginated route's answer narrows ``items`` to its row schema)."""

    items: list[Any]
    page: int
    page_size: int
    total: int
    pages: int


class Pages(PageNumberPagination):
    """ninja's page-number pagination with the API's page shape ``{items, page, page_size,
    total, pages}`` (ninja's own answers ``{items, count}``); ``page_size`` is 1..500, default 50.

    Routes use it as ``@paginate(Pages)`` and return an ordered queryset; a route whose page is
    part of a larger answer calls :meth:`page_of` itself.
    """

    Input = PageIn  # type: ignore[assignment]  # ninja's Input is a nested class; ours has bounds
    Output = PageOut  # type: ignore[assignment]  # ninja's Output is {items, count}; ours keeps the API's fields

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(page_size=DEFAULT_PAGE_SIZE, max_page_size=MAX_PAGE_SIZE, **kwargs)

    def paginate_queryset(self, queryset: QuerySet[Any], pagination: Any, request: HttpRequest, **params: Any) -> Any:
        return self.page_of(queryset, pagination.page, pagination.page_size)

    @staticmethod
    def page_of(
        queryset: QuerySet[Any] | Sequence[Any], page: int, page_size: int, total: int | None = None
    ) -> dict[str, Any]:
        """One page of an ordered queryset (or a list) in the API's shape (``total`` given: no COUNT)."""
        if total is None:
            total = queryset.count() if isinstance(queryset, QuerySet) else len(queryset)
        start = (page - 1) * page_size
        items = list(queryset[start : start + page_size]) if start < total else []
        return {
            "items": items,
            "page": page,
            "page_size": page_size,
            "total": total,
            "pages": max(1, math.ceil(total / page_size)),
        }
