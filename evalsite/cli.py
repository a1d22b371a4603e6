"""The ``evalsite`` console script: a thin wrapper over the management commands.

``evalsite eval ...`` is ``python manage.py eval ...`` from any directory. ``--db PATH`` (any
command) points the embedded SQLite database somewhere else; it is read before Django starts.
The project folder's ``.env`` is read first (:func:`evalsite.paths.load_env_file`; variables
already set win). ``evalsite init`` runs without Django (it writes no data folder).
"""

from __future__ import annotations

import gc
import os
import sys

USAGE = """usage: evalsite <command> [options]

commands:
  init      create a project folder: an example target, a small case bank, a .env template
  demo      run the example suites (GSM8K replay, HotpotQA, BFCL), reusing finished runs
  eval      run an eval set against a target (progress bar, table, gates, exit code)
  targets   list the targets an agents folder declares
  import    import a case bank (JSONL / JSON / CSV / ADK / promptfoo / Inspect / Parquet ...)
  import-run  import past runs (Inspect logs, promptfoo results, OpenAI Evals exports, Braintrust experiments)
  export    export a run, comparison, review queue or set (JSONL / CSV / Parquet / ADK)
  compare   compare 2..20 runs of a set: ranking, corrected verdicts against a baseline, flips
  trace     print a run's span tree
  export-traces  send a run's traces to an OpenTelemetry (OTLP/HTTP) endpoint
  rescore   score a stored eval run again without calling the target
  reprice   cost a stored eval run again with today's price table (says old → new)
  rejudge   ask the judge again: only unstable / missing / errored cases, or with another judge spec
  align-judge  align the judge to people's reviews on a set (a new versioned judge spec)
  cache     show or clear the target response cache (evalsite eval --cache-target)
  leaderboard  a set's leaderboard on one split (latest finished run per target / variant)
  serve     serve the portal, API and websockets (with the task worker)
  token     create, list and revoke API tokens
  ...       any other Django management command (migrate, createsuperuser, ...)

`evalsite <command> --help` for the options of one command."""


LONG_RUNNING = frozenset({"serve", "runserver", "worker", "queue_worker", "db_worker", "shell"})
"""Commands that live on: they keep the interpreter's default garbage-collector thresholds."""

ONE_SHOT_GC_THRESHOLDS = (50_000, 50, 100)
"""The cyclic GC's thresholds for a one-shot command (default: 2,000 / 10 / 10). Starting Django
and the engine allocates ~10^6 objects that live to the end; at the default thresholds the
collector walks them dozens of times before the first case runs (~8% of a 10,000-case no-op
``evalsite eval``: ``bench/bench_persisted.py``). Garbage cycles are still collected, every
50,000 net allocations instead of every 2,000."""

COMMAND_ALIASES = {"import-run": "import_run", "export-traces": "export_traces", "align-judge": "align_judge"}
"""Commands spelled with a hyphen on the command line (a module name cannot hold one)."""


def take_db_option(argv: list[str]) -> list[str]:
    """Remove ``--db PATH`` / ``--db=PATH`` from argv and export it as EVALSITE_DB."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--db":
            if i + 1 >= len(argv) or not argv[i + 1].strip():
                sys.stderr.write("evalsite: error: --db needs a path\n")
                raise SystemExit(2)
            os.environ["EVALSITE_DB"] = os.path.abspath(argv[i + 1])
            i += 2
            continue
        if arg.startswith("--db="):
            if not arg.split("=", 1)[1].strip():
                sys.stderr.write("evalsite: error: --db needs a path\n")
                raise SystemExit(2)
            os.environ["EVALSITE_DB"] = os.path.abspath(arg.split("=", 1)[1])
            i += 1
            continue
        out.append(arg)
        i += 1
    return out


def main(argv: list[str] | None = None) -> None:
    """Run one ``evalsite`` command; a Ctrl-C that no command handles (e.g. during start-up, before
    Django is ready) is one line on stderr and exit 130, not a traceback."""
    _printable_streams()
    try:
        _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        sys.stderr.write("\nevalsite: interrupted (Ctrl-C)\n")
        raise SystemExit(130) from None  # 128 + SIGINT, as a shell reports it


def _printable_streams() -> None:
    """Standard output writes a lone UTF-16 surrogate (text a target made, e.g. half an emoji) as
    its ``\\udXXX`` escape, as standard error already does, instead of raising
    ``UnicodeEncodeError`` in whatever printed it (a target's ``print`` errored its case)."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a stream that cannot change (closed, or not a text file)
            pass


def _main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        raise SystemExit(0 if argv else 2)
    if argv[0] == "init":
        from evalsite.scaffold import main as init_main

        raise SystemExit(init_main(argv[1:]))
    from evalsite.paths import load_env_file

    load_env_file()
    argv = take_db_option(argv)
    argv[0] = COMMAND_ALIASES.get(argv[0], argv[0])
    if argv[0] not in LONG_RUNNING:
        gc.set_threshold(*ONE_SHOT_GC_THRESHOLDS)
    os.environ["EVALSITE_COMMAND"] = argv[0]  # settings load no web stack for the command-line tools
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    from django.core.management import execute_from_command_line

    try:
        try:
            execute_from_command_line(["evalsite", *argv])
        finally:
            _finish_background_work()
    except BrokenPipeError:
        # the reader went away (`evalsite export RUN | head`): stop quietly, as Unix tools do;
        # standard output goes to /dev/null so the interpreter's final flush does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141) from None  # 128 + SIGPIPE, as a shell reports a tool killed by it


def _finish_background_work() -> None:
    """Wait for what a command left running in the background and that must end before the
    interpreter shuts down: the OTLP export of a finished run (only when that module was used)."""
    if "apps.evals.exports.otel" in sys.modules:
        from apps.evals.exports.otel import finish_exports_before_exit

        finish_exports_before_exit()


if __name__ == "__main__":
    main()
