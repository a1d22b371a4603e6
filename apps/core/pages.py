"""Rendering a page or, for an htmx request, one of its named partials."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.template.response import TemplateResponse


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
