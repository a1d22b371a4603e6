"""``evalsite targets AGENTS_DIR``: list the targets a folder declares (and its broken modules)."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from rich.console import Console
from rich.table import Table

from apps.evals.cli.console import UsageError
from evalcore.discovery import discover_targets, scorer_label
from evalcore.rules import RuleError, target_rules


class Command(BaseCommand):
    help = "List the targets declared by a folder of Python modules."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agents_dir")

    def handle(self, *args: Any, **opts: Any) -> None:
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
        try:
            discovery = discover_targets(opts["agents_dir"])
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from None
        table = Table(title=f"targets in {opts['agents_dir']}", title_justify="left")
        for column in ("id", "kind", "variants", "scorers", "description"):
            table.add_column(column)
        for spec in discovery.targets.values():
            try:
                kind = spec.kind
            except Exception as exc:  # noqa: BLE001 - a broken declaration is listed, not fatal
                kind = f"[red]{type(exc).__name__}[/]"
            scorers = ", ".join(scorer_label(s) for s in spec.scorers)
            table.add_row(spec.id, kind, ", ".join(spec.variants) or "-", scorers or "-", spec.description)
        console.print(table)
        for spec in discovery.targets.values():
            try:
                rules = target_rules(spec.id, spec.rules, opts["agents_dir"])
            except RuleError as exc:
                console.print(f"[red]problem[/] rules of {spec.id}: {exc}", highlight=False)
                continue
            for rule in rules:
                console.print(f"rule {spec.id} {rule.id}: {rule.text}", markup=False)
        for problem in discovery.problems:
            console.print(f"[red]problem[/] {problem.path}: {problem.message}")
        if not discovery.targets and discovery.problems:
            raise SystemExit(1)
