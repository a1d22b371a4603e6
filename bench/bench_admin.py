"""Benchmark: the admin's case list on a 100,000-case set (issue 26: target <= 300 ms).

Creates a fresh SQLite database file (WAL, the embedded default), bulk-inserts one set of N cases
(``--cases``, 100,000) with realistic inputs (a question of ~200 characters, a JSON expected value,
two tags), logs a superuser in through Django's test client and times the case list pages:
unfiltered, filtered on the set, on a split, on a tag, a search, and the last page.

"Server time" is the wall time of one request through the test client (middleware, auth, view,
queries, rendering; no network). Each page is requested ``--repeat`` times after one warm-up;
min / median / max are printed with the median's ratio to the 300 ms target.

``--stock`` also times each page with the case admin as it stood before issue 26 (an editable
split column, Django's widget-rendered row checkboxes, ordering on the set's name through a join),
alternating with the current one on the same database, so the two medians share the machine's load.

Run: ``.venv/bin/python bench/bench_admin.py [--cases N] [--repeat R] [--stock] [--check]``;
``--check`` exits 1 when a median misses the target.
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


def populate(n: int) -> int:
    """One set of ``n`` cases (and a small second set, so the set filter has a choice); returns
    the big set's id."""
    from django.db import transaction

    from apps.evals.models import EvalCase, EvalSet

    topics = ("math", "code", "retrieval", "tools", "chit-chat", "safety")
    with transaction.atomic():
        eval_set = EvalSet.objects.create(name="bench-admin-100k", content_hash="bench")
        other = EvalSet.objects.create(name="bench-admin-small", content_hash="bench-small")
        EvalCase.objects.bulk_create(
            (
                EvalCase(
                    eval_set=eval_set,
                    case_id=f"case-{i:06d}",
                    input={"question": f"question {i}: " + "what does the agent answer here? " * 6},
                    expected={"final_response": str(i), "tool_calls": [{"name": "calc", "args": {"x": i}}]},
                    tags=[topics[i % len(topics)], f"batch-{i % 50}"],
                    split=("train", "dev", "test")[i % 3],
                    position=i,
                )
                for i in range(n)
            ),
            batch_size=5000,
        )
        EvalCase.objects.bulk_create(
            EvalCase(eval_set=other, case_id=f"s{i}", input="q", expected="a", split="dev", position=i)
            for i in range(20)
        )
    return eval_set.pk


def stock_switch() -> Callable[[bool], None]:
    """A switch between the case admin as committed (``False``) and its pre-issue-26 form (``True``)."""
    from django.contrib import admin

    from apps.evals.models import EvalCase

    model_admin = admin.site.get_model_admin(EvalCase)
    cls = type(model_admin)
    current = (cls.list_editable, cls.ordering, cls.__dict__["action_checkbox"])

    def switch(stock: bool) -> None:
        if stock:
            cls.list_editable = ("split",)
            cls.ordering = ("eval_set", "position", "case_id")
            cls.action_checkbox = admin.ModelAdmin.action_checkbox  # type: ignore[method-assign]
        else:
            cls.list_editable, cls.ordering = current[0], current[1]
            cls.action_checkbox = current[2]  # type: ignore[method-assign]

    return switch


def time_get(client: object, url: str, repeat: int, before: Callable[[], None] | None = None) -> list[float]:
    """``repeat`` timed GETs of ``url`` after one warm-up, in milliseconds (``before`` runs ahead
    of each, untimed); a non-200 raises."""
    timings = []
    for i in range(repeat + 1):
        if before is not None:
            before()
        start = time.perf_counter()
        response = client.get(url)  # type: ignore[attr-defined]
        elapsed = (time.perf_counter() - start) * 1000
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")
        if i:
            timings.append(elapsed)
    return timings


def main() -> int:
    """Build the database, time the pages, print a table; the exit status is 1 on a miss with --check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="exit 1 when a median misses 300 ms")
    parser.add_argument("--stock", action="store_true", help="also time the pre-issue-26 case admin")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-admin-") as tmp:
        setup_django(Path(tmp) / "bench.sqlite3")
        from django.contrib.auth.models import User
        from django.test import Client

        start = time.perf_counter()
        set_pk = populate(args.cases)
        print(f"inserted {args.cases:,} cases in {time.perf_counter() - start:.1f} s")
        admin_user = User.objects.create_superuser("bench-admin", "admin@example.com", "bench-password")
        client = Client()
        client.force_login(admin_user)  # a session cookie, as a login sets (axes wants a real request)
        base = "/admin/evals/evalcase/"
        last = (args.cases + 99) // 100
        pages = [
            ("case list", base),
            ("filtered on the set", f"{base}?eval_set__id__exact={set_pk}"),
            ("filtered on split=test", f"{base}?split__exact=test"),
            ("filtered on a tag", f"{base}?tag=tools"),
            ("search 'case-0999'", f"{base}?q=case-0999"),
            ("last page of the set", f"{base}?eval_set__id__exact={set_pk}&p={last}"),
        ]
        switch = stock_switch()
        stock_head = "  stock median" if args.stock else ""
        print(f"{'page':<28} {'min':>8} {'median':>8} {'max':>8}  ratio to {TARGET_MS:.0f} ms{stock_head}")
        missed = False
        for label, url in pages:
            stock_ms: list[float] = []
            if args.stock:
                stock_ms = time_get(client, url, args.repeat, before=lambda: switch(True))
            ms = time_get(client, url, args.repeat, before=lambda: switch(False))
            median = statistics.median(ms)
            missed |= median > TARGET_MS
            stock = f"  {statistics.median(stock_ms):>11.0f}ms" if stock_ms else ""
            print(
                f"{label:<28} {min(ms):>6.0f}ms {median:>6.0f}ms {max(ms):>6.0f}ms  {median / TARGET_MS:>14.2f}{stock}"
            )
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
