"""``evalsite export-traces RUN_ID --endpoint URL [--header K=V] [--case ID]``: traces out over OTLP/HTTP.

RUN_ID is an eval run id (every case's trace, or ``--case``'s) or a run id (one trace: an eval
case's ``<eval run id>:<case id>``, ``#N`` added for repeat N of a repeated run, where
``<eval run id>:<case id>`` alone names every repeat; an ingested ``otlp:<trace id>``; a
playground turn's). An ``--endpoint`` that is not an http(s) URL is a usage error (exit 2); a
host that does not resolve or refuses the connection fails at once, in one line (exit 1). The
endpoint is a base URL (``http://localhost:4318``; ``/v1/traces`` is added) or the traces URL
itself; it defaults to ``EVALSITE_OTLP_ENDPOINT``, then ``OTEL_EXPORTER_OTLP_ENDPOINT``. Headers
add to ``EVALSITE_OTLP_HEADERS``. The mapping (GenAI semantic conventions, scores on the root
span): docs/otel.md and :mod:`apps.evals.exports.otel`.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.evals.cli.console import UsageError, open_existing_database
from apps.evals.exports.otel import export_traces
from evalcore.errors import NotFoundError
from evalcore.otel.sdk import check_endpoint, parse_headers


def _endpoint(value: str) -> str:
    """argparse type of ``--endpoint``: an http(s) URL, else a usage error at parse time."""
    try:
        return check_endpoint(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class Command(BaseCommand):
    help = "Send a run's traces to an OpenTelemetry (OTLP/HTTP) endpoint: Jaeger, Phoenix, Langfuse, a collector."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "run_id",
            help="an eval run id (all its cases' traces) or one run id (RUN:CASE; RUN:CASE#N for one repeat "
            "of a repeated run, RUN:CASE for all its repeats)",
        )
        parser.add_argument("--case", help="only this case of the eval run")
        parser.add_argument(
            "--endpoint",
            type=_endpoint,
            help="OTLP/HTTP base URL or .../v1/traces URL "
            "(default: EVALSITE_OTLP_ENDPOINT, then OTEL_EXPORTER_OTLP_ENDPOINT)",
        )
        parser.add_argument(
            "--header",
            action="append",
            default=[],
            metavar="K=V",
            help="request header, repeatable (e.g. 'Authorization=Bearer xyz')",
        )
        parser.add_argument("--timeout", type=float, help="seconds per request, retries included (default 10)")

    def handle(self, *args: Any, **opts: Any) -> None:
        open_existing_database()
        endpoint = opts["endpoint"] or settings.EVALSITE_OTLP_ENDPOINT or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        if not endpoint:
            raise UsageError("give --endpoint URL (or set EVALSITE_OTLP_ENDPOINT)")
        try:
            check_endpoint(endpoint)
            headers = parse_headers(settings.EVALSITE_OTLP_HEADERS)
            for item in opts["header"]:
                name, sep, value = item.partition("=")
                if not sep or not name.strip():
                    raise ValueError(f"--header {item!r}: write it as NAME=VALUE")
                headers[name.strip()] = value.strip()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        timeout = opts["timeout"] if opts["timeout"] is not None else settings.EVALSITE_OTLP_TIMEOUT_S
        if not math.isfinite(timeout) or timeout <= 0:
            raise UsageError(f"--timeout {timeout:g}: give a number of seconds above 0")
        try:
            outcome = export_traces(
                opts["run_id"], endpoint=endpoint, headers=headers, case_id=opts["case"], timeout_s=timeout
            )
        except NotFoundError as exc:
            raise UsageError(str(exc)) from None
        if not outcome.ok:
            raise CommandError(
                f"export to {outcome.endpoint} failed after {outcome.traces} traces ({outcome.spans} spans): "
                f"{outcome.error}"
            )
        self.stdout.write(f"exported {outcome.traces} traces ({outcome.spans} spans) to {outcome.endpoint}")
