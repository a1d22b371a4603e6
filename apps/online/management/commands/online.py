"""``evalsite online``: one online-scoring pass (score pending traces, test alerts, deliver
webhooks), or one every ``--watch`` seconds: the clock for traces pending a judge that was down,
and for the last window of a rule whose traffic stopped."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.evals.cli.console import finite_float
from apps.online.models import ScoringRule
from apps.online.tasks import online_pass


class Command(BaseCommand):
    help = "Score pending traces of the online rules, test their alerts and deliver webhooks (once, or on a clock)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--watch", type=finite_float, default=0.0, metavar="SECONDS", help="repeat every SECONDS (> 0)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["watch"] < 0:
            raise CommandError(f"--watch: {options['watch']:g} is not a number of seconds > 0 (omit it for one pass)")
        if not ScoringRule.objects.filter(active=True).exists():
            self.stdout.write("no active online scoring rule: make one on the Online page, in the admin or the API")
        while True:
            outcome = online_pass()
            self.stdout.write(
                "scored {scored}, errored {errored}, left pending {pending}; alerts fired {fired}, "
                "webhooks delivered {delivered}".format(**outcome)
            )
            if options["watch"] <= 0:
                return
            time.sleep(options["watch"])
