"""``evalsite rescore EVAL_RUN_ID [--scorer SPEC]... [--judge]``: score stored outputs again.

The target is not called. The new eval run is linked to its source and keeps its target,
variant, split and provenance, so the two can be compared in the compare view.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from rich.console import Console

from apps.evals.cli.console import (
    StorageFailure,
    UsageError,
    add_scorer_timeout_argument,
    check_scorer_timeout,
    metrics_table,
    open_existing_database,
    print_run_footer,
    report_table,
)
from apps.evals.cli.error_reasons import ErrorReasons
from apps.evals.cli.judging import (
    REVIEWS_LABEL,
    JudgeTally,
    add_judge_arguments,
    judge_lines,
    judge_setup,
    store_judge_summary,
)
from apps.evals.models import EvalRun
from apps.evals.queries.reviews import labels_by_case
from apps.evals.results.writer import StorageError
from apps.evals.runs.config import RunConfig
from apps.evals.runs.execution import RescoreRefused, rescore_eval_run, rescore_scorers
from evalcore.scorers.base import ScorerSpecError
from evalcore.scoring import DEFAULT_SCORER_TIMEOUT_S
from evalcore.typed_numbers import ascii_integer


class Command(BaseCommand):
    help = "Score a stored eval run's outputs again (new scorers or judge) into a new linked eval run."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("eval_run_id")
        parser.add_argument("--scorer", action="append", default=[], help="scorer spec (repeatable)")
        parser.add_argument(
            "--concurrency",
            type=ascii_integer,
            default=None,
            help=f"scorings at once (default {RunConfig().concurrency})",
        )
        add_scorer_timeout_argument(parser)
        parser.add_argument(
            "--agents-dir",
            help="agents folder holding the run's predicate functions (default: the folder the run recorded)",
        )
        add_judge_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        open_existing_database()
        try:
            self._handle(**opts)
        except StorageError as exc:
            raise StorageFailure(f"results could not be stored: {exc}") from None

    def _handle(self, **opts: Any) -> None:
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
        check_scorer_timeout(opts)
        source = EvalRun.objects.filter(pk=opts["eval_run_id"]).first()
        if source is None:
            raise UsageError(f"no eval run {opts['eval_run_id']!r}")
        judge = judge_setup(opts, reviews_label_ok=True)
        try:
            scorers = rescore_scorers(
                source, list(opts["scorer"]), judge_scorers=judge.scorers, agents_dir=opts.get("agents_dir")
            )
        except (ScorerSpecError, RescoreRefused) as exc:
            raise UsageError(str(exc)) from None
        review_labels = labels_by_case(source) if judge.label == REVIEWS_LABEL else None
        if review_labels is not None and not review_labels:
            console.print(f"[yellow]--judge-label reviews: no case of eval run {source.id} has a human label yet[/]")
        tally = JudgeTally(judge.label, variant=source.variant, review_labels=review_labels) if judge.scorers else None
        reasons = ErrorReasons()

        def on_result(result: Any) -> None:
            reasons.on_result(result)
            if tally is not None:
                tally.on_result(result)

        outcome = rescore_eval_run(
            source,
            scorers,
            services=judge.services,
            concurrency=opts["concurrency"],
            judge=judge.judge,
            on_result=on_result,
            scorer_timeout_s=opts["scorer_timeout"] or DEFAULT_SCORER_TIMEOUT_S,
        )
        console.print(report_table(outcome.report, title=f"rescore of {source.id} · {source.target_id}"))
        details = metrics_table(outcome.report)
        if details is not None:
            console.print(details)
        print_run_footer(console, outcome.eval_run, outcome.report, reasons)
        if tally is not None:
            for line in judge_lines(store_judge_summary(outcome.eval_run.id, tally), outcome.eval_run.id):
                console.print(line)
        console.print(
            f"source eval run {source.id}; compare in the portal: /compare/?a={source.id}&b={outcome.eval_run.id}"
        )
