"""``evalsite leaderboard SET [--split dev] [--json]``: a set's leaderboard on one split, as the set page
and ``GET /api/eval/sets/{id}/leaderboard`` give it (:mod:`apps.evals.queries.leaderboard`).

Exit codes: 0, 2 a usage error (no such set).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from rich.console import Console
from rich.table import Table

from apps.evals.cli.console import UsageError, ensure_database
from apps.evals.models import EvalSet
from apps.evals.queries.leaderboard import LeaderRow, board_record, leaderboard


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _bounds(low: float | None, high: float | None, fmt: Any) -> str:
    return "" if low is None or high is None else f" [{fmt(low)}, {fmt(high)}]"


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


def _cells(row: LeaderRow) -> list[str]:
    scores = [
        "—" if c.mean is None else f"{_pct(c.mean)}{_bounds(c.interval.low, c.interval.high, _pct)} n={c.n}/{c.cases}"
        for c in row.scores
    ]
    cost = "—"
    if row.cost is not None:
        bounds = _bounds(row.cost.lo, row.cost.hi, lambda v: f"${v:.5g}")
        cost = f"${row.cost.value:.5g}{bounds} n={row.n_priced}/{row.n_done}"
    latency = "—" + (f" ({row.n_cached} cached)" if row.n_cached else "")
    if row.latency is not None:
        lat = row.latency
        latency = f"{lat.kind} {_ms(lat.value)}{_bounds(lat.low, lat.high, _ms)} n={lat.n}/{lat.cases}"
        latency += f", {row.n_cached} cached left out" if row.n_cached else ""
    version = (f"v{row.set_version}" if row.set_version else "—") + (" (older)" if row.stale else "")
    pass_rate = f"{_pct(row.pass_rate)}{_bounds(row.pass_interval.low, row.pass_interval.high, _pct)} {row.coverage}"
    return [row.label, row.model or "—", version, pass_rate, *scores, cost, latency, row.eval_run_id]


class Command(BaseCommand):
    help = "A set's leaderboard on one split: the latest finished run per target / variant, with intervals."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("set_name", metavar="SET", help="the set's name (or its id)")
        parser.add_argument("--split", default="dev", choices=["train", "dev", "test", "all"], help="default: dev")
        parser.add_argument("--json", action="store_true", help="print the board as JSON (the API's shape)")

    def handle(self, *args: Any, **opts: Any) -> None:
        ensure_database()
        name = opts["set_name"]
        eval_set = EvalSet.objects.filter(name=name).first()
        if eval_set is None and name.isdigit():
            eval_set = EvalSet.objects.filter(pk=int(name)).first()
        if eval_set is None:
            raise UsageError(f"no eval set named {name!r}")
        board = leaderboard(eval_set, opts["split"])
        if opts["json"]:
            sys.stdout.write(json.dumps(board_record(board), default=str, indent=2) + "\n")
            return
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
        if not board.rows and not board.stale:
            console.print(f"no finished run of set {eval_set.name!r} on split {board.split}", markup=False)
            return
        version = f" (set at v{board.current_version})" if board.current_version else ""
        table = Table(title=f"leaderboard · {eval_set.name} · {board.split}{version}", title_justify="left")
        for column in (
            "target / variant",
            "model",
            "set version",
            "pass rate [95%]",
            *board.score_names,
            "cost / case",
            "latency / case",
            "run",
        ):
            table.add_column(column, overflow="fold")
        for row in board.rows:
            table.add_row(*_cells(row))
        if board.stale:
            table.add_section()
            for row in board.stale:
                table.add_row(*_cells(row), style="dim")
        console.print(table)
        if board.stale:
            console.print(
                f"{len(board.stale)} row(s) ran on an older set version: listed last, not ranked", markup=False
            )
