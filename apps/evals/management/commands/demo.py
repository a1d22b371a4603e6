"""``evalsite demo``: the example evals of ``make demo``, idempotent.

It runs from a checkout and from an installed package alike: the example sets and agents come
from ``settings.EVALSITE_EXAMPLES_DIR`` (the checkout's ``examples/``, else the copy the wheel
installed). It migrates the database when needed and imports the sets it runs that are not
imported yet (``make demo`` imports them all first, which refreshes them), then runs the evals.

No demo run opens the held-out test split (GSM8K runs over its dev split). Each demo run is done
once: a finished run of the same set, target, variant and split is reused, so running the demo
again adds no duplicate runs. That holds after the set changed too (a case captured from the playground, a
case edited in the admin): the run is reused and one line says the set changed since; ``--force``
runs them all again. ``make demo`` refreshes the example sets with ``evalsite import
--keep-edited``, which never overwrites a case someone edited (one line names those it left). A run stopped by
Ctrl-C (or whose process died) is resumed by the next ``evalsite demo`` (``evalsite eval
--resume``): no second run, no lockbox warning.

Ctrl-C: the ``evalsite eval`` child gets it too and stops cleanly (it stores the finished cases
and marks its run interrupted); the demo waits for it, then says so in one line and exits 130.

The first run of each group shows its progress bar (the others are ``--quiet``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.evals.cli.console import ensure_database, load_set
from apps.evals.models import EvalRun, EvalRunStatus, EvalSet
from apps.evals.queries.runs import NEWEST_FIRST
from apps.evals.runs.liveness import mark_stale_runs


@dataclass(frozen=True, slots=True)
class DemoRun:
    """One example eval: set name, target, variant, split."""

    set_name: str
    target: str
    variant: str
    split: str


DEMO: tuple[tuple[str, tuple[DemoRun, ...]], ...] = (
    (
        # the dev split: a demo never opens the held-out test split (`evalsite eval --split all
        # --allow-test` runs all 1,319 questions, as examples/README.md shows)
        "GSM8K replay: two recorded models over the dev split of the 1,319 questions",
        (
            DemoRun("gsm8k_test", "gsm8k-replay", "6b_finetuning", "dev"),
            DemoRun("gsm8k_test", "gsm8k-replay", "175b_verification", "dev"),
        ),
    ),
    (
        "HotpotQA: the retrieve node alone (citations), then the whole pipeline agent (answers)",
        (
            DemoRun("hotpotqa_dev100", "hotpotqa-retrieve", "top2", "dev"),
            DemoRun("hotpotqa_dev100", "hotpotqa-retrieve", "top4", "dev"),
            DemoRun("hotpotqa_dev100", "hotpotqa-agent", "top2", "dev"),
            DemoRun("hotpotqa_dev100", "hotpotqa-agent", "top4", "dev"),
        ),
    ),
    (
        "BFCL tool calling: rule-based agent, two variants",
        (
            DemoRun("bfcl_simple_python", "bfcl-rules", "keyword", "dev"),
            DemoRun("bfcl_simple_python", "bfcl-rules", "strict", "dev"),
        ),
    ),
)
"""The demo's groups of runs, in order."""


def _same_runs(run: DemoRun, status: str) -> Any:
    """Eval runs of ``run`` on today's set (same content hash) with ``status``, newest first.

    Raises:
        CommandError: The set is not imported (import the example sets first).
    """
    eval_set = EvalSet.objects.filter(name=run.set_name).first()
    if eval_set is None:
        raise CommandError(f"set {run.set_name!r} is not imported: `evalsite demo` imports it from the examples")
    return EvalRun.objects.filter(
        eval_set=eval_set,
        target_id=run.target,
        variant=run.variant,
        split=run.split,
        status=status,
        set_hash=eval_set.content_hash,
        source_eval_run__isnull=True,
    ).order_by(NEWEST_FIRST, "-pk")


def reusable_run(run: DemoRun) -> Any:
    """The finished eval run that already did ``run`` on today's set, or ``None``.

    Raises:
        CommandError: The set is not imported (import the example sets first).
    """
    return _same_runs(run, EvalRunStatus.FINISHED).first()


def earlier_run(run: DemoRun) -> Any:
    """The newest finished eval run of ``run`` on an earlier content of its set, or ``None``.

    The demo reuses it rather than run again because a case was captured or edited since.
    """
    return (
        EvalRun.objects.filter(
            eval_set__name=run.set_name,
            target_id=run.target,
            variant=run.variant,
            split=run.split,
            status=EvalRunStatus.FINISHED,
            source_eval_run__isnull=True,
        )
        .order_by(NEWEST_FIRST, "-pk")
        .first()
    )


def resumable_run(run: DemoRun) -> Any:
    """The interrupted eval run of ``run`` on today's set (a Ctrl-C'd demo), or ``None``.

    Runs whose process died while ``running`` are marked interrupted first.

    Raises:
        CommandError: The set is not imported (import the example sets first).
    """
    mark_stale_runs(force=True)
    return _same_runs(run, EvalRunStatus.INTERRUPTED).first()


class DemoStopped(CommandError):
    """Ctrl-C: one line, exit code 130 (the shell's code for SIGINT)."""

    def __init__(self) -> None:
        super().__init__(
            "demo stopped by Ctrl-C; finished cases are kept, `evalsite demo` (or `make demo`) resumes it",
            returncode=130,
        )


def run_child(command: list[str]) -> int:
    """Run ``command`` and return its exit code; Ctrl-C waits for it (it stops cleanly itself).

    ``subprocess.call`` would SIGKILL the child on the first Ctrl-C, before it stores its cases.

    Raises:
        DemoStopped: Ctrl-C came while it ran (after it ended).
    """
    child = subprocess.Popen(command)
    interrupted = False
    while True:
        try:
            code = child.wait()
            break
        except KeyboardInterrupt:
            interrupted = True  # the child got the same Ctrl-C (same process group): wait for it
    if interrupted or code in (130, -signal.SIGINT):
        raise DemoStopped()
    return code


class Command(BaseCommand):
    help = "Run the example evals of `make demo`, reusing those already done (no duplicate runs)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agents", default=None, help="the agents folder (default: the example agents)")
        parser.add_argument("--force", action="store_true", help="run every demo eval again, even when done")
        parser.add_argument("--only", default="", help="only the groups whose title contains this word (e.g. GSM8K)")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            self._handle(**opts)
        except KeyboardInterrupt:  # Ctrl-C between two runs
            raise DemoStopped() from None

    def import_sets(self, groups: list[tuple[str, tuple[DemoRun, ...]]]) -> None:
        """Import the example sets the selected runs use that are not imported yet, one line each.

        A set already there is left as it is (``evalsite import`` refreshes it from its file).

        Raises:
            CommandError: An example set file is missing (an incomplete installation).
        """
        sets_dir = Path(settings.EVALSITE_EXAMPLES_DIR) / "sets"
        for name in dict.fromkeys(run.set_name for _, runs in groups for run in runs):
            if EvalSet.objects.filter(name=name).exists():
                continue
            path = sets_dir / f"{name}.jsonl"
            if not path.is_file():
                raise CommandError(f"example set {path} is missing (EVALSITE_EXAMPLES_DIR: {sets_dir.parent})")
            eval_set, _ = load_set(str(path), mapping=None, auto_id=False)
            self.stdout.write(f"imported {path} -> set {eval_set.name!r} ({eval_set.cases.count():,} cases)")

    def _handle(self, **opts: Any) -> None:
        groups = [(t, runs) for t, runs in DEMO if not opts["only"] or opts["only"].lower() in t.lower()]
        if not groups:
            raise CommandError(f"--only {opts['only']!r} matches no demo group", returncode=2)
        agents = opts["agents"] or str(Path(settings.EVALSITE_EXAMPLES_DIR) / "agents")
        ensure_database()
        self.import_sets(groups)
        for title, runs in groups:
            self.stdout.write(f"\n== {title} ==")
            for index, run in enumerate(runs):
                done = None if opts["force"] else reusable_run(run)
                label = f"{run.target} {run.variant} on {run.set_name} ({run.split})"
                if done is not None:
                    self.stdout.write(f"{label}: already done, run {done.pk} reused (--force runs it again)")
                    continue
                stopped = None if opts["force"] else resumable_run(run)
                # a run stopped on today's set is resumed; else an earlier finished one is reused
                earlier = None if opts["force"] or stopped is not None else earlier_run(run)
                if earlier is not None:
                    self.stdout.write(
                        f"{label}: already done, run {earlier.pk} reused; the set changed since (cases captured "
                        "or edited), not run again (--force runs it again)"
                    )
                    continue
                show = () if index == 0 else ("--quiet",)  # the first of a group shows its progress bar
                if stopped is not None:
                    self.stdout.write(f"{label}: resuming interrupted run {stopped.pk}")
                    command = [*(sys.executable, "-m", "evalsite.cli", "eval", agents), "--resume", stopped.pk]
                else:
                    command = [
                        *(sys.executable, "-m", "evalsite.cli", "eval", agents),
                        *(
                            "--set",
                            run.set_name,
                            "--target",
                            run.target,
                            "--variant",
                            run.variant,
                            "--split",
                            run.split,
                        ),
                    ]
                self.stdout.flush()
                code = run_child([*command, *show])
                if code != 0:
                    raise CommandError(f"{label}: `evalsite eval` exited {code}")
        self.stdout.write(
            "\nNext: `evalsite trace --latest` (one case's trace), `evalsite demo_users` (local accounts "
            "admin/admin, member/member, viewer/viewer), then `evalsite serve`."
        )
