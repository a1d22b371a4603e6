"""Benchmark: the portal on two 100,000-case eval runs.

Creates a temporary SQLite database (WAL, the embedded default), bulk-inserts one set of N cases
and two finished eval runs of N results each (with their ``traces.Run`` rows), then measures:

* server time of the run detail's first page, through the JSON API and the HTML page
  (target <= 200 ms);
* server time of the compare view's first page, API and page (target <= 300 ms);
* websocket update latency: a result row committed -> its message received by a
  ``WebsocketCommunicator`` on the live run (target <= 1 s);
* the admin pages of the 100,000-case set, as staff: the set list, the set's change page (it
  never inlines the cases), the case list filtered on the set, a case's change page, and the
  run and result lists (target <= 500 ms each);
* a set's review queue across its runs, on a second set of ``--set-cases`` cases (1,319: GSM8K's
  test split) run ``--set-runs`` times (20; ten variants, two runs each, judge-scored, a tenth
  of the results already reviewed): the page over every run, its HTMX panel in the middle of
  the queue, the latest-run-per-variant page, and a save that moves on (target <= 300 ms each).

"Server time" is the wall time of one request through the Django test client (middleware,
auth, view, queries, rendering; no network). Each figure is the median of ``--repeat`` warm
requests; the first (cold) request is printed too.

Run: ``.venv/bin/python bench/bench_portal.py [--cases N] [--set-runs R] [--set-cases N] [--repeat R]
[--check]``; ``--check`` exits 1 when a median misses its target.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_DETAIL_MS = 200.0
TARGET_COMPARE_MS = 300.0
TARGET_WS_MS = 1000.0
TARGET_ADMIN_MS = 500.0
TARGET_SET_QUEUE_MS = 300.0


def setup_django(db_path: Path) -> None:
    """Point the settings at a fresh database file and migrate it (before any model import)."""
    os.environ["EVALSITE_DB"] = str(db_path)
    os.environ["EVALSITE_DEBUG"] = "0"  # DEBUG records every query: not what production pays
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def populate(n: int, seed: int = 11) -> tuple[str, str, int]:
    """One set of ``n`` cases and two finished runs over it (A, B); returns (a_id, b_id, set_id).

    B differs from A on about 10% of cases (flips both ways), as a real A/B pair would.
    """
    from django.db import transaction
    from django.utils import timezone

    from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
    from apps.traces.models import Run
    from evalcore.serial import to_record
    from evalcore.types import Score

    rng = random.Random(seed)
    now = timezone.now()
    with transaction.atomic():
        eval_set = EvalSet.objects.create(name="bench-100k", content_hash="bench")
        EvalCase.objects.bulk_create(
            (
                EvalCase(
                    eval_set=eval_set,
                    case_id=f"case-{i:06d}",
                    input={"question": f"question {i}"},
                    expected=str(i),
                    tags=["bench"],
                    split=("train", "dev", "test")[i % 3],
                    position=i,
                )
                for i in range(n)
            ),
            batch_size=5000,
        )
    passed_a = [rng.random() < 0.7 for _ in range(n)]
    passed_b = [(not p) if rng.random() < 0.1 else p for p in passed_a]
    ids = []
    for label, passed in (("A", passed_a), ("B", passed_b)):
        with transaction.atomic():
            eval_run = EvalRun.objects.create(
                eval_set=eval_set,
                target_id="bench",
                variant=label,
                split="all",
                status="finished",
                started=now,
                finished=now,
                n_total=n,
                n_done=n,
                n_passed=sum(passed),
                n_failed=n - sum(passed),
                scorer_specs=[{"name": "exact_match", "args": {}}],
            )
            runs = Run.objects.bulk_create(
                (
                    Run(
                        run_id=f"{eval_run.pk}:{i}",
                        trace_id=f"{eval_run.pk}:{i}",
                        target_id="bench",
                        started=now,
                        elapsed_ms=rng.uniform(5, 500),
                        status="ok",
                        final_answer=f"answer {i}",
                        tokens_in=100,
                        tokens_out=20,
                    )
                    for i in range(n)
                ),
                batch_size=5000,
            )
            EvalResult.objects.bulk_create(
                (
                    EvalResult(
                        eval_run=eval_run,
                        case_id=f"case-{i:06d}",
                        split=("train", "dev", "test")[i % 3],
                        run=run,
                        scores=[to_record(Score("exact_match", ok, passed=ok, explanation="compared"))],
                        passed=ok,
                        status="passed" if ok else "failed",
                        score=float(ok),
                    )
                    for i, (ok, run) in enumerate(zip(passed, runs, strict=True))
                ),
                batch_size=5000,
            )
        ids.append(eval_run.pk)
    return ids[0], ids[1], eval_set.pk


def populate_set_queue(n_runs: int, n_cases: int, seed: int = 13) -> int:
    """A set of ``n_cases`` cases run ``n_runs`` times (variants ``v0``.. two runs each, as a team
    re-running its candidates), with the judge's verdict beside exact_match on every result (it
    disagrees on ~10%, unstable on ~3%) and a tenth of the results reviewed; returns the set id."""
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.db import transaction
    from django.utils import timezone

    from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet, Review
    from apps.traces.models import Run

    rng = random.Random(seed)
    now = timezone.now()
    reviewer, _ = User.objects.get_or_create(username="bench-reviewer")
    with transaction.atomic():
        eval_set = EvalSet.objects.create(name="bench-set-queue", content_hash="bench-q")
        EvalCase.objects.bulk_create(
            (
                EvalCase(eval_set=eval_set, case_id=f"gsm-{i:04d}", input={"q": i}, expected=str(i), position=i)
                for i in range(n_cases)
            ),
            batch_size=5000,
        )
    for r in range(n_runs):
        with transaction.atomic():
            eval_run = EvalRun.objects.create(
                eval_set=eval_set,
                target_id="bench",
                variant=f"v{r // 2}",
                split="all",
                status="finished",
                started=now - timedelta(minutes=n_runs - r),
                finished=now,
                n_total=n_cases,
                n_done=n_cases,
            )
            runs = Run.objects.bulk_create(
                (
                    Run(run_id=f"{eval_run.pk}:{i}", trace_id=f"{eval_run.pk}:{i}", target_id="bench", started=now)
                    for i in range(n_cases)
                ),
                batch_size=5000,
            )
            results = []
            for i, run in enumerate(runs):
                ok = rng.random() < 0.7
                judge = (not ok) if rng.random() < 0.1 else ok
                scores = [
                    {"name": "exact_match", "value": ok, "passed": ok, "explanation": "compared"},
                    {
                        "name": "rubric_judge",
                        "value": judge,
                        "passed": judge,
                        "explanation": "the answer follows from the question " * 4,
                        "metadata": {"unstable": rng.random() < 0.03, "samples": 3},
                    },
                ]
                status = "passed" if ok and judge else "failed"
                results.append(
                    EvalResult(
                        eval_run=eval_run,
                        case_id=f"gsm-{i:04d}",
                        run=run,
                        scores=scores,
                        passed=status == "passed",
                        status=status,
                        score=float(ok),
                    )
                )
            made = EvalResult.objects.bulk_create(results, batch_size=5000)
            Review.objects.bulk_create(
                (
                    Review(result=x, eval_run=eval_run, case_id=x.case_id, reviewer=reviewer, verdict="pass")
                    for x in made
                    if rng.random() < 0.1
                ),
                batch_size=5000,
            )
    return eval_set.pk


def set_queue_figures(set_id: int, client: object, repeat: int) -> list[tuple[str, float, float]]:
    """(label, cold ms, median ms) of the set queue's page (every run, then the latest per
    variant), its HTMX panel mid-queue and a save that moves on. The cold figure of the first
    page includes reading every run's queue order once (cached afterwards, per run)."""
    from django.urls import reverse

    from apps.evals.models import EvalRun, EvalSet
    from apps.evals.queries.review_queue import ReviewQueue
    from apps.evals.queries.set_queue import set_queue_runs

    page = reverse("evals:set_review_queue", args=[set_id])
    figures = []
    cold, median = time_requests(lambda: client.get(f"{page}?runs=all"), repeat)  # type: ignore[attr-defined]
    n_runs = EvalRun.objects.filter(eval_set_id=set_id).count()
    figures.append((f"page set review queue ({n_runs} runs)", cold, median))
    scope = set_queue_runs(EvalSet.objects.get(pk=set_id), "all")
    items = ReviewQueue(scope.runs).order()
    middle = items[len(items) // 2].result_id
    panel = f"{page}?runs=all&filter=all&result={middle}"
    headers = {"HX-Request": "true", "HX-Target": "review-panel"}
    cold, median = time_requests(lambda: client.get(panel, headers=headers), repeat)  # type: ignore[attr-defined]
    figures.append(("page set review queue, htmx panel", cold, median))
    cold, median = time_requests(lambda: client.get(page), repeat)  # type: ignore[attr-defined]
    figures.append(("page set review queue, latest runs", cold, median))
    targets = iter(item.result_id for item in items[1 :: max(1, len(items) // (repeat + 2))])

    def save() -> object:
        url = reverse("evals:save_set_review", args=[set_id, next(targets)]) + "?runs=all&filter=all"
        return client.post(url, {"verdict": "fail", "comment": "bench", "go": "next"}, headers=headers)  # type: ignore[attr-defined]

    cold, median = time_requests(save, repeat)
    figures.append(("set review queue, save and next", cold, median))
    return figures


def time_requests(fetch: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(cold ms, median warm ms) of ``repeat`` + 1 calls; each call must answer 200."""
    samples = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        response = fetch()
        samples.append((time.perf_counter() - start) * 1000)
        status = getattr(response, "status_code", None)
        if status != 200:
            raise RuntimeError(f"request failed with {status}: {getattr(response, 'content', b'')[:300]!r}")
    return samples[0], statistics.median(samples[1:])


def page_url(name: str, *args: object) -> str | None:
    from django.urls import NoReverseMatch, reverse

    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


async def websocket_latency(eval_run_id: str, cookie: str, rounds: int) -> list[float]:
    """Latencies (ms) from a result committed to its frame received, on a live run."""
    from channels.db import database_sync_to_async
    from channels.testing import WebsocketCommunicator
    from django.db.models import Max
    from django.utils import timezone

    from apps.evals.models import EvalResult, EvalRun
    from apps.traces.models import Run
    from evalcore.serial import to_record
    from evalcore.types import Score
    from evalsite.asgi import application

    @database_sync_to_async
    def prepare() -> int:
        EvalRun.objects.filter(pk=eval_run_id).update(status="running")
        return EvalResult.objects.filter(eval_run_id=eval_run_id).aggregate(m=Max("id"))["m"]

    @database_sync_to_async
    def write(i: int) -> None:
        run = Run.objects.create(run_id=f"{eval_run_id}:live{i}", trace_id="t", started=timezone.now())
        EvalResult.objects.create(
            eval_run_id=eval_run_id,
            case_id=f"live-{i}",
            run=run,
            passed=True,
            status="passed",
            scores=[to_record(Score("exact_match", True, passed=True, explanation="live"))],
            score=1.0,
        )

    @database_sync_to_async
    def finish() -> None:
        EvalRun.objects.filter(pk=eval_run_id).update(status="finished")

    after = await prepare()
    communicator = WebsocketCommunicator(
        application,
        f"/ws/eval/runs/{eval_run_id}/?after={after}",
        headers=[(b"origin", b"http://testserver"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await communicator.connect(timeout=10)
    if not connected:
        raise SystemExit("websocket refused")
    latencies = []
    for i in range(rounds):
        await asyncio.sleep(random.uniform(0, 0.25))  # land anywhere in the poll cycle
        await write(i)
        start = time.perf_counter()
        while True:
            frame = await communicator.receive_from(timeout=5)
            if f"live-{i}" in frame:
                break
        latencies.append((time.perf_counter() - start) * 1000)
        await communicator.receive_nothing(timeout=0.05)  # drain the summary frame
    await finish()
    await communicator.disconnect()
    return latencies


def report(label: str, cold: float, median: float, target: float) -> bool:
    ok = median <= target
    print(
        f"{label:<38} cold {cold:8.1f} ms   median {median:8.1f} ms   target {target:6.0f} ms   "
        f"ratio {median / target:5.2f}  {'ok' if ok else 'MISS'}"
    )
    return ok


REPROS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "repros"


def repro_case_pages() -> list[tuple[str, str]]:
    """Store one result each for repros bh-20 and ho-09 (their real case data; bh-20's output as
    its ``log_lines`` target gives it) and return ``(label, case page URL)`` pairs."""
    import json

    from django.urls import reverse

    from tests.apps.factories import make_eval_run, make_eval_set

    pages = []
    bh20 = json.loads((REPROS / "bh-20-repeated-lines.jsonl").read_text().splitlines()[0])
    n = int(bh20["input"])
    bh20_output = "ok\n" * (n // 2) + "FAIL\n" + "ok\n" * (n // 2)
    ho09 = json.loads((REPROS / "ho-09-portal-code-case-page" / "cases.jsonl").read_text().splitlines()[0])
    ho09_output = ho09["input"] + "    return max(low, min(value, high))\n"
    for label, case, output in (
        ("page case bh-20 (18 KB repeated lines)", bh20, bh20_output),
        ("page case ho-09 (code vs dict)", ho09, ho09_output),
    ):
        eval_set = make_eval_set(f"bench-{label.split()[2]}", 1)
        eval_set.cases.update(input=case["input"], expected=case["expected"])
        eval_run = make_eval_run(eval_set, [False], outputs=[output])
        pages.append((label, reverse("evals:result", args=[eval_run.pk, eval_run.results.get().pk])))
    return pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000, help="cases per run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="warm requests per figure (default: %(default)s)")
    parser.add_argument("--set-runs", type=int, default=20, help="runs of the review-queue set (default: %(default)s)")
    parser.add_argument(
        "--set-cases", type=int, default=1319, help="cases of the review-queue set (default: %(default)s)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a median misses its target")
    parser.add_argument("--db", default=None, help="keep the database in this file and reuse it on the next run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-portal-") as tmp:
        db_path = Path(args.db) if args.db else Path(tmp) / "bench.sqlite3"
        reuse = db_path.exists()
        setup_django(db_path)
        from django.contrib.auth.models import Group, User
        from django.test import Client

        from apps.evals.models import EvalRun

        start = time.perf_counter()
        if reuse and EvalRun.objects.filter(eval_set__name="bench-100k").count() == 2:
            run_a, run_b = (
                EvalRun.objects.filter(eval_set__name="bench-100k").order_by("variant").values_list("pk", flat=True)
            )
            EvalRun.objects.filter(pk__in=[run_a, run_b]).update(status="finished")
            print(f"reusing {db_path}")
        else:
            run_a, run_b, _ = populate(args.cases)
            from django.db import connection

            backend = "SQLite WAL" if connection.vendor == "sqlite" else connection.vendor
            print(f"populated 2 runs x {args.cases:,} results in {time.perf_counter() - start:.1f} s ({backend})")

        user, _ = User.objects.get_or_create(username="bench")
        user.groups.add(Group.objects.get(name="member"))
        client = Client()
        client.force_login(user)
        cookie = client.cookies["sessionid"].value

        results: list[bool] = []

        def measure(label: str, url: str | None, target: float, *, page: bool = False, **kwargs: object) -> None:
            if url is None:
                print(f"{label}: URL not installed, skipped")
                return
            try:
                cold, median = time_requests(lambda: client.get(url, **kwargs), args.repeat)
            except Exception as exc:  # the pages app may be mid-way: report, do not hide the API figures
                if not page:
                    raise
                print(f"{label}: skipped ({type(exc).__name__}: {str(exc)[:120]})")
                return
            results.append(report(label, cold, median, target))

        measure("API run detail, first page", f"/api/eval/runs/{run_a}", TARGET_DETAIL_MS)
        detail_page = page_url("evals:eval_run", run_a)
        measure("page run detail, first page", detail_page, TARGET_DETAIL_MS, page=True)
        measure(
            "page run detail, htmx partial", detail_page, TARGET_DETAIL_MS, page=True, headers={"HX-Request": "true"}
        )
        measure("API compare, first page", f"/api/eval/compare?a={run_a}&b={run_b}", TARGET_COMPARE_MS)
        compare_page = page_url("evals:compare")
        measure(
            "page compare, first page",
            f"{compare_page}?a={run_a}&b={run_b}" if compare_page else None,
            TARGET_COMPARE_MS,
            page=True,
        )

        # the case pages of repros bh-20 (18 KB of repeated lines, one changed) and ho-09 (a code
        # case: a dict expected against a code string), from their data in tests/fixtures/repros
        for label, case_url in repro_case_pages():
            measure(label, case_url, TARGET_DETAIL_MS + 100, page=True)

        from apps.evals.models import EvalCase, EvalSet

        set_pk = EvalSet.objects.get(name="bench-100k").pk
        case_pk = EvalCase.objects.filter(eval_set_id=set_pk).order_by("-position").values_list("pk", flat=True)[0]
        staff, _ = User.objects.get_or_create(username="bench-staff", defaults={"is_staff": True, "is_superuser": True})
        admin_client = Client()
        admin_client.force_login(staff)
        from django.contrib import admin as django_admin

        # the case list's real last page (a page past it redirects), whatever --cases is
        per_page = django_admin.site.get_model_admin(EvalCase).list_per_page
        last_page = max(1, -(-EvalCase.objects.filter(eval_set_id=set_pk).count() // per_page))
        for label, url in (
            ("admin set list", "/admin/evals/evalset/"),
            ("admin set change page (100k cases)", f"/admin/evals/evalset/{set_pk}/change/"),
            ("admin case list, filtered on the set", f"/admin/evals/evalcase/?eval_set__id__exact={set_pk}"),
            ("admin case list, last page", f"/admin/evals/evalcase/?eval_set__id__exact={set_pk}&p={last_page}"),
            ("admin case change page", f"/admin/evals/evalcase/{case_pk}/change/"),
            ("admin run list", "/admin/evals/evalrun/"),
            ("admin result list", "/admin/evals/evalresult/"),
        ):
            cold, median = time_requests(lambda url=url: admin_client.get(url), args.repeat)
            results.append(report(label, cold, median, TARGET_ADMIN_MS))

        from apps.evals.models import EvalSet as _EvalSet

        queue_set = _EvalSet.objects.filter(name="bench-set-queue").first()
        if queue_set is None:
            start = time.perf_counter()
            queue_set_id = populate_set_queue(args.set_runs, args.set_cases)
            print(
                f"populated {args.set_runs} runs x {args.set_cases:,} results for the set review queue "
                f"in {time.perf_counter() - start:.1f} s"
            )
        else:
            queue_set_id = queue_set.pk
        for label, cold, median in set_queue_figures(queue_set_id, client, args.repeat):
            results.append(report(label, cold, median, TARGET_SET_QUEUE_MS))

        latencies = asyncio.run(websocket_latency(run_b, cookie, rounds=max(5, args.repeat)))
        median = statistics.median(latencies)
        print(
            f"{'websocket update latency':<38} max  {max(latencies):8.1f} ms   median {median:8.1f} ms   "
            f"target {TARGET_WS_MS:6.0f} ms   ratio {max(latencies) / TARGET_WS_MS:5.2f}  "
            f"{'ok' if max(latencies) <= TARGET_WS_MS else 'MISS'}"
        )
        results.append(max(latencies) <= TARGET_WS_MS)
        from django.db import connections

        connections.close_all()
    return 1 if args.check and not all(results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
