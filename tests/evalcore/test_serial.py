"""Engine values <-> stored records through one path (evalcore.serial), byte-compatible with stored data.

``records_v1.json`` was written by the hand-written ``to_dict`` / ``report_to_dict`` functions
this module replaced: every record must read back and write out to the same JSON text, key order
included, or rows already in a database would change shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalcore.jsonvalue import MISSING
from evalcore.judge.parsing import JudgeParseError, JudgeVerdict
from evalcore.report import EvalReport
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers import ScorerSpec
from evalcore.serial import from_record, to_record
from evalcore.types import Case, Score

STORED = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "stored" / "records_v1.json").read_text())


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # key order kept: it is part of the shape


@pytest.mark.parametrize(("key", "cls"), [("cases", Case), ("scores", Score), ("scorer_specs", ScorerSpec)])
def test_stored_records_round_trip_to_the_same_text(key: str, cls: type) -> None:
    for record in STORED[key]:
        value = from_record(cls, record)
        assert isinstance(value, cls)
        assert _text(to_record(value)) == _text(record)


def test_a_case_without_expected_reads_as_missing_and_writes_without_the_key() -> None:
    _, without, with_null = (from_record(Case, r) for r in STORED["cases"])
    assert without.expected is MISSING and "expected" not in to_record(without)
    assert with_null.expected is None and to_record(with_null)["expected"] is None


def test_a_stored_score_rebuilds_its_verdict_rules() -> None:
    verdict, measure, failure, label = (from_record(Score, r) for r in STORED["scores"])
    assert verdict.passed is True and measure.numeric == 0.5 and failure.error and label.value == "positive"
    assert from_record(Score, {"name": "ok", "value": False}).passed is False  # a bool value is a verdict


def test_a_stored_spec_rebuilds_its_scorer() -> None:
    for record in STORED["scorer_specs"]:
        assert to_record(scorer_from_spec(record).spec()) == record


def test_the_judge_cache_record_round_trips_and_a_corrupt_one_is_not_trusted() -> None:
    record = STORED["judge_verdict"]
    verdict = JudgeVerdict.from_record(record)
    assert _text(to_record(verdict)) == _text(record)
    assert verdict.scores["completeness"] == 3 and verdict.reasons["completeness"] == "ok"
    with pytest.raises(JudgeParseError, match=r"outside 0\.\.5"):
        JudgeVerdict.from_record({**record, "scores": {**record["scores"], "accuracy": 9}})


# fields a metric gained after these records were stored (issue 23: intervals at small n), with the
# defaults an old record reads back with
_LATER_METRIC_FIELDS = {"binary": False, "low": None, "high": None, "interval_method": None, "interval_reason": None}


def test_a_stored_report_summary_round_trips() -> None:
    report = from_record(EvalReport, STORED["report"])
    assert report.metrics["exact_match"].n == STORED["report"]["metrics"]["exact_match"]["n"]
    expected = json.loads(_text(STORED["report"]))
    for group in (expected, *expected["splits"].values()):
        for metric in group["metrics"].values():
            metric.update(_LATER_METRIC_FIELDS)
    assert _text(to_record(report, json_mode=True)) == _text(expected)
