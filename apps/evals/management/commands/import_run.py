"""``evalsite import-run LOG... [--set NAME] [--add-cases]``: Inspect logs in as finished eval runs.

Each ``.eval`` / ``.json`` log becomes one run of a set (default: the log's dataset name), its
samples matched to the set's cases by id (:mod:`apps.evals.runs.inspect_import`), each log in one
transaction. The same file imported again into the same set is a no-op, and says so.

Every log is read and checked (header and every sample) before any is imported, so the outcome
does not depend on the order of the files: the logs that read are imported, each failure is
reported on its own line (``error: FILE[:MEMBER]: field ...: reason``), and the exit code is 2
when any log failed (0 when all were imported).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.evals.cli.console import UsageError, ensure_database
from apps.evals.runs.inspect_import import InspectImport, import_inspect_log
from evalcore.errors import EvalsiteError
from evalcore.loaders import CaseBankError
from evalcore.loaders.inspect_log import read_inspect_log

_STATUSES = ("passed", "failed", "errored", "unscored")


def _check(path: str) -> str:
    """Why the log at ``path`` cannot be imported (``""``: its header and every sample read)."""
    if not Path(path).exists():
        return f"{path}: no such file"
    try:
        for _ in read_inspect_log(path).samples():
            pass
    except CaseBankError as exc:
        return str(exc)
    except RecursionError:
        return f"{path}: nested too deeply to read"
    return ""


class Command(BaseCommand):
    help = (
        "Import Inspect eval logs (.eval / .json) as finished eval runs of a set: samples matched to the "
        "set's cases by id, scores, model, usage, timings and each sample's messages as its trace."
    )
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):  # type: ignore[no-untyped-def]
        parser = super().create_parser(prog_name, "import-run", **kwargs)
        parser.called_from_command_line = True
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("logs", nargs="+", metavar="LOG", help="Inspect log files (.eval or .json)")
        parser.add_argument(
            "--set",
            dest="set_name",
            help="the eval set the log was run on (default: the log's dataset name, else its task name)",
        )
        parser.add_argument(
            "--add-cases",
            action="store_true",
            help="add the log's samples the set lacks as cases (creating the set if needed): a new set version",
        )
        parser.add_argument("--target", dest="target_id", help="target id of the run (default: inspect:TASK)")
        parser.add_argument("--variant", help="variant of the run (default: the log's model)")

    def handle(self, *args: Any, **opts: Any) -> None:
        ensure_database()
        failures: list[str] = []
        readable: list[str] = []
        for path in opts["logs"]:  # every file read and checked first: no order dependence
            problem = _check(path)
            if problem:
                failures.append(problem)
            else:
                readable.append(path)
        for path in readable:
            try:
                done = import_inspect_log(
                    path,
                    set_name=opts["set_name"],
                    add_cases=opts["add_cases"],
                    target_id=opts["target_id"],
                    variant=opts["variant"],
                )
            except (CaseBankError, EvalsiteError) as exc:
                failures.append(str(exc))
                continue
            self._print(path, done)
        if not failures:
            return
        for line in failures[:-1]:
            self.stderr.write(f"error: {line}")
        total = len(opts["logs"])
        summary = f" ({len(failures)} of {total} logs not imported)" if total > 1 else ""
        raise UsageError(failures[-1] + summary)

    def _print(self, path: str, done: InspectImport) -> None:
        run = done.eval_run
        spec = done.log.spec
        where = f"run {run.pk} on set {run.eval_set.name!r}"
        if not done.created:
            self.stdout.write(
                f"{path}: already imported as {where} (same file, SHA-256 {done.log.sha256[:12]}…); nothing written"
            )
            return
        counts = ", ".join(f"{done.statuses.get(s, 0)} {s}" for s in _STATUSES)
        inspect = f"inspect_ai {spec.inspect_version}, " if spec.inspect_version else ""
        self.stdout.write(
            f"{path} ({inspect}task {spec.task}, model {spec.model}, {spec.epochs} epoch(s)) -> {where}: "
            f"{run.n_done} results ({counts}); {run.status}"
        )
        if done.cases_added:
            made = "made from" if done.set_created else "extended with"
            self.stdout.write(f"  set {run.eval_set.name!r} {made} {done.cases_added} sample(s) of the log")
        if done.matched_by_input:
            self.stdout.write(f"  {done.matched_by_input} sample(s) matched to a case of another id by their input")
        if done.input_differs:
            shown = ", ".join(done.input_differs[:10])
            self.stderr.write(
                f"  warning: {len(done.input_differs)} sample(s) have another input than their case "
                f"(matched by id; the set changed since?): {shown}"
            )
        if done.target_differs:
            shown = ", ".join(done.target_differs[:10])
            more = f" and {len(done.target_differs) - 10} more" if len(done.target_differs) > 10 else ""
            self.stderr.write(
                f"  note: {len(done.target_differs)} sample(s) were scored by Inspect against another target than "
                f"their case's expected value in the set (the results keep the log's target): {shown}{more}"
            )
        if run.error:
            self.stderr.write(f"  the Inspect eval did not succeed: {run.error}")
