"""Exports (issue 14 §2, issue 13 §2): a run, a comparison, a review queue and a set, as JSONL,
CSV and Parquet (a set also as an ADK eval set), from the API and the pages; each re-imports to
the same cases."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from apps.evals.exports.downloads import run_download
from apps.evals.models import EvalCase, EvalResult, EvalSet
from apps.evals.runs.reviews import save_review
from apps.traces.models import Run
from evalcore.loaders import load_cases
from tests.apps.factories import make_eval_run, make_eval_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def eval_set():
    """Cases of every shape a round trip must keep: object and text inputs, no expected value,
    a null expected value, tags, metadata."""
    eval_set = make_eval_set(n_cases=4)
    EvalCase.objects.filter(eval_set=eval_set, case_id="c0").update(expected={"answer": 0, "unit": None})
    EvalCase.objects.filter(eval_set=eval_set, case_id="c1").update(
        input="plain text, with a comma", expected="two", metadata={"source": "x", "nested": {"k": [1, 2]}}
    )
    EvalCase.objects.filter(eval_set=eval_set, case_id="c2").update(expected=None, has_expected=False)
    EvalCase.objects.filter(eval_set=eval_set, case_id="c3").update(expected=None, tags=["odd", "hard"])
    return eval_set


def body(response) -> bytes:
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content)


def canonical(cases) -> list[tuple]:
    return sorted((c.id, json.dumps(c.input), repr(c.expected), c.tags, c.split, c.metadata) for c in cases)


def stored(eval_set: EvalSet) -> list[tuple]:
    from apps.evals.results.readback import stored_case

    return canonical(stored_case(row) for row in EvalCase.objects.filter(eval_set=eval_set))


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_run_export_holds_outputs_scores_and_reviews_and_reads_back_as_the_cases(
    client, viewer, member, eval_set, fmt, tmp_path
):
    run = make_eval_run(eval_set, [True, False, "errored", "unscored"], scores=[0.9, 0.2, None, 0.5])
    save_review(EvalResult.objects.get(eval_run=run, case_id="c1"), member, verdict="pass", comment="fine by me")
    client.force_login(viewer)
    response = client.get(f"/api/eval/runs/{run.pk}/export?format={fmt}")
    data = body(response)
    suffix = {"jsonl": "jsonl", "csv": "csv", "parquet": "parquet"}[fmt]
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}.{suffix}"'
    path = tmp_path / f"exported.{suffix}"
    path.write_bytes(data)

    loaded = load_cases(path, set_name=eval_set.name)
    assert canonical(loaded.cases) == stored(eval_set)
    assert loaded.format == fmt

    if fmt == "jsonl":
        rows = [json.loads(line) for line in data.decode().splitlines()]
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(data.decode())))
    else:
        rows = pq.read_table(io.BytesIO(data)).to_pylist()
    assert len(rows) == 4
    if fmt == "jsonl":
        c1 = rows[1]["evalsite"]
        assert (c1["status"], c1["passed"], c1["output"], c1["human_label"]) == ("failed", False, "answer c1", "pass")
        assert c1["reviews"][0]["reviewer"] == "member" and c1["reviews"][0]["comment"] == "fine by me"
        assert c1["values"] == {"exact_match": False, "similarity": 0.2}
        assert rows[2]["evalsite"]["error"] == {"type": "ValueError", "message": "boom"}
        assert "expected" not in rows[2]  # the case has no expected value
    else:
        c1 = rows[1]
        assert c1["evalsite.status"] == "failed" and c1["evalsite.human_label"] == "pass"
        assert c1["evalsite.values.similarity"] in ("0.2", "0.2")
        assert c1["evalsite.passed"] in ("false", False)


def test_a_run_with_repeats_reads_back_once_per_case(eval_set, tmp_path):
    run = make_eval_run(eval_set, [True, False])
    first = EvalResult.objects.get(eval_run=run, case_id="c0")
    trace = Run.objects.create(run_id=f"{run.pk}:c0:1", trace_id="t", started=first.run.started, final_answer="again")
    EvalResult.objects.create(
        eval_run=run, case_id="c0", repeat_index=1, run=trace, scores=[], passed=False, status="unscored"
    )
    path = tmp_path / "run.jsonl"
    call_command("export", run.pk, "-o", str(path))
    lines = path.read_text().splitlines()
    assert [json.loads(line)["evalsite"]["repeat"] for line in lines] == [0, 0, 1]
    assert [case.id for case in load_cases(path).cases] == ["c0", "c1"]


def test_the_comparison_aligns_cases_with_their_flip_kind(client, viewer, eval_set, tmp_path):
    run_a = make_eval_run(eval_set, [True, False, True], case_ids=["c0", "c1", "c2"], scores=[0.5, 0.5, 0.5])
    run_b = make_eval_run(eval_set, [False, True, True], case_ids=["c0", "c1", "c3"], scores=[0.2, 0.9, 0.5])
    client.force_login(viewer)
    data = body(client.get(f"/api/eval/compare/export?a={run_a.pk}&b={run_b.pk}&format=jsonl"))
    rows = {row["id"]: row["evalsite"] for row in map(json.loads, data.decode().splitlines())}
    assert {cid: row["kind"] for cid, row in rows.items()} == {
        "c0": "regression",
        "c1": "improvement",
        "c2": "only_a",
        "c3": "only_b",
    }
    assert rows["c0"]["a"]["passed"] is True and rows["c0"]["b"]["passed"] is False
    assert rows["c1"]["score_delta"] == pytest.approx((0.9 + 1) / 2 - (0.5 + 0) / 2)
    assert rows["c2"]["b"] is None and rows["c3"]["a"] is None

    text = body(client.get(f"/api/eval/compare/export?a={run_a.pk}&b={run_b.pk}&format=csv")).decode()
    table = list(csv.DictReader(io.StringIO(text)))
    assert [(r["id"], r["evalsite.kind"], r["evalsite.a.status"], r["evalsite.b.status"]) for r in table] == [
        ("c0", "regression", "passed", "failed"),
        ("c1", "improvement", "failed", "passed"),
        ("c2", "only_a", "passed", ""),
        ("c3", "only_b", "", "passed"),
    ]
    path = tmp_path / "compare.csv"
    path.write_text(text)
    assert sorted(c.id for c in load_cases(path).cases) == ["c0", "c1", "c2", "c3"]

    other = make_eval_run(make_eval_set("other", 2), [True, True])
    refused = client.get(f"/api/eval/compare/export?a={run_a.pk}&b={other.pk}")
    assert refused.status_code == 400 and "same set" in refused.json()["message"]


def test_the_review_queue_export_follows_the_queue_with_its_reviews(client, member, eval_set):
    run = make_eval_run(eval_set, [True, False, "errored", True])
    save_review(EvalResult.objects.get(eval_run=run, case_id="c3"), member, verdict="fail", comment="actually wrong")
    client.force_login(member)
    data = body(client.get(f"/api/eval/runs/{run.pk}/review-queue/export?format=jsonl"))
    rows = [json.loads(line) for line in data.decode().splitlines()]
    assert [(r["id"], r["evalsite"]["queue_reason"], r["evalsite"]["position"]) for r in rows] == [
        ("c2", "errored", 1),
        ("c1", "failed", 2),
        ("c0", None, 3),
        ("c3", None, 4),
    ]
    assert rows[3]["evalsite"]["reviews"][0]["verdict"] == "fail"
    reviewed = body(client.get(f"/api/eval/runs/{run.pk}/review-queue/export?format=csv&filter=reviewed"))
    assert [r["id"] for r in csv.DictReader(io.StringIO(reviewed.decode()))] == ["c3"]
    bad = client.get(f"/api/eval/runs/{run.pk}/review-queue/export?filter=nope")
    assert bad.status_code == 400 and bad.json()["field"] == "filter"


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_set_export_reads_back_as_the_same_cases(client, viewer, eval_set, fmt, tmp_path):
    client.force_login(viewer)
    path = tmp_path / f"set.{fmt}"
    path.write_bytes(body(client.get(f"/api/eval/sets/{eval_set.pk}/export?format={fmt}")))
    assert canonical(load_cases(path).cases) == stored(eval_set)


def test_every_format_keeps_text_that_looks_like_a_number_as_text(client, viewer, tmp_path):
    """CSV writes such a text as a JSON string (``"0"``), which its reader decodes."""
    eval_set = make_eval_set(n_cases=1)  # expected "0": text
    client.force_login(viewer)
    found = {}
    for fmt in ("jsonl", "csv", "parquet"):
        path = tmp_path / f"set.{fmt}"
        path.write_bytes(body(client.get(f"/api/eval/sets/{eval_set.pk}/export?format={fmt}")))
        found[fmt] = load_cases(path).cases[0].expected
    assert found == {"jsonl": "0", "csv": "0", "parquet": "0"}


def test_a_set_exports_as_an_adk_eval_set_that_adk_files_read_back_from(client, viewer, tmp_path):
    fixture = (
        Path(__file__).resolve().parents[2]
        / "fixtures/adk/adk-python__home_automation_agent__simple_multi_turn_conversation.test.json"
    )
    call_command("import", str(fixture), "--name", "adk-set")
    eval_set = EvalSet.objects.get(name="adk-set")
    client.force_login(viewer)
    response = client.get(f"/api/eval/sets/{eval_set.pk}/export?format=adk")
    assert response["Content-Disposition"] == 'attachment; filename="adk-set.evalset.json"'
    path = tmp_path / "again.evalset.json"
    path.write_bytes(body(response))
    document = json.loads(path.read_text())
    source = json.loads(fixture.read_text())  # the source's id, name and description, not the set's name
    head = [document[k] for k in ("eval_set_id", "name", "description")]
    assert head == [source["eval_set_id"], source["name"], None]
    assert len(document["eval_cases"]) == 1
    again, before = load_cases(path).cases, load_cases(fixture).cases
    assert [(c.id, c.input, c.expected, c.tags) for c in again] == [(c.id, c.input, c.expected, c.tags) for c in before]


def test_an_imported_adk_eval_set_exports_with_the_source_id_name_and_description(client, viewer, tmp_path):
    """Issue 23: the ADK export of an imported eval set kept our set name for all three."""
    fixture = Path(__file__).resolve().parents[2] / "fixtures/adk/adk-python__live_non_blocking_tool_agent.evalset.json"
    source = json.loads(fixture.read_text())
    call_command("import", str(fixture), "--name", "ours")
    client.force_login(viewer)
    eval_set = EvalSet.objects.get(name="ours")
    document = json.loads(body(client.get(f"/api/eval/sets/{eval_set.pk}/export?format=adk")))
    head = {key: document[key] for key in ("eval_set_id", "name", "description")}
    assert head == {key: source[key] for key in ("eval_set_id", "name", "description")}
    assert head["eval_set_id"] == "live_non_blocking_tool_agent" != "ours"
    again = tmp_path / "again.evalset.json"  # and once more: the source's still
    again.write_text(json.dumps(document))
    call_command("import", str(again), "--name", "ours-again")
    twice = EvalSet.objects.get(name="ours-again")
    document = json.loads(body(client.get(f"/api/eval/sets/{twice.pk}/export?format=adk")))
    assert {key: document[key] for key in ("eval_set_id", "name", "description")} == head

    # a case from elsewhere joins the set: no single source, so the set's own name and description
    EvalCase.objects.create(eval_set=eval_set, case_id="mine", input="hi", split="dev", metadata={}, position=9)
    EvalSet.objects.filter(pk=eval_set.pk).update(description="our words")
    document = json.loads(body(client.get(f"/api/eval/sets/{eval_set.pk}/export?format=adk")))
    assert (document["eval_set_id"], document["name"], document["description"]) == ("ours", "ours", "our words")


def test_exports_check_roles_ids_and_formats(client, viewer, outsider, eval_set):
    run = make_eval_run(eval_set, [True])
    url = f"/api/eval/runs/{run.pk}/export"
    assert client.get(url).status_code == 401
    client.force_login(outsider)
    assert client.get(url).status_code == 403
    client.force_login(viewer)
    assert client.get("/api/eval/runs/nope/export").status_code == 404
    bad = client.get(url + "?format=xlsx")
    assert bad.status_code == 400 and bad.json()["field"] == "format" and "jsonl, csv, parquet" in bad.json()["message"]
    assert client.get(f"/api/eval/sets/{eval_set.pk}/export?format=xlsx").status_code == 400
    assert client.get(f"/api/eval/sets/{eval_set.pk}/export?format=adk").status_code == 200
    assert client.post(url).status_code == 405


def test_private_traces_are_left_out_for_those_who_cannot_read_them(client, viewer, staff, eval_set):
    run = make_eval_run(eval_set, [True, False])
    Run.objects.filter(run_id=f"{run.pk}:c1").update(private=True, owner=staff)
    client.force_login(viewer)
    rows = body(client.get(f"/api/eval/runs/{run.pk}/export")).decode().splitlines()
    assert [json.loads(r)["id"] for r in rows] == ["c0"]
    client.force_login(staff)
    assert len(body(client.get(f"/api/eval/runs/{run.pk}/export")).decode().splitlines()) == 2


def test_the_pages_link_their_exports(client, viewer, eval_set):
    run_a = make_eval_run(eval_set, [True, False])
    run_b = make_eval_run(eval_set, [False, False])
    client.force_login(viewer)
    page = client.get(f"/runs/{run_a.pk}/").content.decode()
    for fmt in ("jsonl", "csv", "parquet"):
        assert f"/api/eval/runs/{run_a.pk}/export?format={fmt}" in page
    assert f"/api/eval/runs/{run_a.pk}/review-queue/export?format=csv" in page
    compare = client.get(f"/compare/?a={run_a.pk}&b={run_b.pk}").content.decode()
    assert f"/api/eval/compare/export?a={run_a.pk}&amp;b={run_b.pk}&amp;format=csv" in compare
    set_page = client.get(f"/sets/{eval_set.pk}/").content.decode()
    assert f"/api/eval/sets/{eval_set.pk}/export?format=adk" in set_page


def _big_run(name: str, n: int):
    return make_eval_run(make_eval_set(name, n), [True] * n, outputs=["x" * 5000] * n)


def _export_peak(run) -> tuple[int, int]:
    """Bytes exported and the peak of Python memory while exporting (tracemalloc)."""
    import tracemalloc

    download = run_download(run, "csv")
    tracemalloc.start()
    total = sum(len(chunk) for chunk in download.chunks)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return total, peak


def test_a_run_export_streams_with_flat_memory():
    """Exporting 4x the results (5 kB outputs) takes no more memory: rows are read and written a
    chunk at a time (bench/bench_export.py measures 100,000 results through the CLI)."""
    small, large = 1000, 4000
    small_total, small_peak = _export_peak(_big_run("small", small))
    large_total, large_peak = _export_peak(_big_run("large", large))
    assert large_total > 4 * small_total * 0.95 and large_total > large * 5000
    assert large_peak < 1.3 * small_peak, (
        f"peak {small_peak / 1e6:.1f} MB for {small}, {large_peak / 1e6:.1f} MB for {large}"
    )


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_the_export_is_an_async_stream(async_client, eval_set_factory_async):
    """Served by daphne (ASGI), the body is an async iterator: Django would read a sync one whole
    into memory before sending it."""
    viewer, run_id = eval_set_factory_async
    await async_client.aforce_login(viewer)
    response = await async_client.get(f"/api/eval/runs/{run_id}/export?format=jsonl")
    assert response.status_code == 200 and response.is_async
    data = b"".join([chunk async for chunk in response.streaming_content])
    assert [json.loads(line)["id"] for line in data.decode().splitlines()] == ["c0", "c1"]


@pytest.fixture
async def eval_set_factory_async(django_user_model):
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import Group

    from tests.conftest import ensure_roles

    def make():
        ensure_roles()
        user = django_user_model.objects.create_user("asgi-viewer", password="viewer-pass-123")
        user.groups.add(Group.objects.get(name="viewer"))
        return user, make_eval_run(make_eval_set(n_cases=2), [True, False]).pk

    return await sync_to_async(make)()
