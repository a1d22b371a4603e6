"""``evalsite rejudge EVAL_RUN_ID (--only unstable|missing|errored ... | --judge SPEC)``: ask the
judge again, into a new eval run linked to the source (both kept; see :mod:`apps.evals.runs.rejudge`)."""

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
    open_existing_database,
    print_run_footer,
    report_table,
)
from apps.evals.cli.error_reasons import ErrorReasons
from apps.evals.cli.judging import JudgeTally, judge_lines, judge_setup, store_judge_summary
from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.results.writer import StorageError
from apps.evals.runs.config import RunConfig
from apps.evals.runs.execution import RescoreRefused, rescore_eval_run, rescore_scorers
from apps.evals.runs.rejudge import (
    ONLY_CHOICES,
    RejudgeRefused,
    judge_from_spec,
    resolve_judge_spec,
    reusing_judge,
    select_cases,
    stored_judge_spec,
)
from evalcore.judge import RubricJudge
from evalcore.scorers.base import ScorerSpecError
from evalcore.scoring import DEFAULT_SCORER_TIMEOUT_S
from evalcore.typed_numbers import ascii_integer


class Command(BaseCommand):
    help = (
        "Ask the judge again about a stored eval run (only unstable/missing/errored cases, or with another judge spec)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("eval_run_id")
        parser.add_argument(
            "--only",
            action="append",
            default=[],
            choices=ONLY_CHOICES,
            help="re-ask only these cases (repeatable); the others keep their source verdict",
        )
        parser.add_argument(
            "--judge",
            metavar="SPEC",
            help="judge every case with this spec: NAME@vN (aligned judge) or FILE.json",
        )
        parser.add_argument("--judge-model", help="judge model name (default: the spec's, or $EVALSITE_JUDGE_MODEL)")
        parser.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the judge")
        parser.add_argument("--no-judge-cache", action="store_true", help="do not read or write the judge cache")
        parser.add_argument(
            "--concurrency",
            type=ascii_integer,
            default=None,
            help=f"scorings at once (default {RunConfig().concurrency})",
        )
        add_scorer_timeout_argument(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        open_existing_database()
        try:
            self._handle(**opts)
        except StorageError as exc:
            raise StorageFailure(f"results could not be stored: {exc}") from None
        except (RejudgeRefused, RescoreRefused, ScorerSpecError) as exc:
            raise UsageError(str(exc)) from None

    def _handle(self, **opts: Any) -> None:
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
        check_scorer_timeout(opts)
        source = EvalRun.objects.filter(pk=opts["eval_run_id"]).first()
        if source is None:
            raise UsageError(f"no eval run {opts['eval_run_id']!r}")
        if source.status in (EvalRunStatus.QUEUED, EvalRunStatus.RUNNING):
            raise UsageError(
                f"eval run {source.pk} is {source.status} ({source.n_done} of {source.n_total} cases stored): "
                "re-judge it once it has ended"
            )
        if bool(opts["only"]) == bool(opts["judge"]):
            raise UsageError(
                "give --only unstable|missing|errored (re-ask those with the run's own judge) or --judge SPEC "
                "(judge every case with another spec), not both"
                if opts["only"]
                else "nothing to re-ask: give --only unstable|missing|errored or --judge SPEC"
            )
        if opts["judge"]:
            record, label = resolve_judge_spec(opts["judge"])
            inner = judge_from_spec(record, use_cache=not opts["no_judge_cache"])
            chosen = None
        else:
            record, label = stored_judge_spec(source), "the run's own judge"
            inner = judge_from_spec(record, use_cache=False)  # a cached answer would only repeat
            chosen = select_cases(source, opts["only"])
        default_model = inner.judge_model
        setup = judge_setup(
            {
                "judge": True,
                "judge_model": opts["judge_model"] or default_model,
                "judge_base_url": opts["judge_base_url"],
                "judge_samples": inner.samples,
                "judge_retries": inner.retries,
                "judge_no_schema": not inner.use_schema,
                "no_judge_cache": opts["no_judge_cache"],
                "judge_label": "is_correct",
            }
        )
        if opts["judge_model"]:
            inner.judge_model = opts["judge_model"]
        judge: Any = inner if chosen is None else reusing_judge(source, inner, chosen)
        others = (
            [s for s in rescore_scorers(source, [], judge_scorers=[]) if not isinstance(s, RubricJudge)]
            if source.scorer_specs
            else []
        )
        what = f"{len(chosen)} case(s) re-asked ({', '.join(opts['only'])})" if chosen is not None else f"judge {label}"
        console.print(f"rejudge of {source.id}: {what}")
        tally = JudgeTally(variant=source.variant)
        reasons = ErrorReasons()

        def on_result(result: Any) -> None:
            reasons.on_result(result)
            tally.on_result(result)

        outcome = rescore_eval_run(
            source,
            [*others, judge],
            services=setup.services,
            concurrency=opts["concurrency"],
            judge=setup.judge,
            on_result=on_result,
            scorer_timeout_s=opts["scorer_timeout"] or DEFAULT_SCORER_TIMEOUT_S,
        )
        console.print(report_table(outcome.report, title=f"rejudge of {source.id} · {source.target_id}"))
        print_run_footer(console, outcome.eval_run, outcome.report, reasons)
        for line in judge_lines(store_judge_summary(outcome.eval_run.id, tally), outcome.eval_run.id):
            console.print(line)
        console.print(
            f"source eval run {source.id}; compare in the portal: /compare/?a={source.id}&b={outcome.eval_run.id}"
        )
