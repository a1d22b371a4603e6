"""Inspect logs read without inspect-ai: the real ``.eval`` / ``.json`` fixtures Inspect wrote
(tests/fixtures/inspect_logs/make_logs.py), an older deflated ``.eval``, and hand-made bad logs
whose errors name the file, the member and the field."""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from evalcore.loaders import CaseBankError
from evalcore.loaders.inspect_log import InspectLog, InspectScore, is_inspect_log, read_inspect_log
from evalcore.loaders.inspect_runs import error_info, sample_result
from evalcore.loaders.inspect_scores import evalsite_scores, off_scale_names, read_value
from evalcore.loaders.inspect_steps import steps_from_events
from evalcore.loaders.inspect_zip import ZIP_ZSTANDARD
from evalcore.types import Case, CaseStatus

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "inspect_logs"
EVAL_LOG = LOGS / "biology_qa.eval"
JSON_LOG = LOGS / "biology_qa.json"


def _json_log() -> dict[str, Any]:
    return json.loads(JSON_LOG.read_text())


def _samples(log: InspectLog) -> dict[tuple[str, int], Any]:
    return {(s.id, s.epoch): s for s in log.samples()}


def test_the_eval_log_inspect_wrote_reads_spec_samples_and_epochs() -> None:
    log = read_inspect_log(EVAL_LOG)
    assert (log.format, log.status, log.version, log.n_samples) == ("eval", "success", 2, 14)
    spec = log.spec
    assert (spec.task, spec.model, spec.dataset, spec.epochs) == ("biology_qa", "mockllm/model", "biology_qa", 2)
    assert spec.scorers == ("includes", "brevity") and spec.inspect_version == "0.3.285"
    assert log.metrics["includes"]["accuracy"] == pytest.approx(0.75)
    with zipfile.ZipFile(EVAL_LOG) as archive:  # what recent Inspect writes: zstd members
        assert {info.compress_type for info in archive.infolist()} == {ZIP_ZSTANDARD}
    samples = list(log.samples())
    assert [(s.id, s.epoch) for s in samples[:8]] == [(f"q{i}", 1) for i in range(1, 8)] + [("q1", 2)]
    by_key = _samples(log)
    q3a, q3b = by_key[("q3", 1)], by_key[("q3", 2)]
    assert (q3a.output, q3b.output) == ("The liver", "Skin")
    assert [(s.scorer, s.value) for s in q3a.scores] == [("includes", "I"), ("brevity", {"ratio": 0.5, "words": 2})]
    assert q3a.target == "Skin" and q3a.input == "What is the human body's largest organ?"
    q2 = by_key[("q2", 1)]
    assert [(st.kind, st.name) for st in q2.steps] == [
        ("chat", "mockllm/model"),
        ("execute_tool", "lookup"),
        ("chat", "mockllm/model"),
    ]
    call, tool, answer = q2.steps
    assert call.message is not None and call.message["tool_calls"] == [
        {"id": "call_1", "name": "lookup", "arguments": {"term": "botany"}}
    ]
    assert (tool.arguments, tool.result, tool.tool_call_id) == (
        {"term": "botany"},
        "Botany: the scientific study of plants.",
        "call_1",
    )
    assert (call.tokens_in, call.tokens_out, answer.tokens_in, answer.tokens_out) == (13, 2, 24, 1)
    assert (q2.tokens_in, q2.tokens_out) == (37, 3)  # the sample's model_usage
    assert q2.total_time_s is not None and q2.started is not None and call.started is not None
    q7 = by_key[("q7", 1)]
    assert q7.error == "RuntimeError('mock model: upstream returned 503 for this sample')"
    assert q7.output is None and q7.scores == [] and q7.steps[0].error is not None


def test_the_json_log_reads_as_the_eval_log_does() -> None:
    log = read_inspect_log(JSON_LOG)
    assert (log.format, log.n_samples, log.spec.epochs) == ("json", 7, 1)
    samples = list(log.samples())
    assert [s.id for s in samples] == [f"q{i}" for i in range(1, 8)]
    assert [s.output for s in samples] == ["Leprosy", "Plants", "The liver", "True", "The jaw", "206", "False"]
    assert [s.scores[0].value for s in samples] == ["C", "C", "I", "C", "I", "C", "C"]
    assert samples[0].messages == [
        {"role": "user", "content": "Hansen's disease is more commonly known by which name?"},
        {"role": "assistant", "content": "Leprosy"},
    ]
    assert log.sha256 == read_inspect_log(JSON_LOG).sha256 != read_inspect_log(EVAL_LOG).sha256


def test_inspect_logs_are_told_from_case_banks(tmp_path: Path) -> None:
    assert is_inspect_log(EVAL_LOG) and is_inspect_log(JSON_LOG)
    assert not is_inspect_log(LOGS / "biology_qa.jsonl")
    dataset = tmp_path / "samples.json"
    dataset.write_text('[{"input": "a", "target": "b"}]')
    assert not is_inspect_log(dataset)


def _deflated_eval(path: Path, log: dict[str, Any]) -> Path:
    """An ``.eval`` log as older Inspect versions wrote it: deflated members."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps({k: v for k, v in log.items() if k != "samples"}))
        for sample in log.get("samples", []):
            name = f"samples/{sample.get('id', 'noid')}_epoch_{sample['epoch']}.json"
            archive.writestr(name, json.dumps(sample))
    return path


def test_a_deflated_eval_log_with_attachments_reads_like_the_json_log(tmp_path: Path) -> None:
    data = _json_log()
    first = data["samples"][0]
    first["attachments"] = {"a1b2": first["messages"][0]["content"]}
    first["messages"][0]["content"] = "attachment://a1b2"  # Inspect moves long texts out like this
    log = read_inspect_log(_deflated_eval(tmp_path / "old.eval", data))
    samples = list(log.samples())
    expected = list(read_inspect_log(JSON_LOG).samples())
    assert [(s.id, s.output, s.messages) for s in samples] == [(s.id, s.output, s.messages) for s in expected]


def test_a_sample_without_events_gets_its_steps_from_its_messages(tmp_path: Path) -> None:
    data = _json_log()
    q2 = copy.deepcopy(next(s for s in data["samples"] if s["id"] == "q2"))
    q2["events"] = []
    data["samples"] = [q2]
    path = tmp_path / "no-events.json"
    path.write_text(json.dumps(data))
    [sample] = read_inspect_log(path).samples()
    assert [(s.kind, s.name, s.started) for s in sample.steps] == [
        ("chat", "mockllm/model", None),
        ("execute_tool", "lookup", None),
        ("chat", "mockllm/model", None),
    ]
    assert sample.steps[1].arguments == {"term": "botany"}


def test_a_model_call_inside_the_scorers_is_a_judges() -> None:
    events = [
        {"event": "span_begin", "id": "s1", "type": "solvers", "name": "solvers"},
        {"event": "model", "span_id": "s1", "model": "m", "output": {"choices": []}},
        {"event": "span_begin", "id": "s2", "type": "scorers", "name": "scorers"},
        {"event": "span_begin", "id": "s3", "parent_id": "s2", "type": "scorer", "name": "model_graded_qa"},
        {"event": "model", "span_id": "s3", "model": "grader", "output": {"choices": []}},
    ]
    assert [(s.name, s.role) for s in steps_from_events(events)] == [("m", ""), ("grader", "judge")]


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _bad_sample(change: dict[str, Any], drop: str | None = None) -> dict[str, Any]:
    data = _json_log()
    sample = data["samples"][0]
    sample.update(change)
    if drop:
        parent, _, key = drop.rpartition(".")
        target = sample
        for part in filter(None, parent.split(".")):
            target = target[part]
        del target[key]
    return data


BAD_JSON_LOGS = [
    ("not JSON", "{oops", "bad.json:1:2: not JSON: Expecting property name"),
    ("no eval", {"samples": []}, "not an Inspect log"),
    (
        "no model",
        {**_json_log(), "eval": {"task": "t", "created": "2026-01-01T00:00:00"}},
        "field 'eval.model': field required",
    ),
    (
        "score without value",
        _bad_sample({}, drop="scores.includes.value"),
        "field 'samples[0].scores.includes.value': field required",
    ),
    (
        "input a number",
        _bad_sample({"input": 7}),
        "field 'samples[0].input': the input must be text or a list of chat messages",
    ),
    ("epoch not a number", _bad_sample({"epoch": "two"}), "field 'samples[0].epoch': input should be a valid integer"),
    ("id a list", _bad_sample({"id": ["q1"]}), "field 'samples[0].id': the sample id must be text or an integer"),
    (
        "target a number",
        _bad_sample({"target": 3}),
        "field 'samples[0].target': the target must be text or a list of texts",
    ),
    ("message without role", _bad_sample({"messages": [{"content": "hi"}]}), "field 'samples[0].messages[0].role'"),
]


@pytest.mark.parametrize(("label", "data", "message"), BAD_JSON_LOGS, ids=[b[0] for b in BAD_JSON_LOGS])
def test_a_bad_json_log_names_the_file_and_the_field(tmp_path: Path, label: str, data: Any, message: str) -> None:
    path = _write(tmp_path, "bad.json", data)
    with pytest.raises(CaseBankError) as error:
        log = read_inspect_log(path)
        list(log.samples())
    assert str(error.value).startswith(str(path)) and message in str(error.value)


def test_bad_eval_logs_name_the_member_and_the_field(tmp_path: Path) -> None:
    not_zip = _write(tmp_path, "plain.eval", "hello")
    with pytest.raises(CaseBankError, match=r"plain.eval: not a readable zip archive \(an .eval log is one\)"):
        read_inspect_log(not_zip)
    unfinished = tmp_path / "running.eval"
    with zipfile.ZipFile(unfinished, "w") as archive:
        archive.writestr("_journal/start.json", "{}")
    with pytest.raises(CaseBankError, match=r"no header\.json: the Inspect eval did not finish"):
        read_inspect_log(unfinished)
    data = _bad_sample({}, drop="id")
    log = read_inspect_log(_deflated_eval(tmp_path / "noid.eval", data))
    with pytest.raises(CaseBankError) as error:
        list(log.samples())
    assert str(error.value) == f"{tmp_path / 'noid.eval'}:samples/noid_epoch_1.json: field 'id': field required"
    broken = tmp_path / "broken.eval"
    with zipfile.ZipFile(_deflated_eval(broken, _json_log()), "a") as archive:
        archive.writestr("samples/q9_epoch_1.json", "{not json")
    with pytest.raises(CaseBankError, match=r"broken.eval:samples/q9_epoch_1.json:1:2: not JSON"):
        list(read_inspect_log(broken).samples())
    with pytest.raises(CaseBankError, match=r"an Inspect log ends in \.eval or \.json"):
        read_inspect_log(_write(tmp_path, "log.txt", "{}"))
    with pytest.raises(CaseBankError, match="no such file"):
        read_inspect_log(tmp_path / "missing.eval")


def test_a_sample_becomes_a_case_result_and_a_trace() -> None:
    samples = _samples(read_inspect_log(EVAL_LOG))
    case = Case(id="q2", input="Botany is the study of what life form?", expected="Plants", split="dev")
    result, events = sample_result(samples[("q2", 2)], case, eval_run_id="R", epochs=2, task="biology_qa")
    run = result.run
    assert (run.run_id, run.repeat_index, run.output, run.model) == ("R:q2#1", 1, "Plants", "mockllm/model")
    assert (run.tokens_in, run.tokens_out, run.error) == (37, 3, None)
    assert run.elapsed_ms == pytest.approx(samples[("q2", 2)].total_time_s * 1000)
    assert run.metadata["tool_calls"] == [{"name": "lookup", "arguments": {"term": "botany"}}]
    assert run.metadata["inspect"]["epoch"] == 2 and run.metadata["split"] == "dev"
    assert result.status is CaseStatus.PASSED and result.case.expected == "Plants"
    assert [(s.name, s.value, s.passed) for s in result.scores] == [
        ("includes", True, True),
        ("brevity.ratio", 1.0, None),
        ("brevity.words", 1.0, None),
    ]
    spans = [(e.type, e.payload.get("kind"), e.name) for e in events if e.type in ("span_begin", "span_end")]
    assert spans == [
        ("span_begin", "invoke_agent", "biology_qa"),
        ("span_begin", "chat", "mockllm/model"),
        ("span_end", "chat", "mockllm/model"),
        ("span_begin", "execute_tool", "lookup"),
        ("span_end", "execute_tool", "lookup"),
        ("span_begin", "chat", "mockllm/model"),
        ("span_end", "chat", "mockllm/model"),
        ("span_end", "invoke_agent", "biology_qa"),
    ]
    assert [e.seq for e in events] == list(range(len(events)))
    tool_end = next(e for e in events if e.type == "span_end" and e.payload["kind"] == "execute_tool")
    assert (
        tool_end.payload["result"] == "Botany: the scientific study of plants." and tool_end.payload["status"] == "ok"
    )
    first_chat = next(e for e in events if e.type == "span_end" and e.payload["kind"] == "chat")
    assert (first_chat.payload["tokens_in"], first_chat.payload["finish_reason"]) == (13, "tool_calls")


def test_an_errored_sample_is_an_errored_case_and_a_words_count_stays_text() -> None:
    samples = _samples(read_inspect_log(EVAL_LOG))
    q7 = Case(id="q7", input="x", split="test")
    result, events = sample_result(samples[("q7", 1)], q7, eval_run_id="R", epochs=2, task="t")
    assert result.status is CaseStatus.ERRORED and result.run.output is None
    assert (result.run.error.type, result.run.error.message) == (  # type: ignore[union-attr]
        "RuntimeError",
        "mock model: upstream returned 503 for this sample",
    )
    assert [e.name for e in events if e.type == "error"] == ["sample_error"]
    assert events[-1].payload["status"] == "error"
    q5 = Case(id="q5", input="x")
    result, _ = sample_result(samples[("q5", 1)], q5, eval_run_id="R", epochs=2, task="t", off_scale={"brevity.words"})
    assert [(s.name, s.value, s.passed) for s in result.scores] == [
        ("includes", False, False),
        ("brevity.ratio", 0.5, None),
        ("brevity.words", "2", None),
    ]
    assert result.scores[2].metadata["inspect_value"] == 2 and result.status is CaseStatus.FAILED
    assert (error_info("plain text").type, error_info('ValueError("x")').message) == ("InspectSampleError", "x")


READ_VALUES = [
    ("C", (True, True)),
    ("I", (False, False)),
    ("P", (0.5, False)),
    ("N", (0.0, False)),
    (True, (True, True)),
    (False, (False, False)),
    ("yes", (True, True)),
    ("False", (False, False)),
    (0.25, (0.25, None)),
    (1, (1.0, None)),
    ("0.75", (0.75, None)),
    (7, ("7", None)),
    ("A", ("A", None)),
    (None, (None, None)),
    (float("nan"), (None, None)),
]


@pytest.mark.parametrize(("value", "expected"), READ_VALUES, ids=[repr(v) for v, _ in READ_VALUES])
def test_inspect_values_read_as_the_documented_table_says(value: Any, expected: tuple[Any, Any]) -> None:
    read, verdict, _note = read_value(value)
    assert (read, verdict) == expected


def test_dict_and_list_values_give_one_score_per_part_and_off_scale_names_are_found() -> None:
    score = InspectScore("grader", {"correct": "C", "steps": 4, "f1": 0.5})
    assert off_scale_names(score) == {"grader.steps"}
    found = evalsite_scores(score, off_scale={"grader.steps"})
    assert [(s.name, s.value, s.passed) for s in found] == [
        ("grader.correct", True, True),
        ("grader.steps", "4", None),
        ("grader.f1", 0.5, None),
    ]
    assert "kept as text" in (found[1].explanation or "")
    listed = evalsite_scores(InspectScore("pair", ["I", 0.2], answer="x", explanation="why", metadata={"k": 1}))
    assert [(s.name, s.value) for s in listed] == [("pair.0", False), ("pair.1", 0.2)]
    assert listed[0].metadata == {"inspect_value": "I", "inspect_answer": "x", "inspect": {"k": 1}}
    assert listed[0].explanation == "why"


# --- where each log version keeps what it needs ------------------------------------------------


def test_the_output_comes_from_the_first_choice_when_a_log_has_no_completion(tmp_path: Path) -> None:
    data = _json_log()
    first, second, third = data["samples"][:3]
    del first["output"]["completion"]  # logs written before ModelOutput.completion was stored
    first["output"]["choices"][0]["message"]["content"] = "From the choice"
    second["output"]["completion"] = ""  # an empty completion: inspect_ai fills it from the choice too
    second["output"]["choices"][0]["message"]["content"] = [
        {"type": "reasoning", "reasoning": "think first"},
        {"type": "text", "text": "Part one"},
        {"type": "image", "image": "data:image/png;base64,AAAA"},
        {"type": "text", "text": "part two"},
    ]
    third["output"] = {"model": "mockllm/model", "choices": []}
    fourth = data["samples"][3]
    fourth["output"]["completion"] = ""
    fourth["output"]["choices"][0]["message"]["content"] = "<think>weigh it</think>\n\nFalse"
    samples = list(read_inspect_log(_write(tmp_path, "log.json", data)).samples())
    assert samples[3].output == "False"  # a <think> block is reasoning, as inspect_ai reads it
    assert samples[0].output == "From the choice"
    assert samples[1].output == "Part one\npart two"  # text parts only, as ModelOutput.completion reads
    assert samples[2].output == ""


def test_a_version_1_log_with_one_score_and_a_transcript_reads_as_inspect_ai_migrates_it(tmp_path: Path) -> None:
    data = _json_log()
    data["version"] = 1
    results = data["results"]
    results["scorer"] = results.pop("scores")[0]  # version 1: one scorer
    for sample in data["samples"]:
        sample["score"] = sample.pop("scores")["includes"]
        sample["transcript"] = {"events": sample.pop("events"), "content": sample.pop("attachments", {})}
        del sample["output"]["completion"]
    data["eval"].pop("scorers")
    log = read_inspect_log(_write(tmp_path, "log.json", data))
    assert log.version == 1 and log.metrics == {"includes": read_inspect_log(JSON_LOG).metrics["includes"]}
    fresh = {(s.id, s.epoch): s for s in read_inspect_log(JSON_LOG).samples()}
    for sample in log.samples():
        new = fresh[(sample.id, sample.epoch)]
        assert sample.output == new.output
        assert [(s.scorer, s.value) for s in sample.scores] == [
            (s.scorer, s.value) for s in new.scores if s.scorer == "includes"
        ]
        assert [(st.kind, st.name) for st in sample.steps] == [(st.kind, st.name) for st in new.steps]


def test_a_sample_twice_in_an_eval_log_is_refused_naming_both_members(tmp_path: Path) -> None:
    data = _json_log()
    header = {k: v for k, v in data.items() if k != "samples"}
    log = tmp_path / "twice.eval"
    with zipfile.ZipFile(log, "w", zipfile.ZIP_DEFLATED) as archive:
        for sample in data["samples"]:
            archive.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
        archive.writestr("samples/../../tmp/PWNED_epoch_1.json", json.dumps(data["samples"][0]))
        archive.writestr("header.json", json.dumps(header))
    with pytest.raises(CaseBankError) as info:
        list(read_inspect_log(log).samples())
    assert str(info.value) == (
        f"{log}: sample 'q1' epoch 1 appears twice, in samples/q1_epoch_1.json and in "
        "samples/../../tmp/PWNED_epoch_1.json: a log holds each (sample, epoch) once; nothing imported"
    )


def test_a_sample_twice_in_a_json_log_is_refused_naming_both_places(tmp_path: Path) -> None:
    data = _json_log()
    data["samples"].append(copy.deepcopy(data["samples"][3]))
    path = _write(tmp_path, "log.json", data)
    last = len(data["samples"]) - 1
    with pytest.raises(CaseBankError, match=rf"'q4' epoch 1 appears twice, in samples\[3\] and in samples\[{last}\]"):
        list(read_inspect_log(path).samples())
