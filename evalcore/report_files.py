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

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from evalcore.redact import configured_secrets, redact, redact_text
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
    if "cases" in head:  # an extra block named "cases" (none today) is replaced in its place
        document = {**head, "cases": [redact_case(case, secrets) for case in cases]}
        text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False, default=str)
    else:
        # json.dumps(document, indent=2)'s text, the cases written by pretty_json (the standard
        # library's indenting encoder is pure Python: ~0.5 s of a 10,000-case report)
        text = json.dumps({**head, "cases": []}, indent=2, ensure_ascii=False, allow_nan=False, default=str)
        memo: dict[int, tuple[Any, str]] = {}
        found = [_case_text(case, secrets, memo) for case in cases]
        if found:
            cut = text.rindex("[]")  # the (empty) cases list: the document's last value
            text = text[:cut] + "[\n    " + ",\n    ".join(found) + "\n  ]" + text[cut + 2 :]
    # lone surrogates only occur inside JSON strings, where "\udXXX" is their JSON escape
    Path(path).write_bytes((text + "\n").encode("utf-8", errors="backslashreplace"))


_CASE_PAD = "\n    "  # a report case's own level: the document's "cases" list, inside its object


def _case_text(case: Mapping[str, Any], secrets: list[str], memo: dict[int, tuple[Any, str]]) -> str:
    """One report case as ``json.dumps(document, indent=2)`` writes it in the cases list,
    redacted as :func:`redact_case` redacts it.

    The case is written first and its text searched (as :func:`evalcore.redact.redact` searches
    a value's JSON): a text holding no secret and no URL credential is one whose redaction
    changes nothing (each string's secret, raw or JSON-escaped, is in the text). Otherwise the
    case is redacted and written again. ``memo``: the texts of the cases' list and object values
    by identity, so a value that cases share (``case_rows`` reads a repeated scores text once) is
    written once.
    """
    text = pretty_json(case, _CASE_PAD, memo) if isinstance(case, dict) else pretty_json(case, _CASE_PAD)
    if _may_hold_secret(text, secrets):
        text = pretty_json(redact_case(case, secrets), _CASE_PAD)
    return text


def _may_hold_secret(text: str, secrets: list[str]) -> bool:
    """Whether JSON ``text`` holds a secret (raw or JSON-escaped) or URL userinfo
    (what :func:`evalcore.redact.redact` checks before it walks a value)."""
    for secret in secrets:
        if secret in text or json.dumps(secret, ensure_ascii=False)[1:-1] in text:
            return True
    return "://" in text and "@" in text and redact_text(text, []) != text


_encode_str = encode_basestring  # the C encoder's string quoting (ensure_ascii=False)


def pretty_json(value: Any, pad: str = "\n", memo: dict[int, tuple[Any, str]] | None = None) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False, default=str)``'s text,
    for a value written at the indentation ``pad`` (``"\\n"`` plus its spaces: ``"\\n"`` at the
    top), made by a direct recursion (strings quoted in C) instead of the standard library's
    generator chain: ~4x faster on a report's cases. Values must be acyclic (JSON read back).
    ``memo`` (for an object): its list and object values' texts by identity, read and filled
    (each entry keeps its value, so an identity is never reused while it is there).

    Raises:
        ValueError: NaN or an infinity (not JSON).
        TypeError: A dict key that is not a string, number, boolean or null.
    """
    if isinstance(value, str):
        return _encode_str(value)
    scalar = _scalar_text(value)
    if scalar is not None:
        return scalar
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        inner = pad + "  "
        return "[" + inner + ("," + inner).join([pretty_json(item, inner) for item in value]) + pad + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = pad + "  "
        parts = []
        for key, item in value.items():
            kind = type(item)  # the common leaves inline: no call
            if kind is str:
                text = _encode_str(item)
            elif item is None:
                text = "null"
            elif item is True:
                text = "true"
            elif item is False:
                text = "false"
            elif kind is int:
                text = int.__repr__(item)
            elif kind is float:
                text = _float_text(item)
            elif memo is not None and (kind is list or kind is dict):
                known = memo.get(id(item))
                if known is None or known[0] is not item:
                    if len(memo) >= _MEMO_SIZE:
                        memo.clear()
                    known = memo[id(item)] = (item, pretty_json(item, inner))
                text = known[1]
            else:
                text = pretty_json(item, inner)
            parts.append(_encode_str(key if isinstance(key, str) else _key_text(key)) + ": " + text)
        return "{" + inner + ("," + inner).join(parts) + pad + "}"
    return pretty_json(str(value), pad)  # default=str


_MEMO_SIZE = 256
"""Values a ``pretty_json`` memo keeps (then it starts again): a run's distinct score lists."""


def _float_text(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError("Out of range float values are not JSON compliant: " + repr(value))
    return float.__repr__(value)


def _scalar_text(value: Any) -> str | None:
    """``null``, ``true``/``false``, an integer or a float as ``json.dumps`` writes it (a value and a
    non-string key alike); ``None`` for anything else."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float_text(value)
    return None


def _key_text(key: Any) -> str:
    """A dict key that is not a string, as ``json.dumps`` writes it."""
    text = _scalar_text(key)
    if text is None:
        raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")
    return text


TARGET_FIELDS = frozenset({"input", "output", "expected", "final_answer", "messages"})
"""A report case's fields that hold what a target was given or produced: written as they are."""


def redact_case(case: Mapping[str, Any], secrets: list[str]) -> dict[str, Any]:
    """A report case with its credentials removed from everything but :data:`TARGET_FIELDS`
    (errors, score explanations, metadata are redacted; the target's output never is)."""
    return {key: value if key in TARGET_FIELDS else redact(value, secrets) for key, value in case.items()}


@functools.cache
def _not_xml() -> re.Pattern[str]:
    """The characters XML 1.0 cannot hold, compiled on first use (the class spans every plane:
    ~5 ms to compile, which a run without ``--junit`` never pays)."""
    return re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    r"""``text`` with every character XML 1.0 cannot hold replaced by a visible escape (``\x0b``)."""
    return _not_xml().sub(_escape_char, text)


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
