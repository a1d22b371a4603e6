"""One way to show a moment across the portal and the admin (issue 26): ``2026-12-05 18:31 UTC``,
in the site's time zone (``TIME_ZONE``) with its label, so no page leaves the zone to guess. The
shape is ``DATETIME_FORMAT`` of ``evalsite/formats/en/formats.py``, which the admin uses too."""

from __future__ import annotations

from datetime import datetime

from django.utils import dateformat, timezone
from django.utils.formats import get_format

EMPTY = "—"
"""What a missing moment shows."""


def format_when(value: datetime | None, *, seconds: bool = False) -> str:
    """``value`` as ``YYYY-MM-DD HH:MM ZONE`` (``HH:MM:SS`` with ``seconds``) in the current time
    zone; :data:`EMPTY` for ``None``. A naive datetime is taken to be in the current zone already.
    ``2026-12-05 18:31 UTC``; the zone label is the zone's abbreviation at that moment
    (``CET`` / ``CEST`` for Europe/Paris).
    """
    if value is None:
        return EMPTY
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    shape = str(get_format("DATETIME_FORMAT"))  # "Y-m-d H:i T" (evalsite/formats/en/formats.py)
    return dateformat.format(local, shape.replace("H:i", "H:i:s") if seconds else shape)
