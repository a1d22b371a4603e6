r"""Machine-readable reports of an eval run: strict JSON and JUnit XML.

JUnit XML follows the de-facto schema read by Jenkins, GitLab and GitHub Actions reporters
(``testsuites > testsuite > testcase`` with ``failure`` / ``error`` children).

Both files are well-formed whatever the data holds. In the JSON report every string is kept
(control characters are JSON escapes; a lone surrogate is written as its ``\udXXX`` escape).
XML 1.0 cannot carry control characters (other than tab, newline, carriage return), NUL,
lone surrogates or U+FFFE/U+FFFF at all, so in the JUnit file each is written as a visible
escape (``\x0b``, ``\x00``, ``\ud800``) instead.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from evalcore.redact import configured_secrets, redact
from evalcore.report import EvalReport
from evalcore.serial import to_record


def write_json_report(
    path: str | Path,
    report: EvalReport,
    *,
    info: dict[str, Any],
    cases: Iterable[dict[str, Any]],
    extra: dict[str, Any] | None = None,
) -> None:
    """Write ``{"eval_run": info, "report": ..., "cases": [...]}`` as strict JSON (no NaN).

    ``extra`` adds top-level blocks (e.g. ``baseline``: the comparison and its flips;
    ``gates``: each gate's outcome).

    Raises:
        ValueError: A non-finite number slipped in (never written as NaN).
    """
    secrets = configured_secrets()
    head = redact({"eval_run": info, "report": to_record(report, json_mode=True), **(extra or {})}, secrets)
    document = {**head, "cases": [redact_case(case, secrets) for case in cases]}
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False, default=str)
    # lone surrogates only occur inside JSON strings, where "\udXXX" is their JSON escape
    Path(path).write_bytes((text + "\n").encode("utf-8", errors="backslashreplace"))


TARGET_FIELDS = frozenset({"input", "output", "expected", "final_answer", "messages"})
"""A report case's fields that hold what a target was given or produced: written as they are."""


def redact_case(case: Mapping[str, Any], secrets: list[str]) -> dict[str, Any]:
    """A report case with its credentials removed from everything but :data:`TARGET_FIELDS`
    (errors, score explanations, metadata are redacted; the target's output never is)."""
    return {key: value if key in TARGET_FIELDS else redact(value, secrets) for key, value in case.items()}


_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    r"""``text`` with every character XML 1.0 cannot hold replaced by a visible escape (``\x0b``)."""
    return _NOT_XML.sub(_escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def write_junit(
    path: str | Path,
    report: EvalReport,
    *,
    suite_name: str,
    cases: Iterable[dict[str, Any]],
    flips: Mapping[tuple[str, int], str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> None:
    """Write JUnit XML: one ``testcase`` per case; failed cases get ``failure``, errored ``error``,
    unscored ``skipped`` (nothing judged them: not a pass).

    Each case dict has ``case_id``, ``status`` (passed/failed/errored/unscored), ``elapsed_ms``,
    ``split``, ``scores`` (list of score dicts) and ``error`` (``{type, message}`` or None).
    ``flips`` maps ``(case_id, repeat_index)`` to ``regression`` / ``improvement`` against a
    baseline: a flipped case's failure message starts with it and the case gets an
    ``evalsite.flip`` property. ``properties`` become the suite's ``properties`` (e.g. the
    baseline run and the regression count).
    """
    root = ET.Element("testsuites", name="evalsite")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=xml_safe(suite_name),
        tests=str(report.n),
        failures=str(report.failed),
        errors=str(report.errored),
        skipped=str(report.unscored),
        time=f"{report.elapsed_s:.3f}",
    )
    if properties:
        holder = ET.SubElement(suite, "properties")
        for key, value in properties.items():
            ET.SubElement(holder, "property", name=xml_safe(key), value=xml_safe(value))
    secrets = configured_secrets()
    flips = flips or {}
    for case in cases:
        case = redact_case(case, secrets)
        elapsed = (case.get("elapsed_ms") or 0.0) / 1000.0
        element = ET.SubElement(
            suite,
            "testcase",
            classname=xml_safe(f"{suite_name}.{case.get('split') or 'unsplit'}"),
            name=xml_safe(str(case["case_id"])),
            time=f"{elapsed:.3f}" if math.isfinite(elapsed) else "0",
        )
        detail = "; ".join(
            f"{s['name']}={s.get('value')!r}" + (f" ({s['explanation']})" if s.get("explanation") else "")
            for s in case.get("scores", [])
        )
        flip = flips.get((str(case["case_id"]), int(case.get("repeat_index") or 0)))
        if flip:
            holder = ET.SubElement(element, "properties")
            ET.SubElement(holder, "property", name="evalsite.flip", value=flip)
        if case["status"] == "failed":
            message = "regression: passed in the baseline" if flip == "regression" else "case failed"
            ET.SubElement(element, "failure", message=message, type="failed").text = xml_safe(detail)
        elif case["status"] == "errored":
            error = case.get("error") or {}
            scorer_errors = [s for s in case.get("scores", []) if s.get("error")]
            message = error.get("message") or "; ".join(f"{s['name']}: {s['error']}" for s in scorer_errors)
            if flip == "regression":
                message = f"regression (passed in the baseline): {message}"
            ET.SubElement(
                element, "error", message=xml_safe(message[:500]), type=xml_safe(error.get("type") or "ScorerError")
            ).text = xml_safe(message)
        elif case["status"] == "unscored":
            ET.SubElement(element, "skipped", message="unscored: no scorer gave this case a verdict").text = xml_safe(
                detail
            )
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
