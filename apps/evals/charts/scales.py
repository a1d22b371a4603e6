"""Axis and text geometry shared by the SVG charts: round ("nice") tick values, text width
estimates, label boxes and ellipsis.

The server lays charts out without a browser, so a label's width is an estimate from per-
character advances (:func:`char_em`) of DejaVu Sans, the widest common sans-serif the charts' font
stack falls back to (Debian's default), so the estimate errs wide elsewhere and a reserved margin
is never too small. The browser test (``tests/e2e/test_charts.py``) checks the real boxes
(``getBBox``) against the viewBox.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ASCENT_EM = 0.95
"""Height above the baseline, in em, of a label's box (DejaVu Sans' ascent is 0.928 em)."""

DESCENT_EM = 0.3
"""Depth below the baseline, in em, of a label's box (DejaVu Sans' descent is 0.236 em)."""


def char_em(char: str) -> float:
    """Advance width in em of one character, rounded up from DejaVu Sans' metrics (digits
    0.636, lower case about 0.6, upper case up to 0.8, "%" 0.95, "m"/"w" 0.97, space 0.318)."""
    if char in "%mwMW@":
        return 0.98
    if char.isdigit():
        return 0.64
    if char.isupper():
        return 0.78
    if char in " .,:;'|!il()[]-–":
        return 0.4
    return 0.64


@dataclass(frozen=True, slots=True)
class Box:
    """An axis-aligned box in viewBox pixels: ``x0 <= x1``, ``y0 <= y1`` (y grows downwards)."""

    x0: float
    y0: float
    x1: float
    y1: float

    def inside(self, width: float, height: float) -> bool:
        """Whether the box lies inside a ``0 0 width height`` viewBox."""
        return self.x0 >= 0 and self.y0 >= 0 and self.x1 <= width and self.y1 <= height

    def overlaps(self, other: Box) -> bool:
        """Whether the two boxes share any area (touching edges do not count)."""
        return self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1


def text_width(text: str, font_px: float) -> float:
    """Estimated rendered width in px of ``text`` at ``font_px`` (see :func:`char_em`)."""
    return sum(char_em(c) for c in text) * font_px


def text_box(x: float, y: float, text: str, *, font_px: float, anchor: str = "start", baseline: str = "auto") -> Box:
    """The estimated box of an SVG ``<text>`` at ``(x, y)``.

    Args:
        x, y: The text's position attributes (px).
        text: Its content.
        font_px: Font size in px.
        anchor: ``text-anchor``: ``start``, ``middle`` or ``end``.
        baseline: ``dominant-baseline``: ``auto`` (``y`` is the alphabetic baseline) or
            ``middle`` (``y`` is the vertical centre).

    Raises:
        ValueError: An unknown ``anchor`` or ``baseline``.
    """
    width = text_width(text, font_px)
    offsets = {"start": 0.0, "middle": width / 2, "end": width}
    if anchor not in offsets:
        raise ValueError(f"text anchor must be start, middle or end, got {anchor!r}")
    x0 = x - offsets[anchor]
    if baseline == "auto":
        y0, y1 = y - ASCENT_EM * font_px, y + DESCENT_EM * font_px
    elif baseline == "middle":
        half = (ASCENT_EM + DESCENT_EM) * font_px / 2
        y0, y1 = y - half, y + half
    else:
        raise ValueError(f"dominant-baseline must be auto or middle, got {baseline!r}")
    return Box(round(x0, 1), round(y0, 1), round(x0 + width, 1), round(y1, 1))


def ellipsize(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters, ending in "…" when cut (``max_chars`` >= 2)."""
    if max_chars < 2:
        raise ValueError("max_chars must be >= 2")
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


def nice_number(value: float, *, round_it: bool) -> float:
    """A "nice" number (1, 2 or 5 times a power of ten) close to ``value`` > 0: the nearest one
    when ``round_it``, else the smallest one >= ``value`` (Heckbert 1990, below)."""
    exponent = math.floor(math.log10(value))
    fraction = value / 10**exponent
    if round_it:
        nice = 1.0 if fraction < 1.5 else 2.0 if fraction < 3 else 5.0 if fraction < 7 else 10.0
    else:
        nice = 1.0 if fraction <= 1 else 2.0 if fraction <= 2 else 5.0 if fraction <= 5 else 10.0
    return float(nice * 10.0**exponent)


def nice_ticks(low: float, high: float, max_ticks: int = 6) -> list[float]:
    """Round tick values covering ``low..high``: a step of 1, 2 or 5 x 10^k and the ticks its
    multiples from ``floor(low / step)`` to ``ceil(high / step)`` ("loose labeling").

    Source: Paul S. Heckbert, "Nice numbers for graph labels", in *Graphics Gems* (A. Glassner,
    ed.), Academic Press, 1990, pp. 61-63. One change: the step is the nice number nearest
    ``(high - low) / (max_ticks - 1)`` without first rounding the range up to a nice number (which
    can double the axis, e.g. -57%..72% drawn as -100%..100%); when that gives more than
    ``max_ticks + 2`` ticks the next nice step is taken. The first and last tick are the axis' ends.

    Args:
        low, high: The data range (equal values get a unit-wide range around them).
        max_ticks: About how many ticks are wanted (>= 2).

    Returns:
        The tick values, ascending, rounded to the step's precision (no ``0.30000000000000004``).

    Raises:
        ValueError: ``max_ticks`` < 2, or a bound not finite.
    """
    if max_ticks < 2:
        raise ValueError("max_ticks must be >= 2")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"tick range must be finite, got {low}..{high}")
    if high < low:
        low, high = high, low
    if high == low:
        low, high = low - 0.5, high + 0.5
    step = nice_number((high - low) / (max_ticks - 1), round_it=True)
    while True:
        first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
        if last - first + 1 <= max_ticks + 2:
            break
        step = nice_number(step * 1.01, round_it=False)  # the next of 1, 2, 5 x 10^k
    digits = max(0, -math.floor(math.log10(step))) + 1
    return [round(i * step, digits) + 0.0 for i in range(first, last + 1)]


def step_decimals(ticks: list[float], scale: float = 1.0) -> int:
    """Decimals a tick label needs so that ``ticks`` (times ``scale``, e.g. 100 for percents)
    read distinctly: 0 for a step of 1 or more, 1 for 0.1-0.5, and so on."""
    if len(ticks) < 2:
        return 0
    step = abs(ticks[1] - ticks[0]) * scale
    return max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0
