"""``evalsite align-judge SET --name NAME [--allow-test]``: align the rubric judge to people's
reviews on a set; prints kappa before/after on the locked test labels beside people's alpha."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.evals.cli.console import UsageError, open_existing_database
from apps.evals.cli.judging import add_judge_arguments, judge_setup
from apps.evals.models import EvalSet
from apps.evals.runs.alignment import align_judge
from evalcore.judge.align import Kappa
from evalcore.splits import HeldOutError


def _kappa(k: Kappa | None) -> str:
    if k is None or k.kappa is None:
        return "no verdicts"
    interval = f" [{k.low:.2f}, {k.high:.2f}]" if k.low is not None and k.high is not None else ""
    return f"κ {k.kappa:.2f}{interval} (n={k.scored}/{k.n})"


class Command(BaseCommand):
    help = "Align the rubric judge to people's reviews on a set (train: improve, dev: choose, test: report)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("eval_set", help="the set's name")
        parser.add_argument("--name", required=True, help="the aligned judge's name (stored as NAME@vN)")
        parser.add_argument(
            "--allow-test", action="store_true", help="read the locked test labels for the report (counted)"
        )
        add_judge_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        open_existing_database()
        eval_set = EvalSet.objects.filter(name=opts["eval_set"]).first()
        if eval_set is None:
            raise UsageError(f"no eval set named {opts['eval_set']!r}")
        if not opts["name"].replace("-", "").replace("_", "").isalnum():
            raise UsageError(f"--name {opts['name']!r}: letters, digits, '-' and '_' only")
        setup = judge_setup({**opts, "judge": True})
        base = setup.scorers[0]
        try:
            aligned = align_judge(
                eval_set, name=opts["name"], base=base, services=setup.services, allow_test=opts["allow_test"]
            )
        except HeldOutError as exc:
            raise UsageError(str(exc)) from None
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        report = aligned.report
        out = self.stdout
        out.write(f"labels: train {report.counts['train']}, dev {report.counts['dev']}, test {report.counts['test']}")
        for name, k in report.dev.items():
            out.write(f"  dev  {name:<15} {_kappa(k)}")
        out.write(f"chosen on dev: {report.chosen.name}")
        if report.before is not None:
            out.write(f"test before: {_kappa(report.before)}")
            out.write(f"test after:  {_kappa(report.after)}")
            alpha = f"{aligned.alpha:.2f}" if aligned.alpha is not None else "undefined"
            out.write(
                f"people's agreement (Krippendorff's α, the ceiling): {alpha} "
                f"(n={aligned.alpha_n} test results graded by 2+ people)"
            )
            out.write(f"test labels of this set read {aligned.test_reads} time(s) by alignments")
        else:
            out.write("test: not read (no test labels, or no --allow-test)")
        out.write(f"stored judge spec {aligned.version.label}: evalsite rejudge RUN --judge {aligned.version.label}")
