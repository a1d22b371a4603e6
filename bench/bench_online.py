"""Benchmark: online scoring of ingested traces, and alerts that test the change (issue 28). Run:
``.venv/bin/python bench/bench_online.py [--traces N] [--check]``.

On a temporary SQLite database (WAL, the embedded default):

1. A stand-in OTLP producer (``tests/support/otlp_producer.py``) sends ``--traces`` one-span GenAI
   traces of two services over 20 past hourly windows, in OTLP/JSON requests of 250 traces, to
   the real endpoint (the Django test client: middleware, token auth, decoding, storing). Service
   ``drop-bot`` answers 10% wrong in the first half and 50% wrong in the second; ``steady-bot``
   answers 20% wrong at random throughout (noise only).
2. Two rules (one per service) sample 10% of their traces by trace id for the rubric judge,
   configured as ``EVALSITE_JUDGE_*`` says, against a stand-in judge that fails 10% of its calls
   (503 / 429, ``Retry-After: 0``); each rule has an alert (drop of at least 0.15, alpha 0.01, 20
   traces per window, 2 windows in a row, baseline the previous 6 hours) with a local webhook.
   The task worker (``db_worker --batch``) runs the tasks the endpoint enqueued.
3. A third rule with a no-op scorer takes every trace (a backfill over the whole range), and one
   worker scores them in process: the scoring throughput, traces/s.

Printed: ingest traces/s, worker time for the judged rules, coverage per rule (matched = not
sampled + pending + scored + errored, matched = traces sent per service), the alerts fired (one
expected, for drop-bot) and webhooks received, and the no-op scoring throughput with its ratio
to the target. ``--check`` exits 1 when a done-when condition fails or the throughput misses
its target.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from machine_speed import machine_line  # noqa: E402

TARGET_SCORED_PER_S = 300.0
"""No-op scoring throughput of one worker we hold ourselves to, traces/s."""
WINDOWS = 20


def setup_django(db_path: Path) -> None:
    """Point the settings at a fresh database file and migrate it (before any model import)."""
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def make_traces(n: int, start: datetime) -> list[Any]:
    """``n`` traces, half per service, spread evenly over :data:`WINDOWS` hours from ``start``."""
    from tests.support.otlp_producer import FakeTrace

    noise = random.Random(11)
    per_service = n // 2
    spacing = WINDOWS * 3600 / per_service
    out = []
    for i in range(per_service):
        at = start + timedelta(seconds=i * spacing)
        second_half = i >= per_service // 2
        wrong = i % 2 == 0 if second_half else i % 10 == 0
        out.append(FakeTrace(f"d{i}", "drop-bot", f"q{i % 50}", "WRONG" if wrong else "fine", at))
        out.append(FakeTrace(f"s{i}", "steady-bot", f"q{i % 50}", "WRONG" if noise.random() < 0.2 else "fine", at))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--check", action="store_true", help="exit 1 when a done-when condition or the target fails")
    args = parser.parse_args()
    print(machine_line())
    from tests.support.flaky_judge import FlakyJudge
    from tests.support.webhook_receiver import WebhookReceiver

    with (
        tempfile.TemporaryDirectory(prefix="bench-online-") as tmp,
        FlakyJudge(fail_share=0.1) as judge,
        WebhookReceiver() as hook,
    ):
        os.environ["EVALSITE_JUDGE_MODEL"] = "stand-in-judge"
        os.environ["EVALSITE_JUDGE_BASE_URL"] = judge.base_url
        setup_django(Path(tmp) / "bench.sqlite3")
        from django.contrib.auth.models import Group, User
        from django.core.management import call_command
        from django.test import Client

        from apps.core.auth import create_api_token
        from apps.online.models import Alert, AlertFiring
        from apps.online.queries import rule_totals
        from apps.online.services import backfill, create_rule, score_pending
        from evalcore.scorers.base import ScoreContext, Scorer, register
        from evalcore.types import Score
        from tests.support.otlp_producer import batches

        @register
        @dataclass
        class NoOp(Scorer):
            """Scores every trace True at no cost: what the worker itself costs per trace."""

            name: ClassVar[str] = "noop"
            version: ClassVar[str] = "1"

            async def score(self, ctx: ScoreContext) -> list[Score]:
                return [Score("noop", True)]

        user, _ = User.objects.get_or_create(username="producer")
        user.groups.add(Group.objects.get(name="member"))
        token = create_api_token(user=user, name="bench")[1]
        judge_spec = {"name": "rubric_judge", "args": {"use_cache": False}}
        rules = {}
        for service in ("drop-bot", "steady-bot"):
            rule = create_rule(name=service, scorers=[judge_spec], service=service, sample_rate=0.1)
            Alert.objects.create(
                rule=rule,
                name="quality drop",
                score_name="rubric_judge",
                min_effect=0.15,
                alpha=0.01,
                min_n=20,
                consecutive=2,
                baseline_hours=6,
                webhook_url=hook.url,
            )
            rules[service] = rule

        start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=WINDOWS + 1)
        traces = make_traces(args.traces, start)
        client = Client()
        began = time.perf_counter()
        for body in batches(traces, size=250):
            answer = client.post(
                "/api/otlp/v1/traces", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
            )
            assert answer.status_code == 200, answer.content
        ingest_s = time.perf_counter() - began
        print(f"ingest: {len(traces)} traces in {ingest_s:.1f} s = {len(traces) / ingest_s:.0f} traces/s (OTLP/JSON)")

        began = time.perf_counter()
        call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
        worker_s = time.perf_counter() - began
        print(f"worker (judged rules, {judge.calls} judge calls, {judge.failures} failed): {worker_s:.1f} s")

        ok = True
        sent_per_service = len(traces) // 2
        for service, rule in rules.items():
            t = rule_totals(rule)
            adds_up = t.matched == t.not_sampled + t.pending + t.scored + t.errored and t.matched == sent_per_service
            ok &= adds_up
            interval = t.interval
            bounds = f"[{interval.low:.3f}, {interval.high:.3f}]" if interval and interval.low is not None else "—"
            print(
                f"rule {service}: matched {t.matched} (sent {sent_per_service}) = not sampled {t.not_sampled} "
                f"+ pending {t.pending} {t.pending_reasons or ''} + scored {t.scored} + errored {t.errored} "
                f"{t.errored_reasons or ''}; pass rate {t.pass_rate or 0:.3f} {bounds} n={t.judged}/{t.sampled}"
                f"{'' if adds_up else '  <-- does not add up'}"
            )
        fired = {s: AlertFiring.objects.filter(alert__rule=r).count() for s, r in rules.items()}
        print(f"alerts fired: drop-bot {fired['drop-bot']} (expected 1), steady-bot {fired['steady-bot']} (expected 0)")
        print(f"webhooks received: {len(hook.bodies)}")
        ok &= fired == {"drop-bot": 1, "steady-bot": 0} and len(hook.bodies) == 1

        noop = create_rule(name="noop", scorers=["noop"], sample_rate=1.0)
        began = time.perf_counter()
        matched = backfill(noop, start=start - timedelta(hours=1), end=start + timedelta(hours=WINDOWS + 1))
        match_s = time.perf_counter() - began
        scored = score_pending(rule=noop)
        rate = scored.scored / scored.seconds
        print(f"backfill match: {matched.matched} traces in {match_s:.2f} s = {matched.matched / match_s:.0f} traces/s")
        print(
            f"scoring (one worker, no-op scorer): {scored.scored} traces in {scored.seconds:.2f} s "
            f"= {rate:.0f} traces/s; "
            f"target {TARGET_SCORED_PER_S:.0f} traces/s, ratio {rate / TARGET_SCORED_PER_S:.2f}"
        )
        ok &= scored.scored == len(traces) and rate >= TARGET_SCORED_PER_S
    print("done-when: " + ("met" if ok else "NOT met"))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
