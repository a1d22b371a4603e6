"""``evalsite rescore EVAL_RUN_ID [--scorer SPEC]... [--judge]``: score stored outputs again.

The target is not called. The new eval run is linked to its source and keeps its target,
variant, split and provenance, so the two can be compared in the compare view.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from rich.console import Console

from apps.evals.console import (
    UsageError,
    add_scorer_timeout_argument,
    check_scorer_timeout,
    metrics_table,
    print_run_footer,
    report_table,
)
from apps.evals.judging import JudgeTally, add_judge_arguments, judge_lines, judge_setup, store_judge_summary
from apps.evals.models import EvalRun
from apps.evals.services import rescore_eval_run
from evalcore.discovery import rebind_agents_scorer_specs
from evalcore.runner import DEFAULT_SCORER_TIMEOUT_S
from evalcore.scorers.base import ScorerSpecError, resolve_scorers


class Command(BaseCommand):
    help = "Score a stored eval run's outputs again (new scorers or judge) into a new linked eval run."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("eval_run_id")
        parser.add_argument("--scorer", action="append", default=[], help="scorer spec (repeatable)")
        parser.add_argument("--concurrency", type=int, default=8)
        add_scorer_timeout_argument(parser)
        parser.add_argument(
            "--agents-dir",
            help="agents folder holding the run's predicate functions (default: the folder the run recorded)",
        )
        add_judge_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
        check_scorer_timeout(opts)
        source = EvalRun.objects.filter(pk=opts["eval_run_id"]).first()
        if source is None:
            raise UsageError(f"no eval run {opts['eval_run_id']!r}")
        specs: list[Any] = list(opts["scorer"]) or ([] if opts.get("judge") else list(source.scorer_specs))
        if not opts["scorer"]:
            specs = _rebind_agents_functions(specs, opts.get("agents_dir") or source.config.get("agents_dir") or "")
        judge = judge_setup(opts)
        try:
            scorers = resolve_scorers(specs) + judge.scorers
        except ScorerSpecError as exc:
            raise UsageError(str(exc)) from None
        if not scorers:
            raise UsageError("nothing to score with: give --scorer SPEC or --judge")
        tally = JudgeTally(judge.label, variant=source.variant) if judge.scorers else None
        outcome = rescore_eval_run(
            source,
            scorers,
            services=judge.services,
            concurrency=opts["concurrency"],
            extra_config=judge.config,
            on_result=tally.on_result if tally else None,
            scorer_timeout_s=opts["scorer_timeout"] or DEFAULT_SCORER_TIMEOUT_S,
        )
        console.print(report_table(outcome.report, title=f"rescore of {source.id} · {source.target_id}"))
        details = metrics_table(outcome.report)
        if details is not None:
            console.print(details)
        print_run_footer(console, outcome.eval_run, outcome.report)
        if tally is not None:
            for line in judge_lines(store_judge_summary(outcome.eval_run.id, tally)):
                console.print(line)
        console.print(
            f"source eval run {source.id}; compare in the portal: /compare/?a={source.id}&b={outcome.eval_run.id}"
        )


def _rebind_agents_functions(specs: list[Any], folder: str) -> list[Any]:
    """The stored specs with predicates declared in the run's agents folder rebuilt from that folder.

    Raises:
        UsageError: The folder is gone or no longer defines a function the run was scored with.
    """
    if not folder:
        return specs
    try:
        return rebind_agents_scorer_specs(specs, folder)
    except FileNotFoundError:
        raise UsageError(
            f"the run's scorers use functions from the agents folder {folder}, which is not there any more; "
            "pass --agents-dir DIR (the folder now) or --scorer SPEC"
        ) from None
    except LookupError as exc:
        raise UsageError(f"{exc}; pass --agents-dir DIR or --scorer SPEC") from None
