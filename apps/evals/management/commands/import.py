"""``evalsite import PATH...``: import case banks into the database.

JSONL, JSON, CSV, ADK, promptfoo configs, Parquet / Arrow; other tools' layouts (promptfoo,
Inspect, OpenAI evals, Langfuse) are recognised by content (:mod:`evalcore.loaders.peers`).
An Inspect *log* (``.eval``, or a ``.json`` log) is refused with the command that imports it
as a run (``evalsite import-run``).
Each file is one transaction: a bad file imports nothing and the error names file, line, field.
What a file holds that Evalsite cannot honour (a promptfoo assertion with no equivalent) is
printed as a warning.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.evals.cli.console import UsageError, ensure_database, load_set
from apps.evals.sets.cases import kept_edited_line
from evalcore.loaders import parse_mapping
from evalcore.loaders.inspect_log import is_inspect_log
from evalcore.loaders.peer_runs import detect_peer_format
from evalcore.splits import parse_split_aliases

_PEER_TOOLS = {
    "promptfoo": "a promptfoo results file",
    "openai_evals": "an OpenAI Evals export",
    "braintrust": "a Braintrust experiment",
}


class Command(BaseCommand):
    help = (
        "Import case-bank files as eval sets: .jsonl, .json, .csv, ADK .test.json / .evalset.json, "
        "promptfoo .yaml configs and test files, Inspect / OpenAI evals / Langfuse datasets, .parquet / .arrow."
    )
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):  # type: ignore[no-untyped-def]
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.called_from_command_line = True
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+")
        parser.add_argument("--name", help="set name (default: the file name without extensions)")
        parser.add_argument("--map", dest="mapping", help="field mapping, e.g. input=question,expected=answer")
        parser.add_argument("--auto-id", action="store_true", help="derive missing case ids from content")
        parser.add_argument(
            "--split-alias",
            dest="split_alias",
            help="map the file's split names to train/dev/test, e.g. test=dev,validate=test",
        )
        parser.add_argument(
            "--prune-captured",
            action="store_true",
            help="also remove the cases captured in the portal (kept by default: a file never holds them)",
        )
        parser.add_argument(
            "--keep-edited",
            action="store_true",
            help="leave the cases someone edited since the set's last import as they are (what `make demo` does)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        from pathlib import Path

        if opts["name"] and len(opts["paths"]) > 1:
            raise UsageError("--name works with one file at a time")
        try:
            mapping = parse_mapping(opts["mapping"]) if opts["mapping"] else None
        except ValueError as exc:
            raise UsageError(f"--map: {exc}") from None
        try:
            aliases = parse_split_aliases(opts["split_alias"])
        except ValueError as exc:
            raise UsageError(f"--split-alias: {exc}") from None
        ensure_database()
        for path in opts["paths"]:
            if not Path(path).exists():
                raise UsageError(f"{path}: no such file")
            if is_inspect_log(path):
                raise UsageError(
                    f"{path} is an Inspect log (a run, not a case bank): import it with "
                    f"evalsite import-run {path} [--set NAME]"
                )
            tool = detect_peer_format(path)
            if tool is not None:
                raise UsageError(
                    f"{path} is {_PEER_TOOLS[tool]} (runs with their scores, not a case bank): import it with "
                    f"evalsite import-run {path} [--set NAME] (its cases come in with it)"
                )
            eval_set, summary = load_set(
                path,
                mapping=mapping,
                auto_id=opts["auto_id"],
                name=opts["name"],
                prune_captured=opts["prune_captured"],
                split_aliases=aliases,
                keep_edited=opts["keep_edited"],
            )
            assert summary is not None
            counts = ", ".join(f"{k} {v}" for k, v in summary.split_counts.items())
            read_as = f" (read as {summary.dialect})" if summary.dialect else ""
            self.stdout.write(
                f"{path}{read_as} -> set {eval_set.name!r}: {summary.created} new, {summary.updated} updated, "
                f"{summary.unchanged} unchanged, {summary.removed} removed ({counts})"
            )
            for warning in summary.warnings:
                self.stderr.write(f"  warning: {warning}")
            if summary.kept_edited:
                self.stdout.write(f"  {kept_edited_line(summary.kept_edited)}")
            if summary.kept_captured:
                self.stdout.write(
                    f"  {summary.kept_captured} case(s) captured in the portal kept "
                    "(not in the file; --prune-captured removes them)"
                )
