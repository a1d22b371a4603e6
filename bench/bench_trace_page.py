"""Benchmark: the trace viewer on a 2,000-span trace (issue 26). Run:
``.venv/bin/python bench/bench_trace_page.py [--spans N] [--repeat R] [--check]``.

Creates a temporary SQLite database (WAL, the embedded default), stores one agent trace of
``--spans`` spans (``tests/support/big_trace.py``: chat and tool steps with their messages, nested
sub-agents, failing tool calls; about 2.9 events per span), then measures the server time of

* the trace page (``/traces/<id>/``: the whole tree, the first span's detail);
* the page deep-linked to a span in the middle (``?span=<id>``);
* the ``span-detail`` partial the viewer's JS fetches when a span is selected.

"Server time" is the wall time of one request through the Django test client (middleware, auth,
view, queries, rendering; no network), printed as min / median / max of ``--repeat`` warm
requests after one cold one, with the page's size (the query count is bounded by a test:
``tests/apps/traces/test_trace_viewer.py``). Target: median <= 300 ms
for the page; ``--check`` exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from machine_speed import machine_line  # noqa: E402

TARGET_MS = 300.0


def setup_django(db_path: Path) -> None:
    """Point the settings at a fresh database file and migrate it (before any model import)."""
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"  # DEBUG records every query: not what production pays
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def timed(request: Callable[[], object], repeat: int) -> tuple[float, list[float], object]:
    """The cold time and ``repeat`` warm times of ``request()``, in ms, and the last response."""
    start = time.perf_counter()
    response = request()
    cold = (time.perf_counter() - start) * 1000
    warm = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = request()
        warm.append((time.perf_counter() - start) * 1000)
    return cold, warm, response


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page's median misses its target")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from django.contrib.auth.models import Group, User
        from django.test import Client

        from tests.support.big_trace import add_big_trace, make_trace_run

        run = make_trace_run("bench-2000")
        n_events = add_big_trace(run, args.spans)
        user, _ = User.objects.get_or_create(username="bench")
        user.groups.add(Group.objects.get(name="viewer"))
        client = Client()
        client.force_login(user)
        url = f"/traces/{run.pk}/"
        middle = f"tool-{args.spans // 4}"
        print(machine_line())
        print(f"trace: {args.spans:,} spans, {n_events:,} events (SQLite WAL)")
        ok = True
        cases: list[tuple[str, Callable[[], object], bool]] = [
            ("trace page", lambda: client.get(url), True),
            (f"page deep-linked ?span={middle}", lambda: client.get(url, {"span": middle}), True),
            (
                "span-detail partial",
                lambda: client.get(url, {"span": middle}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="span-detail"),
                False,
            ),
        ]
        for label, request, checked in cases:
            cold, warm, response = timed(request, args.repeat)
            status = getattr(response, "status_code", 0)
            size = len(getattr(response, "content", b""))
            median = statistics.median(warm)
            missed = checked and median > TARGET_MS
            ok = ok and not missed and status == 200
            print(
                f"{label}: min {min(warm):.0f} / median {median:.0f} / max {max(warm):.0f} ms "
                f"(cold {cold:.0f} ms; {args.repeat} runs; HTTP {status}; {size / 1024:.0f} KiB)"
                + (
                    f"  MISSED target {TARGET_MS:.0f} ms"
                    if missed
                    else (f"  target {TARGET_MS:.0f} ms" if checked else "")
                )
            )
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
