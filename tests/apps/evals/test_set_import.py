"""A case-bank file streamed into its set (apps.evals.sets.file_import): a new set and the same file
again never hold the set in memory; anything else, and a bad file, go through the loader whole,
so what is stored and what is reported are exactly what the whole-file import gives."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from apps.evals.models import EvalCase, EvalSet, SetVersion, SetVersionCase
from apps.evals.runs.casestream import CaseStream
from apps.evals.sets import file_import as set_import
from apps.evals.sets.cases import import_cases, iter_set_cases, set_cases
from apps.evals.sets.file_import import import_case_file, stored_content_hash
from evalcore.loaders import CaseBankError, load_cases

pytestmark = pytest.mark.django_db


def write(path: Path, n: int, *, start: int = 0, extra: str = "") -> Path:
    rows = [
        {"id": f"c{i}", "input": {"q": f"question é {i}"}, "expected": f"answer {i}", "tags": ["t"] if i % 2 else []}
        for i in range(start, start + n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + extra)
    return path


def no_whole_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was loaded whole")

    monkeypatch.setattr(set_import, "load_cases", refuse)


def rows(name: str) -> list[tuple[object, ...]]:
    return list(
        EvalCase.objects.filter(eval_set__name=name)
        .order_by("position")
        .values_list("case_id", "input", "expected", "has_expected", "tags", "split", "metadata", "position")
    )


def test_a_new_set_is_streamed_and_stored_as_the_whole_file_import_stores_it(tmp_path, monkeypatch):
    path = write(tmp_path / "bank.jsonl", 2500)
    bank = load_cases(path)
    import_cases(name="whole", cases=bank.cases, content_hash=bank.content_hash, source_path=str(path))
    no_whole_load(monkeypatch)
    summary = import_case_file(str(path))
    assert (summary.eval_set.name, summary.created, summary.updated, summary.removed) == ("bank", 2500, 0, 0)
    assert summary.eval_set.content_hash == bank.content_hash == stored_content_hash(summary.eval_set.pk)
    assert rows("bank") == rows("whole")
    version = SetVersion.objects.get(eval_set=summary.eval_set)
    assert (version.number, version.n_cases, version.added) == (1, 2500, 2500)
    assert SetVersionCase.objects.filter(version=version).count() == 2500


def test_the_same_file_again_writes_nothing(tmp_path, monkeypatch):
    path = write(tmp_path / "bank.jsonl", 300)
    import_case_file(str(path))
    before = rows("bank")
    no_whole_load(monkeypatch)
    summary = import_case_file(str(path))
    assert (summary.created, summary.updated, summary.unchanged) == (0, 0, 300)
    assert rows("bank") == before and SetVersion.objects.count() == 1


def test_a_changed_file_is_imported_whole_with_its_changes(tmp_path):
    import_case_file(str(write(tmp_path / "bank.jsonl", 300)))
    summary = import_case_file(str(write(tmp_path / "bank.jsonl", 300, start=100)))
    assert (summary.created, summary.removed, summary.unchanged) == (100, 100, 200)
    v2 = SetVersion.objects.get(number=2)
    assert (v2.added, v2.removed, v2.updated, v2.n_cases) == (100, 100, 0, 300)


@pytest.mark.parametrize(
    "extra, message",
    [
        ('{"id": "c5", "input": "again"}\n', "duplicate case id 'c5' (first seen on line 6)"),
        ('{"id": "c9999", "input": "x", "split": "validation"}\n', "unknown split 'validation'"),
        ('{"id": "c9999", "input": "x"\n', "file ends early (truncated)"),
    ],
)
def test_a_bad_file_is_reported_as_the_loader_reports_it_and_stores_nothing(tmp_path, extra, message):
    path = write(tmp_path / "bank.jsonl", 3000, extra=extra)
    with pytest.raises(CaseBankError) as raised:
        import_case_file(str(path))
    with pytest.raises(CaseBankError) as loaded:
        load_cases(path)
    assert str(raised.value) == str(loaded.value) and message in str(raised.value)
    assert not EvalSet.objects.exists() and not EvalCase.objects.exists()


def test_streaming_a_new_set_holds_a_chunk_not_the_file(tmp_path):
    """Python memory allocated at the peak (tracemalloc: counted, not timed) stays flat from
    5,000 to 25,000 cases (past a chunk either way); a whole-file load grows with the file."""
    peaks = {}
    for n in (5000, 25000):
        path = write(tmp_path / f"bank{n}.jsonl", n)
        tracemalloc.start()
        import_case_file(str(path))
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    tracemalloc.start()
    load_cases(tmp_path / "bank25000.jsonl")
    whole = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # flat: five times the cases, the same peak (give or take what another thread allocates)
    assert peaks[25000] < peaks[5000] + 2_000_000, peaks
    assert peaks[25000] * 4 < whole, (peaks, whole)


def test_a_set_is_read_in_its_order_a_chunk_at_a_time_across_equal_positions():
    eval_set = EvalSet.objects.create(name="s")
    # positions tie (cases added one by one keep position 0) across chunk boundaries
    EvalCase.objects.bulk_create(
        [
            EvalCase(eval_set=eval_set, case_id=f"k{i:03d}", input=i, split="dev" if i % 3 else "test", position=i // 7)
            for i in range(100)
        ]
    )
    for split in ("all", "dev"):
        expected = [c.id for c in set_cases(eval_set, split)]
        chunks = list(iter_set_cases(eval_set.pk, split, chunk=5))
        assert [c.id for chunk in chunks for c in chunk] == expected
        assert max(len(chunk) for chunk in chunks) == 5
        # a small first read (the run's first wave), then full chunks: the same cases in order
        chunks = list(iter_set_cases(eval_set.pk, split, chunk=5, first=2))
        assert [c.id for chunk in chunks for c in chunk] == expected
        assert len(chunks[0]) == 2 and max(len(chunk) for chunk in chunks[1:]) == 5


@pytest.mark.django_db(transaction=True)
def test_a_case_stream_reads_ahead_on_its_own_thread_and_closes_it():
    import asyncio

    eval_set = EvalSet.objects.create(name="s")
    EvalCase.objects.bulk_create(
        [EvalCase(eval_set=eval_set, case_id=f"c{i}", input=i, split="dev") for i in range(25)]
    )
    stream = CaseStream(eval_set.pk, "dev", chunk=4)

    async def read() -> list[str]:
        return [case.id async for case in stream]

    try:
        assert asyncio.run(read()) == [c.id for c in set_cases(eval_set, "dev")]
    finally:
        stream.close()
    assert stream._pool._shutdown
    # read ahead from before the loop starts (the run's set-up): the same cases; a stream closed
    # unread ends its thread too
    ahead = CaseStream(eval_set.pk, "dev", chunk=4)
    ahead.prefetch()
    try:
        assert asyncio.run(_read(ahead)) == [c.id for c in set_cases(eval_set, "dev")]
    finally:
        ahead.close()
    unread = CaseStream(eval_set.pk, "dev", chunk=4)
    unread.prefetch()
    unread.close()
    assert unread._pool._shutdown


async def _read(stream: CaseStream) -> list[str]:
    return [case.id async for case in stream]


@pytest.mark.django_db(transaction=True)
def test_the_model_a_target_reports_is_recorded_on_its_run_without_reading_every_result(tmp_path):
    """The writer keeps the first model a run reported (one case of six reports one)."""
    from django.core.management import call_command

    from apps.evals.models import EvalRun

    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "a.py").write_text(
        "from evalcore.discovery import TargetSpec\n"
        "from evalcore.types import TargetOutput\n"
        "def t(x):\n"
        "    return TargetOutput(x, model='m-reported') if x['q'] == 'question é 3' else x\n"
        "spec = TargetSpec(id='t', target=t)\n"
    )
    path = write(tmp_path / "bank.jsonl", 6)
    call_command("eval", str(agents), "--set", str(path), "--split", "all", "--allow-test", "--quiet")
    assert EvalRun.objects.get().model == "m-reported"
