"""``evalsite compare RUN RUN [RUN...] [--baseline RUN] [--json]``: k runs of one set compared at
once (issue 27): the ranking with intervals and the group no test tells from the best, each run
against the baseline with the A/B page's verdict Holm-corrected over the runs, and the flip
matrix; ``--json`` prints the body of ``GET /api/eval/compare-many`` instead; ``--export FILE``
writes the per-case table (``.csv`` / ``.jsonl`` / ``.parquet``, by the file's suffix)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from rich.console import Console
from rich.table import Table

from apps.evals.cli.console import UsageError, open_existing_database
from apps.evals.exports.downloads import many_download, write_download
from apps.evals.queries.compare_many import (
    ManyView,
    compare_many_runs,
    comparison_payload,
    load_runs,
    many_scorer_deltas,
    many_slices,
    pareto_rows,
    parse_run_ids,
)
from evalcore.errors import InvalidInputError

SUFFIX_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _points(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.1f}"


class Command(BaseCommand):
    help = "Compare 2..20 runs of a set: ranking with intervals, corrected verdicts against a baseline, flips."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("runs", nargs="+", help="eval run ids (at least two), in order")
        parser.add_argument(
            "--baseline", help="the baseline run (default: the set's pinned one among them, else the first)"
        )
        parser.add_argument("--json", action="store_true", help="print the comparison as JSON (the API's shape)")
        parser.add_argument("--scorers", action="store_true", help="add per-scorer deltas (reads every score)")
        parser.add_argument("--slices", action="store_true", help="add each run's slices against the baseline")
        parser.add_argument("--pareto", action="store_true", help="add the quality x cost x latency view")
        parser.add_argument("--export", metavar="FILE", help="write the per-case table (.csv, .jsonl or .parquet)")

    def handle(self, *args: Any, **opts: Any) -> None:
        open_existing_database()
        try:
            view = compare_many_runs(load_runs(parse_run_ids(opts["runs"])), opts["baseline"])
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
        if opts["export"]:
            fmt = SUFFIX_FORMATS.get(Path(opts["export"]).suffix.lower())
            if fmt is None:
                raise UsageError(f"--export {opts['export']}: name a .csv, .jsonl or .parquet file")
            size = write_download(many_download(view, fmt), opts["export"])
            # on stderr: --json's body on stdout stays one JSON document
            self.stderr.write(f"wrote the per-case table to {Path(opts['export']).resolve()} ({size:,} bytes)")
        payload = comparison_payload(
            view,
            scorers=many_scorer_deltas(view) if opts["scorers"] else None,
            slices=many_slices(view) if opts["slices"] else None,
            pareto=pareto_rows(view) if opts["pareto"] else None,
        )
        if opts["json"]:
            self.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False))
            return
        self._print(view, payload)

    def _print(self, view: ManyView, payload: dict[str, Any]) -> None:
        buffer = io.StringIO()
        wide = sys.stdout.isatty()
        console = Console(
            file=buffer, highlight=False, width=max(Console().width, 120) if wide else 160, force_terminal=wide or None
        )
        names = {run.pk: view.name(i) for i, run in enumerate(view.runs)}
        c = view.comparison
        console.print(
            f"[bold]{len(view.runs)} runs[/] of set {payload['set']} ({payload['split']}), "
            f"{c.n_cases} cases in every run; baseline {names[payload['baseline']]} ({payload['baseline_chosen']})"
        )
        if c.reason:
            console.print(f"[yellow]{c.reason}[/]: no interval, rank interval or call")
        coverage = {item["id"]: item for item in payload["runs"]}
        ranking = Table(title="Ranking (best first)")
        for header in ("#", "run", "pass rate", "95% CI", "rank (95%)", "coverage", "errored/unscored", "vs the best"):
            ranking.add_column(header, justify="right" if header not in ("run", "vs the best") else "left")
        for place, entry in enumerate(payload["ranking"], start=1):
            if entry["low"] is None:
                interval = entry["interval_reason"] or "—"
            else:
                interval = f"[{_pct(entry['low'])}, {_pct(entry['high'])}]"
            rank = "—" if entry["rank_low"] is None else f"{entry['rank_low']}–{entry['rank_high']}"
            if entry["to_best"] is None:
                versus = "best"
            elif entry["tied_with_best"]:
                versus = "indistinguishable from the best"
            else:
                versus = (
                    f"worse ({_points(-(entry['to_best']['delta'] or 0))} pts, Holm p {entry['to_best']['p_holm']:.3g})"
                )
            run = coverage[entry["run"]]
            ranking.add_row(
                str(place),
                names[entry["run"]],
                _pct(entry["pass_rate"]),
                interval,
                rank,
                run["coverage"],
                f"{run['errored']}/{run['unscored']}",
                versus,
            )
        console.print(ranking)
        pairs = Table(title=f"Against the baseline {names[payload['baseline']]} (Holm over {len(payload['pairs'])})")
        for header in ("run", "Δ points", "95% CI", "pass→fail", "fail→pass", "p (Holm)", "verdict"):
            pairs.add_column(header, justify="left" if header in ("run", "verdict") else "right")
        for pair in payload["pairs"]:
            interval = pair["interval"]
            pairs.add_row(
                names[pair["b"]],
                _points(pair["delta"]),
                f"[{_points(interval['low'])}, {_points(interval['high'])}]" if interval else pair["interval_reason"],
                str(pair["counts"]["a_only"]),
                str(pair["counts"]["b_only"]),
                f"{pair['p_holm']:.3g}",
                pair["corrected_verdict"],
            )
        console.print(pairs)
        flips = Table(title="Flips: passed by the row, failed by the column")
        flips.add_column("")
        for run in view.runs:
            flips.add_column(names[run.pk], justify="right")
        for i, run in enumerate(view.runs):
            flips.add_row(names[run.pk], *("—" if i == j else str(c.flips[i][j]) for j in range(len(view.runs))))
        console.print(flips)
        if "pareto" in payload:
            front = [names[row["run"]] for row in payload["pareto"] if row["on_front"]]
            console.print(f"Pareto front ({', '.join(payload['pareto'][0]['axes'])}): {', '.join(front)}")
        self.stdout.write(buffer.getvalue(), ending="")
