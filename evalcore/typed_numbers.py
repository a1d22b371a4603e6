"""Numbers people type (command-line options, environment variables): ASCII only, bounded.

Python's ``int()``, ``float()`` and a regular expression's ``\\d`` also take other scripts'
digits (``"١"``, an Arabic-Indic one, is 1; a fullwidth ``"５"`` is 5), and ``int()`` takes any
length up to 4,300 digits, which then overflows a date or a database column. A number typed into
Evalsite is spelled in ASCII digits, at most :data:`MAX_DIGITS` of them, or it is refused with a
usage error naming the option. Both functions are ``argparse`` ``type=`` callables: their
:class:`NotATypedNumber` is an :class:`argparse.ArgumentTypeError` (argparse prints it as that
usage line) and a ``ValueError`` (what parsers of environment variables catch).
"""

from __future__ import annotations

import argparse
import math
import re

MAX_DIGITS = 18
"""The most digits a typed integer may have (any 64-bit database integer holds it)."""


class NotATypedNumber(argparse.ArgumentTypeError, ValueError):
    """A typed number that is not ASCII digits, too long, or not finite."""


_INTEGER = re.compile(r"[-+]?[0-9]+", flags=re.ASCII)
_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?", flags=re.ASCII)


def ascii_integer(text: str) -> int:
    """An integer in ASCII digits (an optional sign, at most :data:`MAX_DIGITS` digits).

    Raises:
        NotATypedNumber: Anything else (``"١"``, ``"1.0"``, 19 digits).
    """
    raw = str(text).strip()
    if not _INTEGER.fullmatch(raw) or len(raw.lstrip("+-")) > MAX_DIGITS:
        raise NotATypedNumber(f"not an integer in ASCII digits (at most {MAX_DIGITS}): {text!r}")
    return int(raw)


def ascii_number(text: str) -> float:
    """A finite decimal number in ASCII (``0.5``, ``-3``, ``1e-3``; no ``nan``, ``inf``, ``"٠.٥"``).

    Raises:
        NotATypedNumber: Anything else.
    """
    raw = str(text).strip()
    if not _NUMBER.fullmatch(raw) or len(raw) > 4 * MAX_DIGITS:
        raise NotATypedNumber(f"not a number in ASCII digits: {text!r}")
    value = float(raw)
    if not math.isfinite(value):
        raise NotATypedNumber(f"must be a finite number, got {text!r}")
    return value
