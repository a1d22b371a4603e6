"""Why cases errored, for the CLI summary: the distinct reasons with counts, the most common first.

"4 target error(s)" alone sends people digging; the footer names the few reasons that account for
them (one line each) and where to read every error. Folded from each result as it arrives
(``on_result``), so nothing is kept per case.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from evalcore.redact import redact_text
from evalcore.types import CaseResult

SHOWN = 3
"""How many distinct reasons the summary names per kind."""

WIDTH = 100
"""A reason is cut to this many characters (one terminal line with its count)."""

_SPACES = re.compile(r"\s+")


def one_line(text: str, width: int = WIDTH) -> str:
    """``text``'s first non-blank line, runs of whitespace as one space, cut to ``width`` with ``…``.

    Credentials are redacted first (:func:`evalcore.redact.redact_text`: configured keys, URL
    passwords), before the cut, so no part of one reaches the terminal: the reasons are read from
    the results in memory, before the store redacts what it writes.
    """
    text = redact_text(text)
    line = next((part for part in text.splitlines() if part.strip()), "")
    line = _SPACES.sub(" ", line).strip() or "(no message)"
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def top_reasons(counts: Counter[str], n: int = SHOWN) -> list[tuple[str, int]]:
    """The ``n`` most common reasons, ties in alphabetical order (the same output run after run)."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


def reason_lines(counts: Counter[str]) -> list[str]:
    """``  3 × ValueError: …`` per shown reason, then how many other reasons there are."""
    shown = top_reasons(counts)
    lines = [f"  {n} × {reason}" for reason, n in shown]
    if len(counts) > len(shown):
        lines.append(f"  … and {len(counts) - len(shown)} other reason(s)")
    return lines


def where_to_see(eval_run_id: str) -> str:
    """Where to read every error of a run: the run page's errored cases, or its export."""
    return f"/runs/{eval_run_id}/?status=errored in the portal (evalsite serve), or evalsite export {eval_run_id}"


class ErrorReasons:
    """Counts distinct target and scorer error reasons over a run's results.

    A target error counts once per case, as ``Type: message``; a scorer error once per failing
    scorer per case (as ``EvalReport.scorer_errors`` counts), as ``scorer: message`` (the
    scorer's name is the part of the score's name before its first ``.``).
    """

    def __init__(self) -> None:
        self.target: Counter[str] = Counter()
        self.scorer: Counter[str] = Counter()

    def on_result(self, result: CaseResult) -> None:
        """Fold one case's errors in."""
        error = result.run.error
        if error is not None:
            self.target[one_line(f"{error.type}: {error.message}")] += 1
        seen: set[str] = set()
        for score in result.scores:
            scorer = score.name.split(".")[0]
            if score.error is None or scorer in seen:
                continue
            seen.add(scorer)
            self.scorer[one_line(f"{scorer}: {score.error}")] += 1

    def lines(self, report: Any, eval_run_id: str) -> list[str]:
        """The footer's reason lines: target errors, scorer errors, then where to see every error
        (that line alone when the run had errors this process did not see: a queued run's).

        Args:
            report: The run's :class:`~evalcore.report.EvalReport` (its error counts head each block).
            eval_run_id: The run, for where to see every error.
        """
        lines: list[str] = []
        if self.target:
            lines.append(f"{report.target_errors} target error(s):")
            lines += reason_lines(self.target)
        if self.scorer:
            lines.append(f"{report.scorer_errors} scorer error(s):")
            lines += reason_lines(self.scorer)
        if report.target_errors or report.scorer_errors:
            lines.append(f"every error: {where_to_see(eval_run_id)}")
        return lines
