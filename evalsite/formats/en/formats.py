"""The portal's and the admin's date formats (issue 26): ``2026-12-05 18:31 UTC``, the zone's
label always shown (``T``), ISO order, 24-hour clock. Django's admin lists and ``|date`` without
an argument use these; :func:`apps.core.dates.format_when` (the ``when`` filter) reads the same
``DATETIME_FORMAT``."""

DATETIME_FORMAT = "Y-m-d H:i T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
