"""``evalsite import-run FILE|FOLDER... [--set NAME] [--add-cases]``: other tools' past runs in as
finished eval runs.

Read, with the format found from the content (never the name): Inspect logs (``.eval`` /
``.json``: one run of a set, default the log's dataset name, :mod:`apps.evals.runs.inspect_import`),
promptfoo results files (JSON, JSONL, CSV: one run per provider x prompt), OpenAI Evals exports
(a file, or a folder of the eval, its runs and their output items: one run per eval run) and
Braintrust experiments (one run per experiment), the last three by
:mod:`apps.evals.runs.run_import` into the file's own set unless ``--set`` names one. A folder
that is not one OpenAI Evals export stands for the files in it (a whole history in one command).
Each file is imported in one transaction. The same file imported again into the same set is a
no-op, and says so.

Every file is read and checked before any is imported, so the outcome does not depend on the
order of the files: the files that read are imported, each failure is reported on its own line
(``error: FILE[:MEMBER]: field ...: reason``), and the exit code is 2 when any file failed (0 when
all were imported).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.evals.cli.console import UsageError, ensure_database
from apps.evals.runs.inspect_import import InspectImport, import_inspect_log
from apps.evals.runs.run_import import TOOL_NAMES, PeerImport, import_peer_file
from evalcore.errors import EvalsiteError
from evalcore.loaders import CaseBankError
from evalcore.loaders.inspect_log import is_inspect_log, read_inspect_log
from evalcore.loaders.peer_runs import PeerFile, detect_peer_format, read_peer_runs

_STATUSES = ("passed", "failed", "errored", "unscored")


READ_HERE = (
    "an Inspect log (.eval, or JSON with 'eval' and 'samples'), a promptfoo results file (`promptfoo eval -o`:"
    " JSON with 'results', JSONL or CSV), an OpenAI Evals export (eval / eval.run / output item objects) or a"
    " Braintrust experiment's events"
)
"""What ``import-run`` reads, named in the refusal of any other file."""


def _check(path: str) -> str | PeerFile:
    """The other tool's file read (a :class:`PeerFile`), ``""`` for an Inspect log whose header
    and every sample read, or why the file cannot be imported."""
    if not Path(path).exists():
        return f"{path}: no such file"
    try:
        if detect_peer_format(path) is not None:
            return read_peer_runs(path)
        if Path(path).is_dir():
            return f"{path}: a folder holding no results file read here"
        if not is_inspect_log(path):
            return f"{path}: not a results file import-run reads (by its content): {READ_HERE}"
        for _ in read_inspect_log(path).samples():
            pass
    except CaseBankError as exc:
        return str(exc)
    except RecursionError:
        return f"{path}: nested too deeply to read"
    return ""


def _expand(paths: list[str]) -> tuple[list[str], list[str]]:
    """The files to import, and the files of named folders that are not results (left alone).

    A named folder whose results files are all OpenAI Evals objects is one export (one import);
    any other folder stands for its results files (and the export folders in it), so a whole
    history comes in with one command.
    """
    found: list[str] = []
    ignored: list[str] = []
    for path in paths:
        folder = Path(path)
        if not folder.is_dir() or _is_openai_export(folder):
            found.append(path)
            continue
        for member in sorted(p for p in folder.iterdir() if not p.name.startswith(".")):
            if member.is_dir():
                (found if _is_openai_export(member) else ignored).append(str(member))
            elif detect_peer_format(member) is not None or is_inspect_log(member):
                found.append(str(member))
            else:
                ignored.append(str(member))
    return found, ignored


def _is_openai_export(folder: Path) -> bool:
    """A folder whose ``.json`` / ``.jsonl`` files are all OpenAI Evals objects (one export)."""
    files = [p for p in folder.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl")]
    return bool(files) and all(detect_peer_format(p) == "openai_evals" for p in files)


class Command(BaseCommand):
    help = (
        "Import other tools' past runs as finished eval runs of a set: Inspect logs (.eval / .json), promptfoo "
        "results (JSON, JSONL, CSV), OpenAI Evals exports (a file or folder) and Braintrust experiments; the "
        "format is found from the content. Cases matched to the set's by id or input, the tool's scores kept "
        "with their specs, provenance recorded; the same file imported twice adds nothing."
    )
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):  # type: ignore[no-untyped-def]
        parser = super().create_parser(prog_name, "import-run", **kwargs)
        parser.called_from_command_line = True
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "logs",
            nargs="+",
            metavar="FILE",
            help="Inspect logs, promptfoo results, OpenAI Evals exports (file or folder), Braintrust experiments; "
            "a folder stands for its files",
        )
        parser.add_argument(
            "--set",
            dest="set_name",
            help="the eval set the runs were made on (default: the file's own: an Inspect log's dataset, else its "
            "task; promptfoo's description; the OpenAI eval's name; the Braintrust experiment's name, created if "
            "missing)",
        )
        parser.add_argument(
            "--add-cases",
            action="store_true",
            help="add the file's cases the set lacks (creating the set if needed): a new set version; without it, "
            "cases missing from a set named by --set are skipped (other tools) or refused (Inspect)",
        )
        parser.add_argument(
            "--target", dest="target_id", help="target id of the runs (default: inspect:TASK, promptfoo:PROVIDER...)"
        )
        parser.add_argument("--variant", help="variant of the runs (default: the model, or the prompt label)")
        parser.add_argument(
            "--pass-threshold",
            type=float,
            help="a verdict for scores that carry none (Braintrust's): at or above passes (default: none, the "
            "scores stay measurements and the cases unscored)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        ensure_database()
        failures: list[str] = []
        readable: list[tuple[str, PeerFile | None]] = []
        paths, ignored = _expand(opts["logs"])
        if ignored:
            self.stdout.write(
                f"left alone ({len(ignored)}, not results files): "
                + ", ".join(Path(p).name for p in ignored[:10])
                + (f" and {len(ignored) - 10} more" if len(ignored) > 10 else "")
            )
        for path in paths:  # every file read and checked first: no order dependence
            problem = _check(path)
            if isinstance(problem, PeerFile):
                readable.append((path, problem))
            elif problem:
                failures.append(problem)
            else:
                readable.append((path, None))
        for path, peer in readable:
            try:
                if peer is not None:
                    self._print_peer(
                        path,
                        import_peer_file(
                            path,
                            peer=peer,
                            set_name=opts["set_name"],
                            add_cases=opts["add_cases"],
                            target_id=opts["target_id"],
                            variant=opts["variant"],
                            pass_threshold=opts["pass_threshold"],
                        ),
                    )
                    continue
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
        total = len(paths)
        summary = f" ({len(failures)} of {total} files not imported)" if total > 1 else ""
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

    def _print_peer(self, path: str, done: PeerImport) -> None:
        peer = done.peer
        tool = TOOL_NAMES[peer.tool] + (f" {peer.tool_version}" if peer.tool_version else "")
        made = " (created)" if done.set_created else ""
        self.stdout.write(
            f"{path} ({tool}, {peer.file_format}) -> set {done.eval_set.name!r}{made}: {len(done.matched)} case(s) "
            f"matched, {len(done.created)} created, {len(done.skipped)} skipped"
        )
        if done.created:
            shown = ", ".join(done.created[:10]) + (
                f" and {len(done.created) - 10} more" if len(done.created) > 10 else ""
            )
            self.stdout.write(f"  created (a new version of the set): {shown}")
        if done.skipped:
            shown = ", ".join(done.skipped[:10]) + (
                f" and {len(done.skipped) - 10} more" if len(done.skipped) > 10 else ""
            )
            self.stderr.write(
                f"  skipped (no case in set {done.eval_set.name!r}; their results not imported, pass --add-cases to "
                f"add them): {shown}"
            )
        for imported in done.runs:
            run = imported.eval_run
            label = f"run {run.pk} {run.name or imported.run.name!r}".rstrip()
            if not imported.created:
                self.stdout.write(
                    f"  {label}: already imported (same file, SHA-256 {peer.sha256[:12]}…, run {imported.run.key}); "
                    "nothing written"
                )
                continue
            counts = ", ".join(f"{imported.statuses.get(s, 0)} {s}" for s in _STATUSES)
            self.stdout.write(
                f"  {label} ({run.target_id}, variant {run.variant!r}): {run.n_done} results ({counts}); {run.status}"
            )
            only = imported.run.imported_only()
            if only:
                self.stdout.write(
                    f"    imported-only scorers (scored by {TOOL_NAMES[peer.tool]}, not re-runnable): "
                    + ", ".join(only)
                )
            if imported.run.not_run:
                self.stdout.write(
                    f"    {len(imported.run.not_run)} case(s) of the run's data have no result in the export"
                )
            if run.error:
                self.stderr.write(f"    the run did not succeed: {run.error}")
