"""``evalsite online``: one online-scoring pass (score pending traces, test alerts, deliver
webhooks), or one every ``--watch`` seconds: the clock for traces pending a judge that was down,
and for the last window of a rule whose traffic stopped."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.online.tasks import online_pass


class Command(BaseCommand):
    help = "Score pending traces of the online rules, test their alerts and deliver webhooks (once, or on a clock)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--watch", type=float, default=0.0, metavar="SECONDS", help="repeat every SECONDS")

    def handle(self, *args: Any, **options: Any) -> None:
        while True:
            outcome = online_pass()
            self.stdout.write(
                "scored {scored}, errored {errored}, left pending {pending}; alerts fired {fired}, "
                "webhooks delivered {delivered}".format(**outcome)
            )
            if options["watch"] <= 0:
                return
            time.sleep(options["watch"])
