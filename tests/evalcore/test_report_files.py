"""The JSON report's text (evalcore.report_files): written by a direct indenting writer, the same
bytes ``json.dumps(document, indent=2)`` writes, with each case redacted as ``redact_case`` does."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalcore.redact import configured_secrets
from evalcore.report import ReportBuilder
from evalcore.report_files import pretty_json, redact_case, write_json_report

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False, default=str)


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_pretty_json_writes_what_json_dumps_writes_with_indent_2(value):
    assert pretty_json(value) == dumps(value)
    assert pretty_json([value]) == dumps([value])


def test_pretty_json_on_the_values_outside_plain_json_as_json_dumps():
    class Tag(str):
        pass

    odd = {1: (1, 2.5), 2.5: [], False: {}, None: Tag("t"), "ctl\x00\ud800é": Path("p"), "big": 10**30, "f": 1e16}
    assert pretty_json(odd) == dumps(odd)
    for bad in (math.nan, [math.inf], {"x": -math.inf}):
        with pytest.raises(ValueError, match="Out of range float values"):
            pretty_json(bad)
    with pytest.raises(TypeError):
        pretty_json({(1, 2): 1})


def _reference(path: Path, report: Any, info: dict[str, Any], cases: list[dict[str, Any]]) -> bytes:
    """The document as written before the direct writer (json.dumps of the whole, indent=2)."""
    from evalcore.redact import redact
    from evalcore.serial import to_record

    secrets = configured_secrets()
    head = redact({"eval_run": info, "report": to_record(report, json_mode=True)}, secrets)
    document = {**head, "cases": [redact_case(case, secrets) for case in cases]}
    return (dumps(document) + "\n").encode("utf-8", errors="backslashreplace")


def test_the_report_is_the_same_text_and_a_secret_is_redacted_outside_the_target_fields(tmp_path, monkeypatch):
    secret = "sk-report-0123456789abcdef"
    monkeypatch.setenv("REPORT_TEST_API_KEY", secret)
    score = {"name": "exact_match", "value": True, "passed": True, "explanation": None, "error": None, "metadata": {}}
    cases = [
        {
            "case_id": f"c{i}",
            "status": "passed",
            "scores": [score],
            "output": f"out {i}",
            "elapsed_ms": 0.5,
            "error": None,
        }
        for i in range(3)
    ]
    cases.append(
        {
            "case_id": "s",
            "status": "errored",
            "scores": [],
            "output": f"echo {secret}",
            "error": {
                "type": "HTTPError",
                "message": f"401 with key {secret} at http://bob:pw-12345678@judge.local/v1",
            },
        }
    )
    cases.append({"case_id": "u", "status": "failed", "scores": [{**score, "explanation": "see http://al:x@h/"}]})
    shared = [score, {**score, "name": "other", "value": 0.5}]  # one value in two cases: written once
    cases += [{"case_id": f"shared{i}", "status": "passed", "scores": shared, "error": None} for i in range(2)]
    report = ReportBuilder("r1").build(elapsed_s=1.0)
    write_json_report(tmp_path / "r.json", report, info={"id": "r1"}, cases=cases)
    written = (tmp_path / "r.json").read_bytes()
    assert written == _reference(tmp_path, report, {"id": "r1"}, cases)
    document = json.loads(written)
    assert secret not in json.dumps(document["cases"][3]["error"]) and "bob" not in written.decode()
    assert document["cases"][3]["output"] == f"echo {secret}"  # what the target produced: as it was
    assert "al:x@" not in written.decode()
    write_json_report(tmp_path / "empty.json", report, info={"id": "r1"}, cases=[])
    assert (tmp_path / "empty.json").read_bytes() == _reference(tmp_path, report, {"id": "r1"}, [])
