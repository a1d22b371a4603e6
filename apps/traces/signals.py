"""Events the traces floor emits for the floors above it (it never imports them).

- :data:`traces_ingested`: sent after an OTLP export request's traces are committed, with
  ``run_ids`` (the run ids of the traces that got new spans). ``apps.online`` listens and
  enqueues the traces for its scoring rules.
- :data:`trace_page_sections`: sent while the trace page renders, with ``run`` and ``request``;
  each receiver returns HTML (``SafeString``) to show below the trace's input and answer, or
  ``""`` for nothing (``apps.online`` shows the trace's online scores there).
"""

from __future__ import annotations

from django.dispatch import Signal

traces_ingested = Signal()
"""Sent with ``run_ids: list[str]`` once the traces' new spans are committed."""

trace_page_sections = Signal()
"""Sent with ``run`` and ``request``; a receiver returns safe HTML or ``""``."""
