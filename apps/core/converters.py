"""URL path converters the apps share.

``caseid``: a case id as one path segment of any text. Case ids come from users' files and may
hold ``/``, ``?``, ``#``, ``%``, spaces or newlines. A client percent-encodes the id with nothing
kept (Python: ``urllib.parse.quote(case_id, safe="")``; JavaScript: ``encodeURIComponent``),
the same encoding the pages give a case id in a query string (``?case=`` on the compare-case
page); the server decodes the path before routing, so ``%2F`` arrives as ``/`` and the converter
takes every character, newlines too (Django's ``path`` converter, ``.+``, stops at a newline).
A raw ``/`` works too: the rest of the route is fixed, so the id is everything between.
"""

from __future__ import annotations

from django.urls import register_converter


class CaseIdConverter:
    """Any non-empty text, ``/`` and line breaks included."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        # reverse() percent-encodes what this returns (all but "/" and a few sub-delimiters)
        return value


register_converter(CaseIdConverter, "caseid")

CASE_ID_PARAM = "{caseid:case_id}"
"""A ``case_id`` path parameter of a ninja route (``/runs/{run_id}/cases/{caseid:case_id}/reviews``)."""
