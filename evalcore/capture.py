"""What a target prints, kept per case (bounded) for its trace instead of flooding the terminal.

A target that prints (a chatty SDK, a debug ``print``) used to write straight to the CLI's
stdout: 40 MB ahead of the results table, and nothing of it in the case's trace. While a run
executes, ``sys.stdout`` and ``sys.stderr`` are :class:`RoutedStream` wrappers: a write made
inside a :func:`capturing` block (a target call) goes to that case's :class:`Captured` buffer,
chosen by a context variable, so cases running at once on the event loop or on worker threads
(:func:`evalcore._util.threads.run_blocking` carries the context over) never mix; any other write (the
CLI's own output, its progress bar) goes to the stream that was there before.

Each stream keeps at most :data:`LIMIT_BYTES` bytes (UTF-8) per case; the rest is counted and
the kept text ends with a ``… truncated at N bytes`` line.

Not captured: writes to file descriptors 1 and 2 below Python (a subprocess that inherits them,
C code), and writes from a thread the target starts itself (it does not carry the context).
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

LIMIT_BYTES = 64 * 1024
"""Bytes of each stream kept per case (UTF-8)."""

STREAMS = ("stdout", "stderr")
"""The streams captured, by their ``sys`` name."""


class Captured:
    """One case's text on one stream, the first :data:`LIMIT_BYTES` bytes kept.

    Attributes:
        limit: Bytes kept at most.
        total: Bytes written in all (kept or not).
    """

    def __init__(self, limit: int = LIMIT_BYTES) -> None:
        self.limit = limit
        self.total = 0
        self._parts: list[str] = []
        self._kept = 0
        self._full = False
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        """Keep ``text`` while there is room, count all of it."""
        data = text.encode("utf-8", "surrogatepass")
        with self._lock:
            self.total += len(data)
            room = self.limit - self._kept
            if room <= 0 or self._full:
                return
            if len(data) > room:
                # cut on a character boundary (a partial UTF-8 sequence at the end is dropped),
                # and keep nothing after the cut: the kept text is one unbroken prefix
                text = data[:room].decode("utf-8", "ignore")
                self._parts.append(text)
                self._kept += len(text.encode("utf-8", "surrogatepass"))
                self._full = True
                return
            self._parts.append(text)
            self._kept += len(data)

    @property
    def truncated(self) -> bool:
        """More was written than kept."""
        return self.total > self._kept

    def text(self) -> str:
        """The kept text, ending with a ``… truncated at N bytes`` line when some was dropped."""
        with self._lock:
            kept = "".join(self._parts)
            if self.total > self._kept:
                kept += f"\n… truncated at {self.limit} bytes ({self.total - self._kept} more bytes not kept)"
            return kept


_CURRENT: contextvars.ContextVar[dict[str, Captured] | None] = contextvars.ContextVar(
    "evalcore_captured_output", default=None
)


class RoutedStream(io.TextIOBase):
    """A ``sys.stdout`` / ``sys.stderr`` stand-in: the current case's buffer, else the original.

    Everything but writing (``isatty``, ``fileno``, ``encoding``...) is the original stream's, so
    the CLI's terminal detection and colours are unchanged.
    """

    def __init__(self, name: str, original: TextIO) -> None:
        super().__init__()
        self.name = name
        self.original = original

    def write(self, text: str) -> int:
        """To the current case's buffer when one is capturing, else to the original stream."""
        captured = _CURRENT.get()
        if captured is None:
            return self.original.write(text)
        captured[self.name].write(text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        """Each line through :meth:`write`."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush the original stream (a captured write needs none)."""
        if _CURRENT.get() is None:
            self.original.flush()

    def isatty(self) -> bool:
        """The original stream's."""
        return self.original.isatty()

    def fileno(self) -> int:
        """The original stream's."""
        return self.original.fileno()

    def writable(self) -> bool:
        """Always."""
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The original stream's."""
        return getattr(self.original, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        """The original stream's."""
        return getattr(self.original, "errors", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


_LOCK = threading.Lock()
_USERS = 0


@contextlib.contextmanager
def routed_streams() -> Iterator[None]:
    """Route ``sys.stdout`` / ``sys.stderr`` through :class:`RoutedStream` for the block (a run).

    Nested and concurrent blocks share one pair of wrappers; the streams found at the start are
    put back when the last block ends, unless someone replaced them meanwhile (then theirs stay).
    """
    global _USERS
    with _LOCK:
        if _USERS == 0:
            for name in STREAMS:
                current = getattr(sys, name)
                if not isinstance(current, RoutedStream) and current is not None:
                    setattr(sys, name, RoutedStream(name, current))
        _USERS += 1
    try:
        yield
    finally:
        with _LOCK:
            _USERS -= 1
            if _USERS == 0:
                for name in STREAMS:
                    current = getattr(sys, name)
                    if isinstance(current, RoutedStream):
                        setattr(sys, name, current.original)


def new_capture(limit: int = LIMIT_BYTES) -> dict[str, Captured]:
    """Empty buffers for one case: ``{"stdout": Captured, "stderr": Captured}``."""
    return {name: Captured(limit) for name in STREAMS}


@contextlib.contextmanager
def capturing(into: dict[str, Captured] | None = None) -> Iterator[dict[str, Captured]]:
    """Capture what this context prints (and the tasks and worker threads it starts) per stream.

    Args:
        into: The buffers to fill (:func:`new_capture`; e.g. one case's, over its retries);
            new ones when ``None``.

    Yields:
        The buffers, filled while the block runs (only while :func:`routed_streams` is in
        force; otherwise nothing is routed here).
    """
    captured = new_capture() if into is None else into
    token = _CURRENT.set(captured)
    try:
        yield captured
    finally:
        _CURRENT.reset(token)
