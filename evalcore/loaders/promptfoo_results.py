"""promptfoo results files (``promptfoo eval -o results.json|.jsonl|.csv``) as runs.

Formats read (every results version ``promptfoo import`` reads, and the two other outputs):

* **JSON, results version 3** (promptfoo >= 0.60 or so, to date): ``{"evalId", "results":
  {"version": 3, "timestamp", "prompts": [...with provider and metrics], "results": [...],
  "stats"}, "config", "metadata": {"promptfooVersion", "evaluationCreatedAt", ...}}``.
* **JSON, results version 2** (older promptfoo; ``import`` stores it as it is): ``results`` with
  ``version: 2``, ``results`` (the same per-result objects, without ``promptIdx`` / ``testIdx``
  in the oldest files) and ``table``.
* **JSONL**: one per-result object a line (``-o results.jsonl``).
* **CSV**: the table export: the vars' columns, then per prompt ``[provider] label``, ``Status``,
  ``Score``, ``Named Scores``, ``Metric: NAME``..., ``Grader Reason``, ``Comment`` (newer), or a
  single cell per prompt ``[PASS] (0.75)\\n\\noutput\\n\\nPass Reason: ...`` (older). A CSV has no
  per-assertion detail: one ``promptfoo`` score per cell, plus its named metrics.

Mapping: one run per provider x prompt (``promptIdx``); each test's ``vars`` is a case (input: the
vars, or the value of the only var when every test has the same single var; id ``auto-`` + a
hash of the vars, ``-2``... for a repeated test, as :mod:`evalcore.loaders.promptfoo` gives a set
imported from the promptfoo config, so the two match); expected: the first ``equals`` value. Each
assertion's result (``gradingResult.componentResults``) is a score named by its ``metric`` or
``promptfoo:<type>`` with its pass, score and reason, the assertion as its spec and the Evalsite
equivalent (:func:`evalcore.loaders.promptfoo_asserts.map_assertions`) when there is one; a test
with a ``threshold`` keeps the assertions as measurements and promptfoo's overall verdict as the
score ``promptfoo:threshold``. Named metrics are scores ``metric:<name>`` (measurements). An
errored result (``failureReason`` 2, or an error with no grading) is an *errored* case. Tokens,
cost and latency are kept per result; each prompt's ``metrics`` (named-metric totals, counts,
cost) as the run's aggregates.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.loaders._peer import (
    PeerCase,
    PeerFile,
    PeerItem,
    PeerRun,
    PeerScore,
    arr,
    count,
    load_json,
    load_jsonl,
    need,
    number,
    obj,
    stable_key,
    unique_name,
    unit_score,
)
from evalcore.loaders._records import auto_case_id
from evalcore.loaders.errors import CaseBankError
from evalcore.loaders.promptfoo_asserts import map_assertions

__all__ = ["looks_like", "read"]

_FAILURE_ERROR = 2  # promptfoo's ResultFailureReason.ERROR (1 is ASSERT)
_JSON_HEAD = re.compile(r'"(evalId|promptfooVersion|gradingResult|componentResults|testIdx|promptIdx)"')
_CSV_CELL = re.compile(r"^\[(PASS|FAIL|ERROR)\] \(([-0-9.eE]+|NaN)?(?:, .*?)?\)\s*\n?(.*)$", re.DOTALL)


def looks_like(head: str) -> bool:
    """Whether the first bytes of a file are a promptfoo results file (JSON, JSONL or CSV)."""
    text = head.lstrip()
    if text.startswith("{"):
        return (bool(_JSON_HEAD.search(text)) and '"results"' in text) or '"gradingResult"' in text
    first = text.split("\n", 1)[0]
    return bool(re.search(r"(^|,)\"?\[[^\]]+\] [^,]*\"?,(\"?Status\"?)(,|$)", first)) or bool(
        re.search(r"(^|,)\"?\[(PASS|FAIL|ERROR)\] \(", text[:4096])
    )


def read(path: Path, display: str, sha256: str) -> PeerFile:
    """Read a promptfoo results file (see the module doc).

    Raises:
        CaseBankError: A file that is not one, or a result missing what a run needs (named by
            its JSON path, e.g. ``results.results[3].provider``).
    """
    text = path.read_bytes().decode("utf-8-sig", errors="replace").lstrip()
    if text.startswith("{"):
        first = _first_object(text)
        if first is not None and "results" not in first:
            rows = load_jsonl(path, display)
            results: list[tuple[str, int | None, Any]] = [(f"line {line}", line, row) for line, row in rows]
            return _build(display, sha256, results, doc={}, file_format="promptfoo results (jsonl)")
        # a one-line document was parsed whole by _first_object already: not parsed twice
        whole = first if first is not None and "\n" not in text.strip() else load_json(path, display)
        doc = need(whole, dict, path=display, where="$", what="a JSON object")
        block = doc.get("results")
        if isinstance(block, list):  # the oldest files: results at the top
            block = {"results": block}
        block = need(block, dict, path=display, where="results", what="an object (promptfoo's results)")
        version = block.get("version")
        items = need(block.get("results"), list, path=display, where="results.results", what="a list of results")
        listed: list[tuple[str, int | None, Any]] = [
            (f"results.results[{i}]", None, row) for i, row in enumerate(items)
        ]
        fmt = f"promptfoo results v{version} (json)" if isinstance(version, int) else "promptfoo results (json)"
        return _build(display, sha256, listed, doc=doc, file_format=fmt)
    return _read_csv(path, display, sha256)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _first_object(text: str) -> dict[str, Any] | None:
    """The first line as a JSON object when it is one on its own (a JSONL file, or a one-line
    document), else ``None`` (also when it holds NaN / Infinity: the strict reader then says where)."""
    try:
        found = json.loads(text.split("\n", 1)[0], parse_constant=_not_json)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _build(
    display: str, sha256: str, results: list[tuple[str, int | None, Any]], *, doc: dict[str, Any], file_format: str
) -> PeerFile:
    meta = obj(doc.get("metadata"))
    config = obj(doc.get("config"))
    block = obj(doc.get("results"))
    prompts = arr(block.get("prompts"))
    eval_id = str(doc.get("evalId") or doc.get("id") or "")
    started = _iso(meta.get("evaluationCreatedAt") or block.get("timestamp") or doc.get("createdAt"))
    rows = [
        (where, line, need(row, dict, path=display, where=where, what="a result object", line=line))
        for where, line, row in results
    ]
    # cases: one per test (testIdx, else identical vars), in test order
    var_names = {tuple(sorted(_vars(row).keys())) for _, _, row in rows}
    single = next(iter(var_names))[0] if len(var_names) == 1 and len(next(iter(var_names))) == 1 else None
    cases: dict[str, PeerCase] = {}
    test_keys: dict[Any, str] = {}
    seen_vars: dict[str, int] = {}
    for where, line, row in sorted(rows, key=lambda r: _test_index(r[2], r[0])):
        test = _test_index(row, where)
        if test in test_keys:
            continue
        vars_ = _vars(row)
        canon = json.dumps(vars_, sort_keys=True, ensure_ascii=False)
        seen_vars[canon] = seen_vars.get(canon, 0) + 1
        stable_key(vars_, path=display, where=_vars_where(where, line), line=line)  # refuses what cannot be stored
        key = auto_case_id(vars_, occurrence=seen_vars[canon])
        test_keys[test] = key
        test_case = obj(row.get("testCase"))
        asserts = [a for a in test_case.get("assert") or [] if isinstance(a, dict)]
        expected = map_assertions(asserts).expected if asserts else MISSING
        extra = {k: test_case[k] for k in ("description", "metadata") if test_case.get(k)}
        cases[key] = PeerCase(
            key=key,
            input=vars_[single] if single is not None else vars_,
            expected=expected,
            metadata={"promptfoo": {"vars": vars_, **extra}},
            where=where,
        )
    runs: dict[str, PeerRun] = {}
    equivalents: dict[str, dict[str, Any] | None] = {}
    for where, line, row in rows:
        provider = _provider(row, display, where, line)
        prompt = obj(row.get("prompt"))
        label = str(prompt.get("label") or prompt.get("raw") or "")
        prompt_idx = row.get("promptIdx")
        run_key = f"prompt{prompt_idx}:{provider}" if isinstance(prompt_idx, int) else f"{provider}|{label}"
        run = runs.get(run_key)
        if run is None:
            info = prompts[prompt_idx] if isinstance(prompt_idx, int) and 0 <= prompt_idx < len(prompts) else {}
            info = obj(info)
            run = runs[run_key] = PeerRun(
                key=run_key,
                name=f"{provider} · {label}"[:200],
                target_id=f"promptfoo:{provider}",
                variant=label or provider,
                model=provider,
                started=started,
                original_ids={
                    "eval_id": eval_id,
                    "prompt_id": row.get("promptId") or info.get("id"),
                    "prompt_idx": prompt_idx,
                    "provider": provider,
                    "prompt_label": label,
                },
                aggregates=dict(info.get("metrics") or {}) if isinstance(info.get("metrics"), dict) else {},
            )
        run.items.append(_item(row, test_keys[_test_index(row, where)], display, where, line, equivalents))
    ordered = sorted(runs.values(), key=lambda r: (str(r.original_ids.get("prompt_idx")), r.key))
    for run in ordered:
        latencies = [i.latency_ms for i in run.items if i.latency_ms is not None]
        if started is not None and latencies:
            run.finished = started + sum(latencies) / 1000.0
    description = str(config.get("description") or "").strip()
    set_name = description or (f"promptfoo {eval_id}" if eval_id else Path(display).stem)
    return PeerFile(
        path=display,
        sha256=sha256,
        tool="promptfoo",
        tool_version=str(meta.get("promptfooVersion") or ""),
        file_format=file_format,
        set_name=set_name[:200],
        cases=list(cases.values()),
        runs=ordered,
    )


def _vars_where(where: str, line: int | None) -> str:
    """The JSON path of a result's vars (``vars`` alone in a JSONL / CSV file, located by line)."""
    return "vars" if line is not None else f"{where}.vars"


def _test_index(row: dict[str, Any], where: str) -> Any:
    test = row.get("testIdx")
    if isinstance(test, int) and not isinstance(test, bool):
        return (0, test, "")
    return (1, 0, json.dumps(_vars(row), sort_keys=True, ensure_ascii=False))


def _vars(row: dict[str, Any]) -> dict[str, Any]:
    found = row.get("vars")
    if not isinstance(found, dict):
        test_case = row.get("testCase")
        found = test_case.get("vars") if isinstance(test_case, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def _provider(row: dict[str, Any], display: str, where: str, line: int | None) -> str:
    provider = row.get("provider")
    if isinstance(provider, dict):
        name = provider.get("label") or provider.get("id")
    else:
        name = provider
    if not isinstance(name, str) or not name:
        raise CaseBankError(
            "every result names its provider (an id, or {id, label})",
            path=display,
            line=line,
            field=f"{where}.provider",
        )
    return name


def _item(
    row: dict[str, Any],
    key: str,
    display: str,
    where: str,
    line: int | None,
    equivalents: dict[str, dict[str, Any] | None],
) -> PeerItem:
    response = obj(row.get("response"))
    grading = row.get("gradingResult")
    if grading is not None and not isinstance(grading, dict):
        raise CaseBankError(
            f"gradingResult is an object (or null), not {type(grading).__name__}",
            path=display,
            line=line,
            field=f"{where}.gradingResult",
        )
    error_text = row.get("error") if isinstance(row.get("error"), str) and row.get("error") else None
    errored = row.get("failureReason") == _FAILURE_ERROR or (grading is None and error_text is not None)
    if errored and error_text is None:
        error_text = str(response.get("error") or "promptfoo recorded an error")
    test_case = obj(row.get("testCase"))
    threshold = number(test_case.get("threshold"))
    scores = [] if grading is None else _scores(grading, threshold, row, display, where, line, equivalents)
    named = obj(row.get("namedScores"))
    seen = {s.name: 1 for s in scores}
    for name, value in named.items():
        unit, raw = unit_score(value)
        scores.append(
            PeerScore(
                name=unique_name(f"metric:{name}", seen),
                value=unit,
                passed=None,
                spec={"kind": "promptfoo:named-metric", "metric": name},
                raw=raw,
            )
        )
    usage = obj(response.get("tokenUsage"))
    cost = number(row.get("cost"))
    return PeerItem(
        case_key=key,
        output=None if errored else response.get("output"),
        error=error_text if errored else None,
        scores=scores,
        latency_ms=number(row.get("latencyMs")),
        tokens_in=count(usage.get("prompt")),
        tokens_out=count(usage.get("completion")),
        cost=cost if cost is not None else number(response.get("cost")),
        model=None,
        original_id=str(row.get("id") or f"{row.get('testIdx')}:{row.get('promptIdx')}"),
        metadata={
            "promptfoo": {
                k: v
                for k, v in {
                    "test_idx": row.get("testIdx"),
                    "prompt_idx": row.get("promptIdx"),
                    "prompt": (row.get("prompt") or {}).get("raw") if isinstance(row.get("prompt"), dict) else None,
                    "score": row.get("score"),
                    "success": row.get("success"),
                    "failure_reason": row.get("failureReason"),
                    "finish_reason": response.get("finishReason"),
                    "cached": response.get("cached"),
                    "token_usage": usage or None,
                    "grading_tokens": (grading or {}).get("tokensUsed"),
                    "assertion_error": error_text if not errored else None,
                }.items()
                if v is not None
            }
        },
    )


def _scores(
    grading: dict[str, Any],
    threshold: float | None,
    row: dict[str, Any],
    display: str,
    where: str,
    line: int | None,
    equivalents: dict[str, dict[str, Any] | None],
) -> list[PeerScore]:
    components = grading.get("componentResults")
    if not isinstance(components, list) or not components:
        components = [grading] if isinstance(grading.get("assertion"), dict) else []
    scores: list[PeerScore] = []
    seen: dict[str, int] = {}
    for index, component in enumerate(components):
        at = f"{where}.gradingResult.componentResults[{index}]"
        need(component, dict, path=display, where=at, what="an assertion result", line=line)
        assertion = obj(component.get("assertion"))
        kind = str(assertion.get("type") or "assertion")
        passed = component.get("pass")
        if not isinstance(passed, bool):
            raise CaseBankError(
                "an assertion result has pass true or false", path=display, line=line, field=f"{at}.pass"
            )
        unit, raw = unit_score(component.get("score"))
        equivalent = _equivalent(assertion, equivalents)
        if threshold is not None:
            raw["passed"] = passed
        scores.append(
            PeerScore(
                name=unique_name(str(assertion.get("metric") or f"promptfoo:{kind}"), seen),
                value=unit,
                passed=None if threshold is not None else passed,
                reason=str(component.get("reason") or ""),
                spec={"kind": f"promptfoo:{kind}", **{k: v for k, v in assertion.items() if k != "type"}},
                equivalent=equivalent,
                raw=raw,
            )
        )
    if threshold is not None or not scores:
        success = row.get("success") if isinstance(row.get("success"), bool) else grading.get("pass")
        unit, raw = unit_score(grading.get("score"))
        name = "promptfoo:threshold" if threshold is not None else "promptfoo"
        spec: dict[str, Any] = {"kind": name}
        if threshold is not None:
            spec["threshold"] = threshold
        scores.append(
            PeerScore(
                name=unique_name(name, seen),
                value=unit,
                passed=success if isinstance(success, bool) else None,
                reason=str(grading.get("reason") or ""),
                spec=spec,
                raw=raw,
            )
        )
    return scores


def _equivalent(assertion: dict[str, Any], seen: dict[str, dict[str, Any] | None]) -> dict[str, Any] | None:
    """The Evalsite spec of one assertion (:func:`map_assertions`), ``None`` when it has none or
    only in part; ``seen`` remembers each distinct assertion of the file (a results file repeats
    its few assertions in every result: mapped once each)."""
    if not assertion:
        return None
    key = repr(assertion)  # promptfoo writes one assertion the same way in every result
    if key not in seen:
        mapped = map_assertions([assertion])
        seen[key] = mapped.specs[0] if mapped.specs and not mapped.unscored else None
    found = seen[key]
    return None if found is None else dict(found)


def _iso(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# --- CSV -------------------------------------------------------------------------------------


def _read_csv(path: Path, display: str, sha256: str) -> PeerFile:
    text = path.read_bytes().decode("utf-8-sig", errors="strict")
    table = list(csv.reader(io.StringIO(text)))
    if not table:
        raise CaseBankError("an empty CSV", path=display)
    header = table[0]
    prompt_cols = [i for i, name in enumerate(header) if re.match(r"^\[[^\]]+\] ", name)]
    if not prompt_cols:
        raise CaseBankError("no prompt column ('[provider] prompt label') in the header", path=display, line=1)
    newer = prompt_cols[0] + 1 < len(header) and header[prompt_cols[0] + 1] == "Status"
    var_cols = [i for i in range(prompt_cols[0]) if header[i] != "Description"]
    results: list[tuple[str, int | None, Any]] = []
    for line, cells in enumerate(table[1:], start=2):
        if not any(cell.strip() for cell in cells):
            continue
        cells = cells + [""] * (len(header) - len(cells))
        vars_ = {header[i]: cells[i] for i in var_cols}
        for prompt_idx, col in enumerate(prompt_cols):
            provider, label = re.match(r"^\[([^\]]+)\] (.*)$", header[col], re.DOTALL).groups()  # type: ignore[union-attr]
            end = prompt_cols[prompt_idx + 1] if prompt_idx + 1 < len(prompt_cols) else len(header)
            group = {header[i]: cells[i] for i in range(col + 1, end)}
            row = _csv_result(cells[col], group, newer, display, line, header[col])
            if row is None:
                continue
            row.update(provider={"id": provider}, prompt={"label": label}, promptIdx=prompt_idx, testIdx=line - 2)
            row["vars"] = vars_
            results.append((f"line {line} column {header[col]!r}", line, row))
    return _build(display, sha256, results, doc={}, file_format="promptfoo results (csv)")


def _csv_result(
    cell: str, group: dict[str, str], newer: bool, display: str, line: int, column: str
) -> dict[str, Any] | None:
    if newer:
        status = group.get("Status", "")
        if not status and not cell:
            return None
        if status not in ("PASS", "FAIL", "ERROR"):
            raise CaseBankError("Status is PASS, FAIL or ERROR", path=display, line=line, field="Status")
        output, score_text, reason = cell, group.get("Score", ""), group.get("Grader Reason", "")
        named_text = group.get("Named Scores", "")
    else:
        if not cell:
            return None
        found = _CSV_CELL.match(cell)
        if found is None:
            raise CaseBankError(
                "a cell starts [PASS], [FAIL] or [ERROR] (score)", path=display, line=line, field=column
            )
        status, score_text, body = found.group(1), found.group(2) or "", found.group(3).strip()
        output, _, reason = (
            body.partition("\n\nPass Reason: ") if "\n\nPass Reason: " in body else body.partition("\n\nFail Reason: ")
        )
        named_text = ""
    try:
        score = float(score_text) if score_text not in ("", "NaN") else None
    except ValueError:
        raise CaseBankError(f"not a number: {score_text!r}", path=display, line=line, field="Score") from None
    named: dict[str, Any] = {}
    if named_text:
        try:
            named = json.loads(named_text)
        except ValueError:
            raise CaseBankError(
                "Named Scores is a JSON object", path=display, line=line, field="Named Scores"
            ) from None
    errored = status == "ERROR"
    return {
        "response": {"output": output},
        "success": status == "PASS",
        "score": score,
        "namedScores": obj(named),
        "failureReason": _FAILURE_ERROR if errored else (0 if status == "PASS" else 1),
        "error": (reason or "promptfoo: ERROR") if errored else None,
        "gradingResult": None if errored else {"pass": status == "PASS", "score": score, "reason": reason},
    }
