"""Benchmark: the run page's text search on a 100,000-case run whose texts mix scripts.

Creates a temporary SQLite database (WAL, the embedded default; PostgreSQL with ``DATABASE_URL``),
bulk-inserts one set of N cases and one finished run over it whose case inputs and outputs are
sentences in Chinese, Japanese, Korean, English and Russian, then measures the server time of
the run page (HTML and the JSON API) filtered by ``?text=``:

* a search before the run is indexed (the page scans up to ``SCAN_LIMIT`` results the index
  lacks and says "indexing…"; a read never writes), then indexing the whole run as the sweeper
  does (:func:`apps.evals.worker.sweeper.index_pending`, CJK runs written as bigrams): printed,
  no target;
* the run page without a text filter, for scale;
* a word inside a Chinese sentence (``天气`` in ``今天天气很好…``), a Japanese and a Korean one,
  a one-character CJK query, an English prefix and two words together (target <= 200 ms each,
  the run page's own target, median of ``--repeat`` warm requests).

Run: ``.venv/bin/python bench/bench_search.py [--cases N] [--repeat R] [--check]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_portal import report, setup_django, time_requests  # noqa: E402

TARGET_SEARCH_MS = 200.0

_ZH_PLACES = ["公园", "北京", "上海", "学校", "医院", "图书馆", "海边", "山上", "餐厅", "车站"]
_ZH_WEATHER = ["天气很好", "下雨了", "很冷", "很热", "有风", "阴天"]
_JA = ["東京の天気は晴れです", "大阪で友達に会いました", "京都のお寺を見ました", "新しい本を読んでいます"]
_KO = ["서울에서 날씨가 좋습니다", "부산에서 친구를 만났어요", "오늘은 비가 옵니다"]
_EN = ["The weather in Paris is sunny today", "A storm is coming to the coast", "Prices rose by 3 percent"]
_RU = ["Привет, как дела сегодня", "Погода в Москве хорошая"]


def sentence(rng: random.Random) -> str:
    """One sentence in one of five languages (Chinese twice as often as the others)."""
    kind = rng.randrange(6)
    if kind < 2:
        return f"今天{rng.choice(_ZH_WEATHER)}，我们去{rng.choice(_ZH_PLACES)}散步吧"
    return rng.choice((_JA, _KO, _EN, _RU)[kind - 2])


def populate(n: int, seed: int = 17) -> str:
    """One set of ``n`` cases and one finished run over it; returns the run's id."""
    from django.db import transaction
    from django.utils import timezone

    from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
    from apps.traces.models import Run

    rng = random.Random(seed)
    now = timezone.now()
    with transaction.atomic():
        eval_set = EvalSet.objects.create(name="bench-search", content_hash="bench-search")
        EvalCase.objects.bulk_create(
            (
                EvalCase(eval_set=eval_set, case_id=f"case-{i:06d}", input=sentence(rng), expected="x", position=i)
                for i in range(n)
            ),
            batch_size=5000,
        )
        eval_run = EvalRun.objects.create(
            eval_set=eval_set,
            target_id="bench",
            split="all",
            status="finished",
            started=now,
            finished=now,
            n_total=n,
            n_done=n,
            n_passed=n,
            scorer_specs=[{"name": "exact_match", "args": {}}],
        )
        runs = Run.objects.bulk_create(
            (
                Run(
                    run_id=f"{eval_run.pk}:{i}",
                    trace_id=f"{eval_run.pk}:{i}",
                    target_id="bench",
                    started=now,
                    elapsed_ms=10.0,
                    status="ok",
                    final_answer=sentence(rng),
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
                    run=run,
                    scores=[],
                    passed=True,
                    status="passed",
                    score=1.0,
                )
                for i, run in enumerate(runs)
            ),
            batch_size=5000,
        )
    return eval_run.pk


def main() -> int:
    """Populate, then print the figures; 1 with ``--check`` when a median misses its target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000, help="cases of the run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="warm requests per figure (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a median misses its target")
    parser.add_argument("--db", default=None, help="keep the database in this file and reuse it on the next run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        db_path = Path(args.db) if args.db else Path(tmp) / "bench.sqlite3"
        reuse = db_path.exists()
        setup_django(db_path)
        from django.contrib.auth.models import Group, User
        from django.db import connection
        from django.test import Client
        from django.urls import reverse

        from apps.evals.models import EvalResult, EvalRun, SearchIndexState
        from apps.evals.queries.search import ResultQuery, search_results
        from apps.evals.results.search_index import FTS_TABLE
        from apps.evals.worker.sweeper import index_pending

        backend = "SQLite WAL" if connection.vendor == "sqlite" else connection.vendor
        found = EvalRun.objects.filter(eval_set__name="bench-search").values_list("pk", flat=True).first()
        if reuse and found:
            run_id = found
            SearchIndexState.objects.all().delete()  # the sweep below indexes again
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {FTS_TABLE}")
            print(f"reusing {db_path} ({backend})")
        else:
            start = time.perf_counter()
            run_id = populate(args.cases)
            print(f"populated 1 run x {args.cases:,} results in {time.perf_counter() - start:.1f} s ({backend})")
        user, _ = User.objects.get_or_create(username="bench")
        user.groups.add(Group.objects.get(name="viewer"))
        client = Client()
        client.force_login(user)
        page = reverse("evals:eval_run", args=[run_id])

        start = time.perf_counter()
        first = client.get(page, {"text": "天气"})
        elapsed = (time.perf_counter() - start) * 1000
        print(f"{'search before indexing (scans)':<38} {elapsed:8.1f} ms ({first.status_code})")
        start = time.perf_counter()
        index_pending()
        elapsed = (time.perf_counter() - start) * 1000
        print(f"{'the sweeper indexes the whole run':<38} {elapsed:8.1f} ms")

        results = []
        cold, median = time_requests(lambda: client.get(page), args.repeat)
        results.append(report("page, no text filter (for scale)", cold, median, TARGET_SEARCH_MS))
        eval_run = EvalRun.objects.get(pk=run_id)
        for word in ("天气", "公园", "天気", "날씨", "天", "sun", "weather paris"):
            matches = search_results(EvalResult.objects.filter(eval_run=eval_run), eval_run, ResultQuery(text=word))
            cold, median = time_requests(lambda word=word: client.get(page, {"text": word}), args.repeat)
            results.append(report(f"page ?text={word} ({matches.count():,} cases)", cold, median, TARGET_SEARCH_MS))
        cold, median = time_requests(lambda: client.get(f"/api/eval/runs/{run_id}", {"text": "天气"}), args.repeat)
        results.append(report("API ?text=天气", cold, median, TARGET_SEARCH_MS))
    return 1 if args.check and not all(results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
