"""Rendering a page or, for an htmx request, one of its named partials."""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal
from django.http import HttpRequest
from django.template.response import TemplateResponse

page_sections = Signal()
"""Sent by a page that upper floors may add to, with ``sender`` the page's name (``"status"``) and
``request``; each receiver returns safe HTML or ``""`` (``apps.online`` adds the latest alert
firings to the status page this way: the page's own app never imports it)."""


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], partials: dict[str, str] | None = None
) -> TemplateResponse:
    """The whole page, or for an htmx request the partial named for its ``HX-Target``.

    ``partials`` maps an element id (the request's target) to a partial name; any other htmx
    request gets the ``content`` partial (the page's main area, used by nav links).
    """
    htmx = getattr(request, "htmx", None)
    if htmx:
        name = (partials or {}).get(htmx.target or "", "content")
        return TemplateResponse(request, f"{template}#{name}", context)
    return TemplateResponse(request, template, context)
