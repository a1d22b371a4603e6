"""``evalsite reprice EVAL_RUN_ID``: cost a stored run again with today's price table.

A run keeps the prices it was costed with when it finished; a later change of the table (a new
version of a model's prices, in the admin) changes no old run until this command is run for it.
It prints what changed: each model's price version old → new and the run's total cost old → new.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.evals.cli.console import UsageError, open_existing_database
from apps.evals.models import EvalRun
from apps.evals.results.costs import Repricing, reprice_eval_run


class Command(BaseCommand):
    help = "Cost a stored eval run again with today's price table (says old → new)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("eval_run_id")

    def handle(self, *args: Any, **opts: Any) -> None:
        open_existing_database()
        try:
            outcome = reprice_eval_run(opts["eval_run_id"])
        except EvalRun.DoesNotExist:
            raise UsageError(f"no eval run {opts['eval_run_id']!r}") from None
        for line in reprice_lines(opts["eval_run_id"], outcome):
            self.stdout.write(line)


def reprice_lines(eval_run_id: str, outcome: Repricing) -> list[str]:
    """What a reprice printed: one line per model whose price changed, the totals, unpriced models."""
    lines = [f"eval run {eval_run_id}: {outcome.n_costed} results costed with today's price table"]
    for model in sorted(set(outcome.old_prices) | set(outcome.new_prices)):
        old, new = outcome.old_prices.get(model), outcome.new_prices.get(model)
        if old is not None and new is not None and old.version == new.version:
            continue
        lines.append(f"  {model}: {_version(old)} → {_version(new)}")
    lines.append(
        f"  total of priced cases: {_usd(outcome.old_total_usd)} → {_usd(outcome.new_total_usd)} "
        f"(cases priced: {outcome.old_priced} → {outcome.new_priced})"
    )
    if outcome.unpriced:
        lines.append(f"  unpriced (no price in the table): {', '.join(outcome.unpriced)}")
    return lines


def _version(prices: Any) -> str:
    return "unpriced" if prices is None else f"v{prices.version}"


def _usd(value: float | None) -> str:
    return "none" if value is None else f"${value:.4g}"
