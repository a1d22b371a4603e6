"""The engine's readers of other tools' runs (evalcore.loaders.peer_runs): the versions and shapes
the fixtures do not show, grader mapping, detection from content, and errors naming the place."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from evalcore.loaders import CaseBankError
from evalcore.loaders.peer_runs import detect_peer_format, read_peer_runs

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "tests" / "fixtures" / "peer_runs"
PROMPTFOO = PEERS / "promptfoo-sample-export.json"
OPENAI = PEERS / "openai-evals-export"


def test_a_version_2_results_file_without_indexes_keys_runs_by_provider_and_prompt(tmp_path: Path) -> None:
    doc = json.loads(PROMPTFOO.read_text())
    doc["results"]["version"] = 2
    for row in doc["results"]["results"]:
        del row["promptIdx"], row["testIdx"]
    del doc["metadata"]
    doc["results"]["results"][0]["namedScores"] = {"accuracy": 0.5, "words": 42}
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(doc))
    peer = read_peer_runs(path)
    assert peer.file_format == "promptfoo results v2 (json)" and peer.tool_version == ""
    assert sorted(run.key for run in peer.runs) == [
        "openai:gpt-5-mini|Solve this riddle: {{riddle}}",
        "openai:gpt-5|Solve this riddle: {{riddle}}",
    ]
    assert [len(run.items) for run in peer.runs] == [2, 2] and len(peer.cases) == 2
    named = {s.name: s for run in peer.runs for item in run.items for s in item.scores if s.name.startswith("metric:")}
    assert (named["metric:accuracy"].value, named["metric:accuracy"].passed) == (0.5, None)
    assert (named["metric:words"].value, named["metric:words"].raw) == (None, {"score": 42.0})  # outside 0..1: kept raw


def test_a_results_file_over_the_read_whole_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(PROMPTFOO.read_bytes() + b" " * (1024 * 1024))
    monkeypatch.setenv("EVALSITE_IMPORT_MAX_INFLATED_MB", "1")
    with pytest.raises(CaseBankError, match="set EVALSITE_IMPORT_MAX_INFLATED_MB to raise it"):
        read_peer_runs(big)


def test_an_older_csv_cell_is_status_score_output_and_reason(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["question", "[echo] {{question}}"])
        writer.writerow(["2+2?", "[PASS] (1.00)\n\n4\n\nPass Reason: Assertion passed"])
        writer.writerow(["3+3?", "[FAIL] (0.00)\n\n7\n\nFail Reason: Expected output to equal 6"])
        writer.writerow(["1/0?", "[ERROR] (0.00)\n\nboom"])
    (run,) = read_peer_runs(path).runs
    first, second, third = run.items
    assert (first.output, first.scores[0].passed, first.scores[0].reason) == ("4", True, "Assertion passed")
    assert (second.output, second.scores[0].passed) == ("7", False)
    assert third.error == "promptfoo: ERROR" and third.scores == []


def test_detection_reads_content_not_names(tmp_path: Path) -> None:
    disguised = tmp_path / "notes.txt"
    disguised.write_bytes(PROMPTFOO.read_bytes())
    assert detect_peer_format(disguised) == "promptfoo"
    bank = tmp_path / "results.json"
    bank.write_text(json.dumps([{"id": "q1", "input": "x", "expected": "y"}]))
    assert detect_peer_format(bank) is None
    assert detect_peer_format(ROOT / "tests" / "fixtures" / "inspect_logs" / "biology_qa.json") is None
    with pytest.raises(CaseBankError, match="not a results file read here"):
        read_peer_runs(bank)


def test_openai_graders_map_to_equivalents_only_when_they_check_the_output(tmp_path: Path) -> None:
    evaluation = {
        "object": "eval",
        "id": "eval_1",
        "name": "headlines",
        "data_source_config": {"type": "custom"},
        "testing_criteria": [
            {
                "name": "exact",
                "type": "string_check",
                "input": "{{sample.output_text}}",
                "reference": "{{item.ground_truth}}",
                "operation": "eq",
            },
            {
                "name": "has",
                "type": "string_check",
                "input": "{{sample.output_text}}",
                "reference": "{{item.ground_truth}}",
                "operation": "ilike",
            },
            {
                "name": "close",
                "type": "text_similarity",
                "input": "{{sample.output_text}}",
                "reference": "{{item.ground_truth}}",
                "evaluation_metric": "fuzzy_match",
                "pass_threshold": 0.8,
            },
            {
                "name": "judge",
                "type": "label_model",
                "model": "o3-mini",
                "input": [],
                "labels": ["a", "b"],
                "passing_labels": ["a"],
            },
        ],
    }
    item = {
        "object": "eval.run.output_item",
        "id": "oi_1",
        "run_id": "run_1",
        "eval_id": "eval_1",
        "created_at": 1743092076,
        "status": "fail",
        "datasource_item_id": 0,
        "datasource_item": {"input": "Stocks rally", "ground_truth": "Markets"},
        "results": [
            {"name": "exact-1b2c", "passed": False, "score": 0.0},
            {"name": "has-1b2c", "passed": True, "score": 1.0},
            {"name": "close-1b2c", "passed": True, "score": 0.86},
            {"name": "judge-1b2c", "passed": False, "score": 0.0, "sample": {"output_text": "b"}},
        ],
        "sample": {
            "output": [{"role": "assistant", "content": "markets"}],
            "error": {"code": "", "message": ""},
            "usage": {"prompt_tokens": 9, "completion_tokens": 1},
        },
    }
    (tmp_path / "eval.json").write_text(json.dumps(evaluation))
    (tmp_path / "items.jsonl").write_text(json.dumps(item) + "\n")
    peer = read_peer_runs(tmp_path)
    (case,) = peer.cases
    assert (case.input, case.expected) == ("Stocks rally", "Markets")
    (run,) = peer.runs
    scores = {s.name: s for s in run.items[0].scores}
    assert scores["exact"].equivalent == {"name": "exact_match", "args": {"strip": False}}
    assert scores["has"].equivalent == {"name": "contains", "args": {"casefold": True}}
    assert scores["close"].equivalent is None and scores["close"].spec["evaluation_metric"] == "fuzzy_match"
    assert scores["judge"].equivalent is None and scores["judge"].reason == "b"
    assert run.imported_only() == ["close", "judge"]
    assert run.items[0].error is None and run.items[0].output == "markets"  # an empty error object is no error


def test_two_evals_in_one_export_and_bad_events_are_refused_by_place(tmp_path: Path) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.json").write_text(json.dumps({"object": "eval", "id": f"eval_{name}", "name": name}))
    (folder / "run.json").write_text((OPENAI / "run.json").read_text())
    with pytest.raises(CaseBankError, match="one eval per import: found 2"):
        read_peer_runs(folder)
    events = json.loads((PEERS / "braintrust-experiment-fetch.json").read_text())
    del events["events"][3]["root_span_id"]
    bad = tmp_path / "bt.json"
    bad.write_text(json.dumps(events))
    with pytest.raises(CaseBankError, match=r"bt\.json: field 'events\[3\]\.root_span_id'"):
        read_peer_runs(bad)


def test_a_truncated_results_file_is_refused_at_its_line_and_column(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_bytes(PROMPTFOO.read_bytes()[:5000])
    with pytest.raises(CaseBankError, match=r"cut\.json:\d+:\d+: not valid JSON"):
        read_peer_runs(cut)
