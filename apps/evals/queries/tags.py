"""The tag filter on cases, shared by the admin, the set page and search."""

from __future__ import annotations

import json

from django.db import connection
from django.db.models import Q


def has_tag(tag: str) -> Q:
    """A filter on ``EvalCase.tags`` (a JSON list of strings): cases carrying ``tag``.

    A substring match on the quoted tag inside the list's JSON text: portable (SQLite has no
    JSON containment) and case-insensitive for ASCII, like the rest of the filters. The text
    differs by database: SQLite keeps Django's ``json.dumps`` output (non-ASCII written as
    ``\\uXXXX``), PostgreSQL's ``jsonb`` prints non-ASCII characters as themselves.
    """
    needle = json.dumps(tag, ensure_ascii=connection.vendor != "postgresql")
    return Q(tags__icontains=needle)
