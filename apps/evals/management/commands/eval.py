"""``evalsite eval AGENTS_DIR --set PATH_OR_NAME ...``: run an eval set against a target.

Exit codes: 0 every gate holds, 1 a gate failed, 2 a usage or input error (with the message;
also a database file that is not a database, and a ``--resume`` of a run another live process is
executing), 3 the results could not be stored (the database was deleted, replaced or failed
during the run; the message says what happened), 130 stopped by Ctrl-C, 143 by SIGTERM.
Whatever a target or a scorer raises (``sys.exit`` included) is that case's error, never the
exit code.

Ctrl-C (or SIGTERM): the first stops the run cleanly (cases in flight are dropped, finished ones stay
stored, the run is marked ``interrupted`` and the ``--resume`` command is printed); the second
exits at once.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from rich.console import Console

from apps.evals.cli.console import (
    StorageFailure,
    UsageError,
    add_queue_arguments,
    add_scorer_timeout_argument,
    ensure_database,
    finite_float,
    load_set,
    metrics_table,
    print_run_footer,
    progress_tally,
    report_table,
    resume_command,
    run_resume_command,
)
from apps.evals.cli.error_reasons import ErrorReasons
from apps.evals.cli.gating import (
    add_ci_arguments,
    check_report_paths,
    conclude,
    parse_cli_gates,
    resolve_baseline_option,
)
from apps.evals.cli.judging import JudgeTally, add_judge_arguments, judge_lines, judge_setup, store_judge_summary
from apps.evals.cli.simulating import add_simulator_arguments, simulator_setup
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.evals.queries.target_cache import cache_counts
from apps.evals.results.writer import StorageError
from apps.evals.runs.config import RunConfig, read_run_config
from apps.evals.runs.execution import execute_eval_run
from apps.evals.runs.liveness import RunBusy, exit_now, mark_stale_runs
from apps.evals.runs.naming import check_name
from apps.evals.runs.options import (
    RESUME_KEEPS,
    RunOptions,
    check_resume_keeps,
    held_out_notice,
    new_run_config,
    new_run_split,
    on_queue,
    refuse_another_judge,
    refuse_another_simulator,
    resume_changes,
    unchecked_rubric_notice,
)
from apps.evals.runs.prepare import (
    TargetChoiceError,
    check_gate_metrics,
    choose_target,
    prepare_eval_run,
    with_case_scorers,
)
from evalcore.discovery import TargetSpec, UnknownVariantError, discover_targets
from evalcore.errors import InvalidInputError
from evalcore.gates import GateError
from evalcore.interrupts import stopping_signal, two_stage_ctrl_c
from evalcore.loaders import parse_mapping
from evalcore.scorer_registry import resolve_scorers
from evalcore.scorers.base import ScorerServices, ScorerSpecError
from evalcore.simulator import LLMUser
from evalcore.splits import HeldOutError
from evalcore.typed_numbers import ascii_integer

DEFAULTS = RunConfig()
"""Every run parameter's default, for the options' help."""


@contextmanager
def usage_errors() -> Iterator[None]:
    """A refused option or input (:class:`~evalcore.errors.InvalidInputError`) becomes the usage
    error the command exits 2 with."""
    try:
        yield
    except InvalidInputError as exc:
        raise UsageError(str(exc)) from None


def announce_self_exit(eval_run: Any) -> Callable[[str], None]:
    """What the CLI says on stderr when a target ends the process with ``os._exit`` during
    ``eval_run`` (the process ends right after): the reason recorded on the run and the command
    that finishes it."""

    def announce(reason: str) -> None:
        command = run_resume_command(eval_run)
        # straight to the file descriptors: while the progress bar is live, sys.stdout and
        # sys.stderr are rich's proxies, which drop the cursor code and wrap the command
        if os.isatty(1):
            os.write(1, b"\x1b[?25h\n")  # the bar hid the cursor; the process ends before rich shows it
        message = (
            f"evalsite: eval run {eval_run.id} {reason}.\n"
            "  The finished cases are stored. To finish the run (the case whose target ended the process "
            f"is stored as errored; the cases without a result run):\n  {command}\n"
        )
        os.write(2, message.encode("utf-8", "replace"))

    return announce


class Command(BaseCommand):
    help = "Run an eval set against a target from an agents folder; print the aggregate table."
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # argparse errors (missing --set, bad --split) exit 2 with the usage, as documented
        parser.called_from_command_line = True
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agents_dir", help="folder of Python modules declaring targets")
        parser.add_argument("--set", dest="eval_set", help="case-bank file or imported set name (required)")
        parser.add_argument(
            "--resume",
            metavar="EVAL_RUN_ID",
            help="finish an interrupted or failed eval run: only its cases without a result are run",
        )
        parser.add_argument(
            "--target", help="target id (default: the only target, or the one whose default_set matches)"
        )
        parser.add_argument("--variant", help="variant label (a declared variant, or a free A/B label)")
        parser.add_argument(
            "--name", help="the run's name in the portal and reports (default: set · target/variant · split · #n)"
        )
        parser.add_argument("--split", default=None, choices=["train", "dev", "test", "all"], help="default: dev")
        parser.add_argument("--allow-test", action="store_true", help="allow running the held-out test split")
        parser.add_argument("--gate", action="append", default=[], help="e.g. pass_rate>=0.8 (repeatable)")
        parser.add_argument(
            "--concurrency", type=ascii_integer, default=None, help=f"cases at once (default {DEFAULTS.concurrency})"
        )
        parser.add_argument(
            "--timeout",
            type=finite_float,
            default=None,
            help=f"per-case timeout in seconds (default {DEFAULTS.timeout_s:g}); per turn for a conversation case",
        )
        parser.add_argument(
            "--conversation-timeout",
            type=finite_float,
            default=None,
            help="limit on a whole conversation case in seconds (default: none)",
        )
        add_scorer_timeout_argument(parser)
        parser.add_argument(
            "--repeat", type=ascii_integer, default=None, help=f"runs of each case (default {DEFAULTS.repeat})"
        )
        parser.add_argument(
            "--scorer", action="append", default=[], help="scorer spec, e.g. numeric_match:tolerance=0.01"
        )
        parser.add_argument("--map", dest="mapping", help="field mapping, e.g. input=question,expected=answer")
        parser.add_argument("--auto-id", action="store_true", help="derive missing case ids from content")
        add_ci_arguments(parser)  # --json, --junit, --summary-md, --portal-url, --baseline
        parser.add_argument("--quiet", action="store_true", help="no progress bar")
        cache = parser.add_mutually_exclusive_group()
        cache.add_argument(
            "--cache-target",
            action="store_true",
            help="answer cases from the target response cache when nothing they depend on changed, and store "
            "new answers in it (default: $EVALSITE_CACHE_TARGET, off)",
        )
        cache.add_argument(
            "--no-cache",
            action="store_true",
            help="read and write no cache in this run: the target's, the judge's and the simulated user's",
        )
        add_judge_arguments(parser)
        add_simulator_arguments(parser)
        add_queue_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        from django.db import DatabaseError

        try:
            self._handle(**opts)
        except StorageError as exc:
            raise StorageFailure(f"results could not be stored: {exc}") from None
        except DatabaseError as exc:
            raise StorageFailure(f"database error during the run: {type(exc).__name__}: {exc}") from None

    def _handle(self, **opts: Any) -> None:
        # emoji=False: a set, case or target name with ":word:" in it is printed as written (and
        # rich's 3,600-entry emoji table is never loaded: start-up time, issue 30)
        console = Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 150)
        gates = parse_cli_gates(opts["gate"], opts["baseline"])
        check_report_paths(opts)
        if opts["no_cache"]:  # every cache off: the judge's, and the simulator's when one is given
            opts["no_judge_cache"] = True
            opts["no_simulator_cache"] = bool(opts.get("simulator_model"))
        opts["_simulator"] = simulator_setup(opts)  # stored with a new run; a resume checks it
        options = RunOptions(
            concurrency=opts["concurrency"],
            timeout_s=opts["timeout"],
            scorer_timeout_s=opts["scorer_timeout"],
            conversation_timeout_s=opts["conversation_timeout"],
            repeat=opts["repeat"],
            executor=opts["executor"],
            shard_size=opts["shard_size"],
            judge=bool(opts["judge"]),
            cache_target=True if opts["cache_target"] else (False if opts["no_cache"] else None),
        )
        with usage_errors():
            options.check()
        if opts["resume"]:
            eval_run, spec, scorers, judge = self._prepare_resume(opts, options, console)
            eval_set = eval_run.eval_set
            self._check_gate_metrics(gates, scorers)
        else:
            eval_run, spec, scorers, judge = self._prepare_new(opts, options, gates, console)
            eval_set = eval_run.eval_set

        tally = JudgeTally(judge.label, variant=eval_run.variant) if judge.scorers else None
        reasons = ErrorReasons()
        hint = resume_command(opts["agents_dir"], eval_run.id, read_run_config(eval_run.config).judge)

        def force() -> None:  # the second Ctrl-C: no waiting for anything
            os.write(2, f"\nsecond Ctrl-C: exiting now; finish the run later with: {hint}\n".encode())
            # not os._exit: that one is counted against the case in flight
            exit_now(128 + (stopping_signal() or signal.SIGINT))

        notice = "\nCtrl-C: stopping after storing the finished cases (Ctrl-C again to exit at once)\n"
        # this process runs one eval and exits: what it has built so far (modules, Django, the
        # target) lives to the end, so the cyclic GC need not walk it again on every collection
        # of the run (a third of a no-op run's time went there)
        gc.freeze()
        with two_stage_ctrl_c(force=force, notice=notice):
            try:
                outcome = self._run_with_progress(
                    eval_run,
                    spec,
                    console,
                    quiet=opts["quiet"],
                    scorers=scorers,
                    services=judge.services,
                    user_simulator=opts["_simulator"].user,  # None: the run's own, if any
                    tally=tally,
                    reasons=reasons,
                    resume=bool(opts["resume"]),
                )
            except KeyboardInterrupt:
                self._interrupted(eval_run, hint, console)
            self._finish(outcome, eval_set, spec, gates, tally, opts, console, reasons=reasons)

    @staticmethod
    def _interrupted(eval_run: Any, hint: str, console: Console) -> None:
        """After a clean stop: say what was kept and how to finish; exit 130 (Ctrl-C) or 143 (SIGTERM)."""
        eval_run.refresh_from_db()
        done = EvalResult.objects.filter(eval_run=eval_run).count()
        console.print(
            f"[yellow]interrupted:[/] eval run [bold]{eval_run.id}[/] is {eval_run.status}; "
            f"{done} of {eval_run.n_total} case(s) stored"
        )
        console.print(f"finish it with: {hint}")
        sys.stdout.flush()
        raise SystemExit(128 + (stopping_signal() or signal.SIGINT))

    def _prepare_new(
        self, opts: dict[str, Any], options: RunOptions, gates: list[Any], console: Console
    ) -> tuple[Any, Any, Any, Any]:
        """Validate every option, import the set, create the eval run (nothing runs yet)."""
        if not opts["eval_set"]:
            raise UsageError("--set PATH_OR_NAME is required (or --resume EVAL_RUN_ID)")
        mapping = self._parse_mapping(opts["mapping"])
        spec = self._pick_target(opts["agents_dir"], opts["target"], opts["eval_set"], console)
        # every option is checked before anything is imported or run
        judge = judge_setup(opts)
        try:
            scorers = resolve_scorers(opts["scorer"] or list(spec.scorers)) + judge.scorers
            _, variant_label = spec.resolve(opts["variant"])
        except (UnknownVariantError, ScorerSpecError, TypeError) as exc:
            raise UsageError(str(exc)) from None
        self._check_gate_metrics(gates, scorers)
        try:
            name = check_name(opts["name"]) if opts["name"] is not None else None
        except InvalidInputError as exc:
            raise UsageError(f"--name: {exc}") from None
        with usage_errors():
            split = new_run_split(opts["split"], opts["allow_test"])
            config = new_run_config(options, judge=judge.judge, simulator=opts["_simulator"].config)
        ensure_database()
        mark_stale_runs(force=True)
        eval_set, summary = load_set(opts["eval_set"], mapping=mapping, auto_id=opts["auto_id"])
        opts["_baseline"] = resolve_baseline_option(opts["baseline"], eval_set=eval_set, target_id=spec.id, split=split)
        scorers = with_case_scorers(scorers, eval_set)  # the cases' own checks (a promptfoo import)
        if summary is not None:
            counts = " / ".join(f"{k} {v}" for k, v in summary.split_counts.items())
            console.print(f"eval set [bold]{eval_set.name}[/]: {sum(summary.split_counts.values())} cases ({counts})")
        notice = held_out_notice(eval_set, split, target_id=spec.id, variant=variant_label)
        if notice is not None:
            console.print(f"[yellow]{notice}[/]")
        unchecked = unchecked_rubric_notice(eval_set, split, scorers)
        if unchecked is not None:
            console.print(f"[yellow]{unchecked}[/]", markup=True)
        try:
            eval_run = prepare_eval_run(
                eval_set=eval_set,
                spec=spec,
                variant=opts["variant"],
                split=split,
                allow_test=opts["allow_test"],
                scorers=scorers,
                config=config,
                status=EvalRunStatus.RUNNING,
                name=name,
            )
        except HeldOutError as exc:
            raise UsageError(str(exc)) from None
        except (UnknownVariantError, ScorerSpecError, ValueError, TypeError) as exc:
            raise UsageError(str(exc)) from None
        return eval_run, spec, scorers, judge

    def _prepare_resume(self, opts: dict[str, Any], options: RunOptions, console: Console) -> tuple[Any, Any, Any, Any]:
        """The interrupted eval run to finish, with its own target, variant, split and scorers."""
        from apps.evals.runs.resume import ResumeRefused, check_resumable, claim_resume  # a resume's own code

        ensure_database()
        mark_stale_runs(force=True)
        eval_run = EvalRun.objects.select_related("eval_set").filter(pk=opts["resume"]).first()
        if eval_run is None:
            raise UsageError(f"--resume {opts['resume']!r}: no such eval run")
        judge = judge_setup(opts)
        with usage_errors():
            check_resume_keeps(eval_run, {k: opts[k] for k in RESUME_KEEPS}, target=opts["target"])
            refuse_another_judge(eval_run, judge.judge if judge.scorers else None)
            refuse_another_simulator(eval_run, opts["_simulator"].config)
            changes = resume_changes(eval_run, options)
        try:
            check_resumable(eval_run, judge_available=bool(judge.scorers))
            opts["_baseline"] = resolve_baseline_option(opts["baseline"], run=eval_run)  # before it started
            spec = self._pick_target(opts["agents_dir"], eval_run.target_id, eval_run.eval_set.name, console)
            plan = claim_resume(eval_run, spec, judge_scorers=judge.scorers, config=changes)
        except (RunBusy, ResumeRefused) as exc:
            raise UsageError(f"--resume {eval_run.id}: {exc}") from None
        except (UnknownVariantError, ScorerSpecError, TypeError, LookupError) as exc:
            raise UsageError(str(exc)) from None
        console.print(f"resuming eval run [bold]{eval_run.id}[/]: {plan.done} case(s) already done are kept")
        return plan.eval_run, plan.spec, plan.scorers, judge

    def _finish(
        self,
        outcome: Any,
        eval_set: Any,
        spec: TargetSpec,
        gates: list[Any],
        tally: Any,
        opts: dict[str, Any],
        console: Console,
        *,
        reasons: ErrorReasons | None = None,
    ) -> None:
        """Print the tables, write the reports, check the gates (exit code 1 when one fails)."""
        eval_run = outcome.eval_run
        report = outcome.report
        console.print(
            report_table(
                report, title=f"{eval_set.name} · {spec.id}" + (f" · {eval_run.variant}" if eval_run.variant else "")
            )
        )
        details = metrics_table(report)
        if details is not None:
            console.print(details)
        print_run_footer(console, outcome.eval_run, report, reasons)
        cached = cache_counts(eval_run.id).sentence()
        if cached is not None:
            console.print(cached, markup=False)
        if tally is not None:
            for line in judge_lines(store_judge_summary(outcome.eval_run.id, tally), outcome.eval_run.id):
                console.print(line)
        files = {k: opts[k] for k in ("json_path", "junit_path", "summary_md", "portal_url")}
        conclusion = conclude(eval_run, report, gates, opts.get("_baseline"), **files)
        for line in conclusion.lines:  # the baseline comparison, its flips, then each gate
            console.print(line)
        sys.stdout.flush()
        if conclusion.failed:
            raise SystemExit(1)

    # -- steps (small, so tests can call them) -------------------------------------------------

    @staticmethod
    def _check_gate_metrics(gates: list[Any], scorers: list[Any]) -> None:
        try:
            check_gate_metrics(gates, scorers)
        except GateError as exc:
            raise UsageError(str(exc)) from None

    @staticmethod
    def _parse_mapping(text: str | None) -> dict[str, str] | None:
        if not text:
            return None
        try:
            return parse_mapping(text)
        except ValueError as exc:
            raise UsageError(f"--map: {exc}") from None

    @staticmethod
    def _pick_target(agents_dir: str, target_id: str | None, set_arg: str, console: Console) -> TargetSpec:
        try:
            discovery = discover_targets(agents_dir)
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from None
        for problem in discovery.problems:
            console.print(f"[yellow]warning: {problem.path}: {problem.message}[/]")
        try:
            return choose_target(discovery.targets, target_id, set_arg, agents_dir=agents_dir)
        except TargetChoiceError as exc:
            raise UsageError(str(exc)) from None

    @staticmethod
    def _run_with_progress(
        eval_run: Any,
        spec: TargetSpec,
        console: Console,
        *,
        quiet: bool,
        scorers: list[Any],
        services: ScorerServices,
        user_simulator: LLMUser | None = None,
        tally: Any = None,
        reasons: ErrorReasons | None = None,
        resume: bool = False,
    ) -> Any:
        if on_queue(eval_run):  # --executor queue (or the resume of a sharded run): the workers run it
            from apps.evals.cli.queued import run_on_queue  # here: a run in this process never loads it

            return run_on_queue(eval_run, console, quiet=quiet, resume=resume)

        def execute(on_result: Callable[[Any], None]) -> Any:
            return execute_eval_run(
                eval_run,
                spec,
                on_result=on_result,
                scorers=scorers,
                services=services,
                resume=resume,
                on_self_exit=announce_self_exit(eval_run),
                user_simulator=user_simulator,
            )

        if quiet or (not console.is_terminal and not sys.stdout.isatty()):
            # no live bar when piped: a start line and the final count, nothing per refresh
            total = eval_run.n_total - (eval_run.results.count() if resume else 0)
            done = {"n": 0}
            if not quiet:
                console.print(f"  running {total} case(s)…")

            def on_result(result: Any) -> None:
                if tally is not None:
                    tally.on_result(result)
                if reasons is not None:
                    reasons.on_result(result)
                done["n"] += 1
                if not quiet and done["n"] == total:
                    console.print(f"  {done['n']}/{total} cases")

            return execute(on_result)
        # imported here: a quiet or piped run draws no bar (start-up time)
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        # fits 80 columns: a short bar, the tally naming only the outcomes that occurred, and the
        # elapsed time only on wide terminals
        columns = [
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=16),
            MofNCompleteColumn(),
            TextColumn("{task.fields[tally]}"),
            *([TimeElapsedColumn()] if console.width >= 100 else []),
            TimeRemainingColumn(),
        ]
        with Progress(*columns, console=console, transient=True) as progress:
            counts = {"passed": 0, "failed": 0, "errored": 0, "unscored": 0}
            remaining = eval_run.n_total - (eval_run.results.count() if resume else 0)
            task = progress.add_task(f"{spec.id} {eval_run.variant}".strip(), total=remaining, tally="")

            def on_result(result: Any) -> None:
                if tally is not None:
                    tally.on_result(result)
                if reasons is not None:
                    reasons.on_result(result)
                counts[result.status.value] += 1
                progress.update(task, advance=1, tally=progress_tally(counts))

            return execute(on_result)
