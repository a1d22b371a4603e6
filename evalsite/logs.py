"""Logging helpers named by ``settings.LOGGING``."""

from __future__ import annotations

import logging


class OneLineFilter(logging.Filter):
    """Drops the traceback of a record: the message alone says what happened (bad Host header)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True
