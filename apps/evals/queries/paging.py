"""Pagination of the pages' own lists (results, comparisons): ``page`` / ``num_pages`` shaped like
Django's ``Page``, so one pager template serves every paginated view. The API pages through
:class:`apps.evals.api.pagination.Pages` instead."""

from __future__ import annotations

from typing import Any


class Paged:
    """Pagination helpers over ``page`` / ``num_pages``, shaped like Django's ``Page`` so one
    pager template serves every paginated view."""

    page: int
    num_pages: int

    @property
    def has_next(self) -> bool:
        return self.page < self.num_pages

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def number(self) -> int:
        return self.page

    @property
    def paginator(self) -> Any:
        return self

    def previous_page_number(self) -> int:
        return self.page - 1

    def next_page_number(self) -> int:
        return self.page + 1


def num_pages(total: int, page_size: int) -> int:
    """Pages needed for ``total`` rows (at least 1)."""
    return max(1, -(-total // page_size))
