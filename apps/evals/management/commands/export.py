"""``evalsite export RUN_ID [--format jsonl|csv|parquet] [-o PATH]``: a run, comparison, review queue or set out.

``--compare B`` exports RUN_ID (A) and B aligned per case, ``--review-queue`` the run's review
queue, ``--set NAME`` a set (also ``--format adk``: an ADK eval set), ``--set NAME --review-queue``
the set's review queue across its runs (``--runs latest|all|RUN_ID``). Rows are streamed: memory
stays flat however many results. ``-o PATH`` writes a file (atomically; the format defaults
to its suffix), else the export goes to standard output. Formats and row shapes: README,
"Exporting"; the rows come from :mod:`apps.evals.exports.downloads`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.evals.cli.console import UsageError, open_existing_database
from apps.evals.exports.downloads import (
    Download,
    compare_download,
    queue_download,
    run_download,
    set_download,
    set_queue_download,
    write_download,
)
from apps.evals.exports.pairs import SET_FORMATS
from apps.evals.models import EvalRun, EvalSet
from apps.evals.queries.review_queue import QUEUE_FILTERS
from evalcore.errors import InvalidInputError, NotFoundError

_BY_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".json": "adk"}


class Command(BaseCommand):
    help = (
        "Export a run (or a comparison, a review queue, a set) as JSONL, CSV or Parquet; a set also as an ADK eval set."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", nargs="?", help="the eval run to export (A with --compare)")
        parser.add_argument("--format", choices=SET_FORMATS, help="default: from -o's suffix, else jsonl")
        parser.add_argument("-o", "--output", help="file to write (default, or -: standard output)")
        parser.add_argument("--compare", metavar="B", help="export RUN_ID and B aligned per case, with the flip kind")
        parser.add_argument("--review-queue", action="store_true", help="export the run's review queue and reviews")
        parser.add_argument("--filter", default="all", choices=list(QUEUE_FILTERS), help="review queue filter")
        parser.add_argument("--set", dest="eval_set", metavar="NAME", help="export a set's cases instead of a run")
        parser.add_argument(
            "--runs",
            default="latest",
            metavar="latest|all|RUN_ID",
            help="with --set and --review-queue: the runs of the set's queue (default: latest of each target/variant)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        open_existing_database()
        if opts["output"] == "-":  # the usual spelling of standard output
            opts["output"] = None
        fmt = self._format(opts["format"], opts["output"])
        try:
            download = self._download(fmt, opts)
        except (InvalidInputError, NotFoundError) as exc:
            raise UsageError(str(exc)) from None
        count = write_download(download, opts["output"])
        if opts["output"]:
            self.stderr.write(f"wrote {opts['output']} ({count} bytes, {fmt})")

    @staticmethod
    def _format(option: str | None, output: str | None) -> str:
        """The format: ``--format``, else from ``-o``'s suffix, else jsonl; a suffix naming
        another known format, or one no format has, is refused (exit 2) rather than written."""
        suffix = Path(output or "").suffix.lower()
        by_suffix = _BY_SUFFIX.get(suffix)
        if option is None:
            if output and by_suffix is None:
                known = ", ".join(sorted(_BY_SUFFIX))
                raise UsageError(
                    f"-o {output}: cannot tell the format from {suffix or 'no suffix'!r} ({known}); give --format"
                )
            return by_suffix or "jsonl"
        if by_suffix is not None and by_suffix != option:
            raise UsageError(f"-o {output} names a {by_suffix} file but --format is {option}")
        return option

    @staticmethod
    def _download(fmt: str, opts: dict[str, Any]) -> Download:
        if opts["eval_set"]:
            key = opts["eval_set"]
            eval_set = EvalSet.objects.filter(name=key).first()
            if eval_set is None and key.isdigit():
                eval_set = EvalSet.objects.filter(pk=int(key)).first()
            if eval_set is None:
                raise UsageError(f"no eval set {key!r}")
            if opts["review_queue"]:
                return set_queue_download(eval_set, fmt, runs=opts["runs"], queue_filter=opts["filter"])
            return set_download(eval_set, fmt)
        if not opts["run_id"]:
            raise UsageError("give an eval run id (or --set NAME)")
        if fmt == "adk":
            raise UsageError("--format adk exports a set: use --set NAME")
        eval_run = _run(opts["run_id"])
        if opts["compare"]:
            return compare_download(eval_run, _run(opts["compare"]), fmt)
        if opts["review_queue"]:
            return queue_download(eval_run, fmt, queue_filter=opts["filter"])
        return run_download(eval_run, fmt)


def _run(run_id: str) -> EvalRun:
    found = EvalRun.objects.select_related("eval_set").filter(pk=run_id).first()
    if found is None:
        raise UsageError(f"no eval run {run_id!r}")
    return found
