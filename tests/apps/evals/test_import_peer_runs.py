"""`evalsite import-run` on other tools' results (issue 29): a real promptfoo results file, OpenAI
Evals API objects as the API reference shows them, and Braintrust experiment events
(tests/fixtures/peer_runs, sources in its SOURCES.md) stored as runs with their scores and
provenance, shown on the run page, compared on the A/B page, re-scored only when asked."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalSet, RunSource, SetVersion

ROOT = Path(__file__).resolve().parents[3]
PEERS = ROOT / "tests" / "fixtures" / "peer_runs"
PROMPTFOO = PEERS / "promptfoo-sample-export.json"
OPENAI = PEERS / "openai-evals-export"
BRAINTRUST = PEERS / "braintrust-experiment-fetch.json"
RIDDLES = "Comparing OpenAI flagship and mini models performance on riddles"


def run_import(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    call_command("import_run", *args)
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.django_db
def test_a_promptfoo_results_file_is_one_run_per_provider_and_prompt_with_every_assertion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, _ = run_import(str(PROMPTFOO), capsys=capsys)
    assert f"-> set {RIDDLES!r} (created): 0 case(s) matched, 2 created, 0 skipped" in out
    assert "created (a new version of the set): auto-a13ed0707ccc, auto-7da7b4bc01ae" in out
    assert "promptfoo 0.118.10, promptfoo results v3 (json)" in out
    runs = {run.target_id: run for run in EvalRun.objects.filter(eval_set__name=RIDDLES)}
    assert sorted(runs) == ["promptfoo:openai:gpt-5", "promptfoo:openai:gpt-5-mini"]
    gpt5 = runs["promptfoo:openai:gpt-5"]
    assert (gpt5.status, gpt5.n_done, gpt5.n_failed, gpt5.variant) == (
        "finished",
        2,
        2,
        "Solve this riddle: {{riddle}}",
    )
    assert gpt5.scorer_specs == []  # never re-scored by itself
    source = RunSource.objects.get(eval_run=gpt5)
    assert (source.tool, source.tool_version, source.file_name) == ("promptfoo", "0.118.10", PROMPTFOO.name)
    assert source.original_ids["eval_id"] == "eval-WJi-2025-10-01T20:08:11"
    assert source.imported_only == ["promptfoo:cost", "promptfoo:latency"]
    assert gpt5.config["aggregates"]["cost"] == 0.0031575  # the prompt's metrics kept
    echo = EvalResult.objects.select_related("run").get(eval_run=gpt5, case_id__in=_case_ids_with("alive with wind"))
    scores = {s["name"]: s for s in echo.scores}
    assert scores["promptfoo:cost"]["passed"] is False  # 0.0021 > 0.002 in the file
    assert scores["promptfoo:latency"]["explanation"] == "Latency 6197ms is greater than threshold 3000ms"
    assert scores["promptfoo:contains"]["metadata"]["equivalent"] == {
        "name": "contains",
        "args": {"value": "echo", "casefold": False},
    }
    assert scores["promptfoo:llm-rubric"]["metadata"]["spec"] == {
        "kind": "promptfoo:llm-rubric",
        "value": "Do not apologize",
    }
    assert scores["promptfoo:latency"]["metadata"]["imported_only"] is True
    assert (echo.run.tokens_in, echo.run.tokens_out, echo.run.elapsed_ms) == (37, 204, 6197)
    assert echo.run.metadata["cost_usd"] == 0.00208625
    # the same file again: nothing written, and it says so
    before = (EvalRun.objects.count(), EvalResult.objects.count(), SetVersion.objects.count())
    out, _ = run_import(str(PROMPTFOO), capsys=capsys)
    assert out.count("already imported (same file") == 2
    assert "2 case(s) matched, 0 created" in out
    assert (EvalRun.objects.count(), EvalResult.objects.count(), SetVersion.objects.count()) == before


def _case_ids_with(word: str) -> list[str]:
    return [c.case_id for c in EvalCase.objects.all() if word in json.dumps(c.input)]


@pytest.mark.django_db(transaction=True)
def test_an_imported_run_shows_its_source_compares_and_is_rescored_only_when_asked(
    capsys: pytest.CaptureFixture[str], admin_client: Client
) -> None:
    run_import(str(PROMPTFOO), capsys=capsys)
    gpt5 = EvalRun.objects.get(target_id="promptfoo:openai:gpt-5")
    page = admin_client.get(f"/runs/{gpt5.pk}/").content.decode()
    assert "imported from promptfoo 0.118.10" in page
    assert PROMPTFOO.name in page and "eval-WJi-2025-10-01T20:08:11" in page
    assert "imported-only scorers (scored by promptfoo, not re-runnable): promptfoo:cost, promptfoo:latency" in page
    with pytest.raises(CommandError, match="imported from promptfoo: its scores are promptfoo's"):
        call_command("rescore", gpt5.pk)
    call_command("rescore", gpt5.pk, "--scorer", '{"name": "contains", "args": {"value": "echo"}}')
    capsys.readouterr()
    native = EvalRun.objects.get(source_eval_run=gpt5)
    assert EvalResult.objects.filter(eval_run=gpt5).count() == 2  # the imported run is kept as it was
    compare = admin_client.get(f"/compare/?a={gpt5.pk}&b={native.pk}")
    assert compare.status_code == 200
    body = compare.content.decode()
    assert gpt5.pk in body and native.pk in body


@pytest.mark.django_db
def test_an_openai_evals_export_folder_makes_the_set_from_the_data_source(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run_import(str(OPENAI), capsys=capsys)
    assert "-> set 'External Data Eval' (created): 0 case(s) matched, 15 created, 0 skipped" in out
    assert "14 case(s) of the run's data have no result in the export" in out
    assert EvalCase.objects.filter(eval_set__name="External Data Eval").count() == 15
    run = EvalRun.objects.get(eval_set__name="External Data Eval")
    assert (run.target_id, run.variant, run.n_done, run.n_passed) == ("openai:gpt-4o-mini", "gpt-4o-mini", 1, 1)
    result = EvalResult.objects.select_related("run").get(eval_run=run)
    assert result.run.final_answer == "Markets" or result.run.metadata["openai_evals"]["status"] == "pass"
    case = EvalCase.objects.get(eval_set__name="External Data Eval", case_id=result.case_id)
    assert (case.input, case.expected) == ("Stock Markets Rally After Positive Economic Data Released", "Markets")
    (score,) = result.scores
    # the grader compares {{item.input}} with the ground truth: no Evalsite equivalent -> imported-only
    assert (score["name"], score["passed"], score["metadata"]["imported_only"]) == ("String check", True, True)
    assert score["metadata"]["spec"]["kind"] == "openai_evals:string_check"
    source = RunSource.objects.get(eval_run=run)
    assert source.original_ids["run_id"] == "evalrun_67abd54d60ec8190832b46859da808f7"
    assert (result.run.tokens_in, result.run.tokens_out) == (323, 2)


@pytest.mark.django_db
def test_braintrust_events_are_measurements_unless_a_pass_threshold_makes_verdicts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_import(str(BRAINTRUST), "--pass-threshold", "0.5", capsys=capsys)
    run = EvalRun.objects.get(eval_set__name="capitals-gpt-4o-mini")
    assert (run.n_passed, run.n_failed, run.n_errored) == (1, 1, 1)
    assert run.target_id == "braintrust:gpt-4o-mini"
    errored = EvalResult.objects.select_related("run").get(eval_run=run, status="errored")
    assert errored.scores == []  # a null score is no score, never a 0
    passed = EvalResult.objects.get(eval_run=run, status="passed")
    factuality = next(s for s in passed.scores if s["name"] == "Factuality")
    assert factuality["explanation"] == "The submission matches the expert answer exactly."
    # the same file into another set, without a threshold: no verdict, so unscored (never a pass)
    run_import(str(BRAINTRUST), "--set", "capitals-2", "--add-cases", capsys=capsys)
    other = EvalRun.objects.get(eval_set__name="capitals-2")
    assert (other.n_passed, other.n_unscored, other.n_errored) == (0, 2, 1)


@pytest.mark.django_db
def test_promptfoo_jsonl_and_csv_outputs_read_as_the_json_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = json.loads(PROMPTFOO.read_text())
    jsonl = tmp_path / "out.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in doc["results"]["results"]))
    out, _ = run_import(str(jsonl), "--set", RIDDLES, "--add-cases", capsys=capsys)
    assert "promptfoo results (jsonl)" in out and "0 case(s) matched, 2 created" in out
    # the CSV promptfoo writes (buildCsvHeaders / tableRowToCsvValues), made from the same results
    table = tmp_path / "out.csv"
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        prompts = ["[openai:gpt-5] Solve this riddle: {{riddle}}", "[openai:gpt-5-mini] Solve this riddle: {{riddle}}"]
        per_prompt = ["Status", "Score", "Named Scores", "Grader Reason", "Comment"]
        writer.writerow(["riddle", prompts[0], *per_prompt, prompts[1], *per_prompt])
        rows: dict[int, list[str]] = {}
        for r in doc["results"]["results"]:
            row = rows.setdefault(r["testIdx"], [r["vars"]["riddle"]] + [""] * 12)
            at = 1 + 6 * r["promptIdx"]
            status = "PASS" if r["success"] else "FAIL"
            row[at : at + 6] = [
                r["response"]["output"],
                status,
                f"{r['score']:.2f}",
                "",
                r["gradingResult"]["reason"],
                "",
            ]
        writer.writerows(rows.values())
    out, _ = run_import(str(table), "--set", RIDDLES, capsys=capsys)
    assert "promptfoo results (csv)" in out and "2 case(s) matched, 0 created, 0 skipped" in out
    csv_run = RunSource.objects.get(file_name="out.csv", run_key__contains="gpt-5-mini").eval_run
    (first, *_) = EvalResult.objects.filter(eval_run=csv_run)
    assert [s["name"] for s in first.scores] == ["promptfoo"] and first.status == "failed"


@pytest.mark.django_db
def test_a_set_that_matches_part_of_the_file_says_matched_created_and_skipped_by_id(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bank = tmp_path / "riddles.jsonl"
    echo = "I speak without a mouth and hear without ears. I have no body, but I come alive with wind. What am I?"
    bank.write_text(json.dumps({"id": "echo", "input": echo, "expected": "echo"}) + "\n")
    call_command("import", str(bank), "--name", "riddles")
    capsys.readouterr()
    out, err = run_import(str(PROMPTFOO), "--set", "riddles", capsys=capsys)
    assert "-> set 'riddles': 1 case(s) matched, 0 created, 1 skipped" in out
    assert "skipped (no case in set 'riddles'; their results not imported" in err and "auto-7da7b4bc01ae" in err
    assert set(EvalResult.objects.values_list("case_id", flat=True)) == {"echo"}  # matched by identical input


@pytest.mark.django_db
def test_a_bad_file_names_file_json_path_and_field_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = json.loads(PROMPTFOO.read_text())
    del doc["results"]["results"][2]["provider"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(CommandError, match=r"bad\.json: field 'results\.results\[2\]\.provider': every result names"):
        call_command("import_run", str(bad))
    doc = json.loads(PROMPTFOO.read_text())
    doc["results"]["results"][1]["gradingResult"] = "oops"  # a fresh user's edit, once imported as an error
    bad.write_text(json.dumps(doc))
    with pytest.raises(CommandError, match=r"field 'results\.results\[1\]\.gradingResult': gradingResult is an object"):
        call_command("import_run", str(bad))
    doc = json.loads((OPENAI / "output_items.json").read_text())
    doc["data"][0]["results"][0]["passed"] = "yes"
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "eval.json").write_text((OPENAI / "eval.json").read_text())
    (folder / "items.json").write_text(json.dumps(doc))
    with pytest.raises(CommandError, match=r"items\.json: field '\$\.data\[0\]\.results\[0\]\.passed'"):
        call_command("import_run", str(folder))
    assert not EvalSet.objects.exists() and not EvalRun.objects.exists()


@pytest.mark.django_db
def test_an_inspect_log_and_a_promptfoo_file_in_one_folder_each_record_their_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    history = tmp_path / "history"
    history.mkdir()
    (history / "a.json").write_bytes((ROOT / "tests" / "fixtures" / "inspect_logs" / "biology_qa.json").read_bytes())
    (history / "b.json").write_bytes(PROMPTFOO.read_bytes())
    (history / "README.md").write_text("our eval history\n")
    out, _ = run_import(str(history), "--add-cases", capsys=capsys)
    assert "left alone (1, not results files): README.md" in out
    sources = {s.tool: s for s in RunSource.objects.all()}
    assert sorted(sources) == ["inspect", "promptfoo"]
    assert sources["inspect"].file_name == "a.json" and sources["inspect"].tool_version
    assert RunSource.objects.filter(tool="promptfoo").count() == 2


@pytest.mark.django_db
def test_the_case_bank_import_points_a_results_file_to_import_run() -> None:
    with pytest.raises(CommandError, match=r"is a promptfoo results file \(runs with their scores, not a case bank\)"):
        call_command("import", str(PROMPTFOO))
    assert not EvalSet.objects.exists()


@pytest.mark.django_db
def test_a_multiline_prompt_label_is_a_one_line_variant_and_an_unstorable_case_imports_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = json.loads(PROMPTFOO.read_text())["results"]["results"]
    for row in rows:
        row["prompt"]["label"] = "Solve this riddle:\n{{riddle}}"
    multi = tmp_path / "multi.jsonl"
    multi.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run_import(str(multi), "--set", "multi", "--add-cases", capsys=capsys)
    assert set(EvalRun.objects.values_list("variant", flat=True)) == {"Solve this riddle: {{riddle}}"}
    for row in rows[2:]:
        row["vars"]["riddle"] = "a boat \ud800"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(row) + "\n" for row in rows))
    before = (EvalRun.objects.count(), EvalCase.objects.count())
    with pytest.raises(CommandError, match=r"bad\.jsonl:3: field 'vars\.riddle': a lone UTF-16 surrogate"):
        call_command("import_run", str(bad), "--set", "other", "--add-cases")
    assert (EvalRun.objects.count(), EvalCase.objects.count()) == before
    assert not EvalSet.objects.filter(name="other").exists()


@pytest.mark.django_db
def test_the_case_page_labels_each_imported_score(capsys: pytest.CaptureFixture[str], admin_client: Client) -> None:
    run_import(str(PROMPTFOO), capsys=capsys)
    run = EvalRun.objects.get(target_id="promptfoo:openai:gpt-5")
    result = EvalResult.objects.filter(eval_run=run, case_id__in=_case_ids_with("alive with wind")).get()
    page = admin_client.get(f"/runs/{run.pk}/cases/{result.pk}/").content.decode()
    assert page.count(">imported only</span>") == 2  # cost, latency
    assert page.count(">imported</span>") == 2  # contains, llm-rubric: Evalsite has equivalents
    assert "Evalsite's equivalent: contains" in page


@pytest.mark.django_db
def test_imported_runs_of_one_set_meet_on_the_n_way_page(
    capsys: pytest.CaptureFixture[str], admin_client: Client, tmp_path: Path
) -> None:
    run_import(str(PROMPTFOO), capsys=capsys)
    rows = json.loads(PROMPTFOO.read_text())["results"]["results"]
    again = tmp_path / "again.jsonl"  # the same eval's JSONL output: other runs of the same set
    again.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run_import(str(again), "--set", RIDDLES, capsys=capsys)
    ids = list(EvalRun.objects.filter(eval_set__name=RIDDLES).order_by("pk").values_list("pk", flat=True))
    assert len(ids) == 4
    page = admin_client.get(f"/compare/?runs={','.join(ids[:3])}")
    assert page.status_code == 200
    assert all(run_id in page.content.decode() for run_id in ids[:3])


@pytest.mark.django_db
@pytest.mark.parametrize("content", [b"", b"[]", bytes(range(256))], ids=["empty", "array", "binary"])
def test_a_file_of_no_known_tool_is_refused_naming_every_format_read(tmp_path: Path, content: bytes) -> None:
    """An empty file, a JSON array or binary bytes: the refusal names what import-run reads (a
    fresh user was told only about Inspect logs, or that the name had to end in .eval/.json)."""
    path = tmp_path / "upload.bin"
    path.write_bytes(content)
    with pytest.raises(CommandError) as refused:
        call_command("import_run", str(path))
    message = str(refused.value)
    assert "promptfoo" in message and "OpenAI Evals" in message and "Braintrust" in message and "Inspect" in message
    assert not EvalRun.objects.exists()
