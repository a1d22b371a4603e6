"""Shared pieces of the CLI commands: database readiness, set loading, rich tables."""

from __future__ import annotations

import argparse
import importlib
import math
import os
import pkgutil
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser
from django.db import connection
from rich.console import Console
from rich.table import Table

from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries.costs import cost_latency
from apps.evals.runs.config import JudgeConfig, read_run_config
from apps.evals.runs.options import judge_flags
from apps.evals.sets.cases import ImportSummary
from apps.evals.sets.file_import import import_case_file
from evalcore.gates import GateResult
from evalcore.loaders import CaseBankError
from evalcore.report import EvalReport, MetricSummary
from evalcore.scoring import DEFAULT_SCORER_TIMEOUT_S
from evalcore.stats import TOO_FEW_CASES
from evalcore.typed_numbers import ascii_integer, ascii_number


class UsageError(CommandError):
    """A usage or input error: exit code 2 with the message."""

    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=2)


class StorageFailure(CommandError):
    """Results could not be stored (database deleted, replaced or failing): exit code 3."""

    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=3)


def database_label() -> str:
    """The default database as a user knows it: the SQLite path, or the PostgreSQL name."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    return str(db.get("NAME") or "") if db["ENGINE"].endswith("sqlite3") else f"database {db.get('NAME')!r}"


def check_database() -> None:
    """Open the default database and read its schema table once.

    Raises:
        UsageError: The file is not a database, cannot be opened or read, or has damaged pages
            (``apps.evals.cli.dbcheck``): one line naming the path and SQLite's reason; exit code 2.
    """
    from django.db import DatabaseError

    from apps.evals.cli.dbcheck import damage, damage_message

    try:
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute("SELECT count(*) FROM sqlite_master")
            else:
                cursor.execute("SELECT 1")
    except DatabaseError as exc:
        connection.close()
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{database_label()}: cannot use this database ({reason})") from None
    name = str(connection.settings_dict.get("NAME") or "")
    if connection.vendor == "sqlite" and name and name != ":memory:" and not name.startswith("file:"):
        problem = damage(name)  # PRAGMA quick_check, once per file and process, time-bounded
        if problem is not None:
            connection.close()
            raise UsageError(damage_message(name, problem))


def open_existing_database() -> None:
    """For a command that reads stored runs (``trace``, ``export``, ``export-traces``,
    ``rescore``): a SQLite file that does not exist is an error naming it (the command would
    otherwise create an empty file and fail on a missing table); an existing one is checked and
    brought up to date as :func:`ensure_database` does.

    Raises:
        UsageError: No such database file, or not a usable database (exit code 2).
    """
    from django.conf import settings

    db = settings.DATABASES["default"]
    name = str(db.get("NAME") or "")
    if db["ENGINE"].endswith("sqlite3") and name and name != ":memory:" and not name.startswith("file:"):
        if not Path(name).is_file():
            raise UsageError(
                f"{name}: no such database (nothing stored there yet; give the database with --db, "
                "or run `evalsite eval` first)"
            )
    ensure_database()


def ensure_database() -> None:
    """Check the database, create the SQLite folder and apply pending migrations (quietly).

    A first run just works, also when several processes start at once on a database that does
    not exist yet: the migration is serialised by a lock (an ``fcntl`` lock on ``<db>.lock``
    beside the SQLite file; a transaction-level advisory lock on PostgreSQL). A new SQLite file
    is a copy of the migrated template of this exact set of migrations when one exists
    (:mod:`apps.evals.cli.schema_template`), and becomes that template otherwise.

    Raises:
        UsageError: The database file is not a database or cannot be opened (exit code 2).
    """
    from django.conf import settings

    name = settings.DATABASES["default"].get("NAME")
    sqlite = settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
    from apps.evals.cli import schema_template

    if sqlite and name and str(name) != ":memory:":
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        if not str(name).startswith("file:") and schema_template.is_new(str(name)):
            connection.close()
            with migration_lock():
                # another process may have made it meanwhile; else a copy of the template, or
                # migrated here (under the lock: nobody replaces the file meanwhile) to become it
                if schema_template.is_new(str(name)) and not schema_template.copy_template(str(name)):
                    check_database()
                    call_command("migrate", verbosity=0, interactive=False)
                    connection.close()  # the template is read from the file: everything committed
                    schema_template.save_template(str(name))
    check_database()
    if not pending_migrations():
        return
    with migration_lock():
        if pending_migrations():  # another process may have migrated while we waited
            call_command("migrate", verbosity=0, interactive=False)


def pending_migrations() -> int:
    """How many migrations are not applied to the default database yet."""
    if _every_migration_file_applied():
        return 0  # the common case, told without loading every migration module
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def _every_migration_file_applied() -> bool:
    """Whether every migration file of every installed app is recorded as applied (then none
    is pending). Reads file names and the ``django_migrations`` table only, with plain SQL:
    neither Django's migration machinery nor a migration module is imported (start-up time of
    every command, issue 30). Any doubt (an unrecorded name, no table) says no."""
    from django.apps import apps

    from apps.evals.cli.schema_template import migrations_module_name

    with connection.cursor() as cursor:
        if "django_migrations" not in connection.introspection.table_names(cursor):
            return False
        cursor.execute("SELECT app, name FROM django_migrations")
        applied = {(str(app), str(name)) for app, name in cursor.fetchall()}
    for config in apps.get_app_configs():
        module_name = migrations_module_name(config.label, config.name)
        if module_name is None:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        for _, name, is_package in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if not is_package and name[0] not in "_~" and (config.label, name) not in applied:
                return False
    return True


@contextmanager
def migration_lock() -> Iterator[None]:
    """Hold the first-use migration lock of the default database (see :func:`ensure_database`)."""
    from django.conf import settings

    name = str(settings.DATABASES["default"].get("NAME") or "")
    if connection.vendor == "sqlite" and name and name != ":memory:" and not name.startswith("file:"):
        import fcntl

        with open(f"{name}.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    elif connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [_PG_MIGRATION_LOCK])
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [_PG_MIGRATION_LOCK])
    else:
        yield


_PG_MIGRATION_LOCK = 0x65_76_61_6C  # "eval": the key of Evalsite's first-use migration lock


def load_set(
    path_or_name: str,
    *,
    mapping: dict[str, str] | None,
    auto_id: bool,
    name: str | None = None,
    prune_captured: bool = False,
    split_aliases: dict[str, str] | None = None,
    keep_edited: bool = False,
) -> tuple[EvalSet, ImportSummary | None]:
    """An eval set from a case-bank file (imported, one transaction) or by name from the DB.

    Cases captured in the portal are kept across re-imports unless ``prune_captured``.
    ``split_aliases`` maps the file's split names to evalsite's (``{"validate": "test"}``).

    Raises:
        UsageError: Unknown set name, or a case-bank error (file, line and field named).
    """
    path = Path(path_or_name)
    if path.name.endswith("test_config.json"):
        raise UsageError(
            f"{path}: an ADK test_config.json holds evaluation criteria, not cases; "
            "import the .test.json / .evalset.json files beside it"
        )
    if path.exists():
        try:
            # a new set, or the same file again, is streamed: memory flat for a file of any size
            summary = import_case_file(
                str(path),
                mapping=mapping,
                auto_id=auto_id,
                set_name=name,
                prune_captured=prune_captured,
                split_aliases=split_aliases,
                keep_edited=keep_edited,
            )
        except CaseBankError as exc:
            raise UsageError(str(exc)) from None
        except ValueError as exc:  # e.g. the ADK loader's format error
            raise UsageError(f"{path}: {exc}") from None
        return summary.eval_set, summary
    try:
        return EvalSet.objects.get(name=path_or_name), None
    except EvalSet.DoesNotExist:
        known = ", ".join(EvalSet.objects.values_list("name", flat=True)[:20]) or "none imported yet"
        raise UsageError(
            f"--set {path_or_name!r}: no such file, and no eval set of that name (sets: {known})"
        ) from None


def fmt_metric(metric: MetricSummary) -> str:
    """``0.734 ± 0.012``, and its coverage ``(n=9/10)`` when it leaves cases out.

    A pass/fail score shows its Wilson 95% interval (``1.000 [0.342, 1.000]``), valid at every n;
    another score its standard error from :data:`evalcore.stats.MIN_INTERVAL_CASES` values on,
    and below that ``(too few cases)`` instead of a ``± 0.000`` that would claim a certainty two
    cases cannot give (:class:`evalcore.report.MetricSummary`).

    The ``10`` counts every case of the group, including those whose target errored (they
    were never scored), so a mean over part of the run never looks like a mean over all of it.
    """
    if metric.mean is None:
        text = ", ".join(f"{k}:{v}" for k, v in sorted(metric.labels.items())) or "-"
    else:
        text = f"{metric.mean:.3f}"
        reason = metric.interval_reason
        if metric.interval_method in ("wilson", "wilson_bound") and metric.low is not None and metric.high is not None:
            text += f" [{metric.low:.3f}, {metric.high:.3f}]"
        elif metric.interval_method == "normal" and metric.stderr is not None:
            text += f" ± {metric.stderr:.3f}"
        elif reason is not None:
            text += f" ({TOO_FEW_CASES})" if reason.startswith(TOO_FEW_CASES) else f" ({reason})"
    if not metric.complete:
        text += f" (n={metric.coverage})"
    return text


def report_table(report: EvalReport, *, title: str) -> Table:
    """The aggregate table: one row for all cases, and one per split when there are several
    (a run on one split would show the same numbers twice).

    Only the scorers' main scores are columns here; a scorer's sub-scores (``citation_set.recall``,
    the judge's axes) are listed in :func:`metrics_table`.
    """
    metric_names = [name for name in report.metrics if "." not in name]
    table = Table(title=title, title_justify="left")
    for column in ("split", "n", "passed", "failed", "errored", "unscored", "pass rate", *metric_names):
        table.add_column(column, justify="left" if column == "split" else "right")
    rows: list[tuple[str, Any]] = [("all", report)]
    if len(report.splits) > 1:
        rows += list(report.splits.items())
    for label, group in rows:
        cells = [
            label,
            str(group.n),
            f"[green]{group.passed}[/]",
            f"[red]{group.failed}[/]" if group.failed else "0",
            f"[yellow]{group.errored}[/]" if group.errored else "0",
            f"[magenta]{group.unscored}[/]" if group.unscored else "0",
            f"{group.pass_rate:.1%}",
        ]
        for name in metric_names:
            metric = group.metrics.get(name)
            cells.append(fmt_metric(metric) if metric else "-")
        table.add_row(*cells)
    return table


def metrics_table(report: EvalReport) -> Table | None:
    """Every score (sub-scores included) as rows: mean ± stderr overall and per split.

    ``None`` when every score is already a column of :func:`report_table`.
    """
    if all("." not in name for name in report.metrics):
        return None
    splits = list(report.splits) if len(report.splits) > 1 else []
    table = Table(title="scores", title_justify="left")
    table.add_column("score")
    for column in ("all", *splits):
        table.add_column(column, justify="right")
    for name, metric in report.metrics.items():
        cells = [name, fmt_metric(metric)]
        for split in splits:
            sub = report.splits[split].metrics.get(name)
            cells.append(fmt_metric(sub) if sub else "-")
        table.add_row(*cells)
    return table


def print_run_footer(console: Console, eval_run: EvalRun, report: EvalReport, reasons: Any = None) -> None:
    """The run's one-line footer, then (given an :class:`apps.evals.cli.error_reasons.ErrorReasons`
    fed every result) the most common error reasons and where to see every error."""
    extra = []
    if report.target_errors:
        extra.append(f"{report.target_errors} target error(s)")
    if report.scorer_errors:
        extra.append(f"{report.scorer_errors} scorer error(s)")
    if report.tokens_in or report.tokens_out:
        extra.append(f"tokens in/out {report.tokens_in}/{report.tokens_out}")
    if eval_run.name:  # people's text: no rich markup in it
        console.print(f"run {eval_run.name}", markup=False, highlight=False)
    console.print(
        f"eval run [bold]{eval_run.id}[/]  target {eval_run.target_id}"
        + (f"  variant {eval_run.variant}" if eval_run.variant else "")
        + f"  split {eval_run.split}  {report.elapsed_s:.1f}s"
        + (f"  git {eval_run.git_sha[:10]}{'+dirty' if eval_run.git_dirty else ''}" if eval_run.git_sha else "")
        + ("  " + ", ".join(extra) if extra else "")
    )
    for line in reasons.lines(report, eval_run.id) if reasons is not None else []:
        console.print(line, markup=False)  # a reason is the target's text: no rich markup in it
    costs = cost_latency([eval_run.id]).get(eval_run.id)
    if costs is not None and (costs.n_target_priced or costs.n_judge or costs.n_simulator):
        console.print(costs.cost_line(), markup=False, highlight=False)
        console.print(costs.latency_line(), markup=False, highlight=False)
    for line in verdict_warnings(report):
        console.print(f"[yellow]warning: {line}[/]")


def verdict_warnings(report: EvalReport) -> list[str]:
    """Plain-text warnings about verdicts the table could hide: unscored cases."""
    lines = []
    if report.unscored:
        lines.append(
            f"{report.unscored} of {report.n} case(s) unscored: no scorer gave them a verdict "
            "(no scorer, or only measurements such as a 0..1 score without a threshold); "
            "they count in n and never as passed"
        )
    return lines


def gate_line(result: GateResult) -> str:
    """``gate score:x>=0.5: PASS (actual 0.5, on n=1/2 cases: 1 not covered)`` (rich markup)."""
    shown = "absent" if result.actual is None else f"{result.actual:.4g}"
    mark = "[green]PASS[/]" if result.held else "[red]FAIL[/]"
    note = result.coverage_note
    return f"gate {result.gate.text}: {mark} (actual {shown}" + (f", [yellow]{note}[/]" if note else "") + ")"


def finite_float(text: str) -> float:
    """The argparse ``type=`` of every float option: a finite number (no NaN, no infinity).

    ``float()`` accepts ``nan`` and ``inf``; such a value used to reach the run's stored config,
    which is JSON, and fail there with a database CHECK error (exit 3). Here argparse reports it
    as a usage error naming the option (``argument --timeout: must be a finite number, got
    'nan'``, exit 2). Range checks (e.g. > 0) follow the parse: :func:`check_seconds_options`.

    Raises:
        argparse.ArgumentTypeError: Not a number, or not finite.
    """
    if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return ascii_number(text)  # ASCII digits only: float() also takes "١.٥"


def check_seconds_options(opts: dict[str, Any], *names: str) -> None:
    """Refuse a duration option that is set but not a finite number > 0 (exit 2).

    Checked after parsing as well because ``call_command(..., timeout=...)`` skips argparse.

    Args:
        opts: The parsed options.
        names: Option destinations, e.g. ``"timeout"`` for ``--timeout``.

    Raises:
        UsageError: Naming the option, e.g. ``--timeout must be > 0 seconds (a finite number), got nan``.
    """
    for name in names:
        value = opts.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be > 0 seconds (a finite number), got {value!r}")


def add_queue_arguments(parser: CommandParser) -> None:
    """``--executor {process,queue}`` and ``--shard-size N``."""
    parser.add_argument(
        "--executor",
        choices=["process", "queue"],
        default=None,
        help="process: run here (default); queue: shard the run for the queue's workers (docs/scale.md)",
    )
    parser.add_argument(
        "--shard-size", type=ascii_integer, default=None, help="cases per shard (default EVALSITE_SHARD_SIZE)"
    )


def add_scorer_timeout_argument(parser: CommandParser) -> None:
    """``--scorer-timeout SECONDS`` (shared by ``eval`` and ``rescore``)."""
    parser.add_argument(
        "--scorer-timeout",
        type=finite_float,
        default=None,
        metavar="SECONDS",
        help=(
            f"limit on each scorer call, the judge included (default {DEFAULT_SCORER_TIMEOUT_S:g}); "
            "a timed-out score is an error and the run goes on"
        ),
    )


def check_scorer_timeout(opts: dict[str, Any]) -> None:
    """Refuse a zero, negative or non-finite ``--scorer-timeout`` (exit 2)."""
    check_seconds_options(opts, "scorer_timeout")


_TALLY_STYLES = {"passed": "green", "failed": "red", "errored": "yellow", "unscored": "magenta"}


def progress_tally(counts: dict[str, int]) -> str:
    """The progress bar's tally, e.g. ``[green]14 passed[/] [red]10 failed[/]``.

    Passed and failed always show; errored and unscored only once a case has that status, so the
    line stays within 80 columns in the common case.
    """
    shown = (status for status, count in counts.items() if count or status in ("passed", "failed"))
    return " ".join(f"[{_TALLY_STYLES[status]}]{counts[status]} {status}[/]" for status in shown)


def resume_command(agents_dir: str, eval_run_id: str, judge: JudgeConfig | Mapping[str, Any] | None = None) -> str:
    """The command that finishes ``eval_run_id``, as printed after a stop: with ``--db`` when the
    run is in a SQLite file named by ``--db`` / ``EVALSITE_DB`` (without it the command would
    look in the default database and find no such run), and the run's ``judge`` options (a
    judged run resumes with the same judge only; a mapping is its stored form)."""
    if isinstance(judge, Mapping):
        judge = JudgeConfig.model_validate(judge)
    words = ["evalsite", "eval", agents_dir, "--resume", eval_run_id, *(judge_flags(judge) if judge else [])]
    db = os.environ.get("EVALSITE_DB")
    if db and not os.environ.get("DATABASE_URL"):
        words += ["--db", db]
    return shlex.join(words)


def run_resume_command(eval_run: EvalRun) -> str:
    """:func:`resume_command` for a run, with the agents folder recorded on it."""
    config = read_run_config(eval_run.config)
    return resume_command(config.agents_dir or "AGENTS_DIR", eval_run.id, config.judge)
