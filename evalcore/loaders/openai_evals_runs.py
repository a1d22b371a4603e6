"""OpenAI Evals exports (the hosted Evals API, read-only since 2026-10-31, shut down 2026-11-30) as
runs: the objects users saved, as the API returned them.

Read: one JSON file, a JSONL file, or a folder of ``.json`` / ``.jsonl`` files, holding any mix of
``eval`` objects (``data_source_config``, ``testing_criteria``), ``eval.run`` objects and
``eval.run.output_item`` objects, alone, in a JSON list, or in the API's list pages
(``{"object": "list", "data": [...]}``). Shapes as in the openai-python SDK's
``openai.types.evals`` (``RunRetrieveResponse``, ``runs.OutputItemListResponse``) and the API
reference; only the fields used are required, so older and newer exports read alike.

Mapping:

* **Set** (default name: the eval's ``name``): one case per data source item (each run's
  ``data_source.source.content[].item`` and each output item's ``datasource_item``). A grader
  whose ``reference`` is exactly ``{{item.FIELD}}`` names the expected field: the case's expected
  value is that field, its input the other fields (the value itself when one is left); with no
  such grader the whole item is the input. Id: ``auto-`` + a hash of the input.
* **Runs**: one per ``eval.run`` (and one per run id that only output items name). Target
  ``openai:<model>``, variant the run's name; ``completed`` -> finished, ``failed`` /
  ``canceled`` -> failed with the run's error; other statuses are kept in the aggregates.
  ``result_counts``, ``per_model_usage``, ``per_testing_criteria_results`` and ``report_url``
  are the run's aggregates; data source items with no output item are listed as *not run*.
* **Results**: one per output item: the last output message's content, ``sample.error`` as the
  case's error, the sample's usage as tokens, ``created_at`` as its start. Every grader's result
  is a score (name: the testing criterion's name) with its ``passed`` and ``score``, the
  criterion as its spec (``{"kind": "openai_evals:<type>", ...}``) and, where Evalsite has the
  same check, the equivalent: ``string_check`` comparing ``{{sample.output_text}}`` with the
  expected field (``eq`` -> ``exact_match``, ``like`` / ``ilike`` -> ``contains``). Every other
  grader (``ne``, ``text_similarity``, ``label_model``, ``score_model``, ``python``, ``multi``,
  or a check on other fields) is *imported-only*: scored, not re-runnable, and labelled so.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.loaders._json import canonical_json
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

__all__ = ["looks_like", "read"]

_OBJECTS = ("eval", "eval.run", "eval.run.output_item")
_HEAD = re.compile(r'"object"\s*:\s*"eval(\.run(\.output_item)?)?"')
_ITEM_FIELD = re.compile(r"^\{\{\s*item\.([A-Za-z0-9_]+)\s*\}\}$")
_OUTPUT_TEXT = re.compile(r"^\{\{\s*sample\.output_text\s*\}\}$")
_FAILED = ("failed", "canceled", "cancelled")


def looks_like(head: str) -> bool:
    """Whether the first bytes of a file hold an OpenAI Evals API object."""
    return bool(_HEAD.search(head))


def read(path: Path, display: str, sha256: str) -> PeerFile:
    """Read an OpenAI Evals export (see the module doc).

    Raises:
        CaseBankError: No eval / run / output item in it, more than one eval, or an object
            missing what is needed (named by file and JSON path, e.g. ``data[2].run_id``).
    """
    files = (
        sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))
        if path.is_dir()
        else [path]
    )
    found: list[tuple[str, str, dict[str, Any]]] = []  # (file, json path, object)
    for member in files:
        shown = f"{display}/{member.name}" if path.is_dir() else display
        if member.suffix == ".jsonl":
            for line, value in load_jsonl(member, shown):
                _collect(value, f"line {line}", shown, found)
        else:
            _collect(load_json(member, shown), "$", shown, found)
    evals = [(f, w, o) for f, w, o in found if o["object"] == "eval"]
    runs = [(f, w, o) for f, w, o in found if o["object"] == "eval.run"]
    outputs = [(f, w, o) for f, w, o in found if o["object"] == "eval.run.output_item"]
    if not runs and not outputs:
        raise CaseBankError("no eval.run or eval.run.output_item object: nothing to import as a run", path=display)
    eval_ids = {str(o.get("id")) for _, _, o in evals}
    if len(eval_ids) > 1:
        raise CaseBankError(
            f"one eval per import: found {len(eval_ids)} ({', '.join(sorted(eval_ids))}); "
            "import each eval's files apart",
            path=display,
        )
    evaluation = evals[0][2] if evals else {}
    criteria = _criteria(evaluation, evals[0][0] if evals else display, evals[0][1] if evals else "$")
    expected_field = next(
        (m.group(1) for c in criteria if (m := _ITEM_FIELD.match(str(c.get("reference") or ""))) is not None), None
    )
    cases: dict[str, PeerCase] = {}

    def case_for(item: Any, where: str) -> str:
        value, expected = _split(item, expected_field)
        key = stable_key(item, path=display, where=where) and auto_case_id(value)
        if key not in cases:
            meta = {"openai_evals": {"item": item}} if isinstance(item, dict) else {}
            cases[key] = PeerCase(key=key, input=value, expected=expected, metadata=meta, where=where)
        return key

    peer_runs: dict[str, PeerRun] = {}
    for shown, where, run_obj in runs:
        run_id = _text(run_obj, "id", shown, where)
        source = obj(run_obj.get("data_source"))
        content = (source.get("source") or {}).get("content") if isinstance(source.get("source"), dict) else None
        keys = []
        for index, row in enumerate(arr(content)):
            at = f"{where}.data_source.source.content[{index}]"
            row = need(row, dict, path=shown, where=at, what="a data source row {item, sample?}")
            keys.append(case_for(row.get("item"), at))
        model = str(run_obj.get("model") or source.get("model") or "")
        status = str(run_obj.get("status") or "")
        error = obj(run_obj.get("error"))
        peer_runs[run_id] = PeerRun(
            key=run_id,
            name=str(run_obj.get("name") or run_id),
            target_id=f"openai:{model}" if model else "openai_evals",
            variant=str(run_obj.get("name") or model or run_id),
            model=model,
            started=number(run_obj.get("created_at")),
            status="failed" if status in _FAILED else "finished",
            error=(str(error.get("message") or f"the run was {status}") if status in _FAILED else ""),
            original_ids={"eval_id": run_obj.get("eval_id"), "run_id": run_id, "report_url": run_obj.get("report_url")},
            aggregates={
                k: run_obj.get(k)
                for k in ("status", "result_counts", "per_model_usage", "per_testing_criteria_results", "metadata")
                if run_obj.get(k) is not None
            },
            not_run=keys,  # narrowed below to the items with no output
        )
    for shown, where, output in outputs:
        run_id = _text(output, "run_id", shown, where)
        run = peer_runs.get(run_id)
        if run is None:
            run = peer_runs[run_id] = PeerRun(
                key=run_id,
                name=run_id,
                target_id="openai_evals",
                variant=run_id,
                original_ids={"eval_id": output.get("eval_id"), "run_id": run_id},
            )
        key = case_for(output.get("datasource_item"), f"{where}.datasource_item")
        run.items.append(_item(output, key, criteria, expected_field, shown, where))
    for run in peer_runs.values():
        answered = {item.case_key for item in run.items}
        run.not_run = [key for key in dict.fromkeys(run.not_run) if key not in answered]
        times = [item.started for item in run.items if item.started is not None]
        run.finished = max(times) if times else run.started
        if run.model == "" and run.items:
            run.model = next((i.model for i in run.items if i.model), "") or ""
            if run.model:
                run.target_id = f"openai:{run.model}"
    eval_id = str(evaluation.get("id") or next(iter(peer_runs.values())).original_ids.get("eval_id") or "")
    return PeerFile(
        path=display,
        sha256=sha256,
        tool="openai_evals",
        tool_version="",
        file_format="OpenAI Evals API objects (eval, eval.run, eval.run.output_item)",
        set_name=str(evaluation.get("name") or f"openai eval {eval_id}")[:200],
        cases=list(cases.values()),
        runs=list(peer_runs.values()),
    )


def _collect(value: Any, where: str, shown: str, found: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Every eval / run / output item object in ``value`` (alone, in a list, in a list page)."""
    if isinstance(value, list):
        for index, entry in enumerate(value):
            _collect(entry, f"{where}[{index}]", shown, found)
    elif isinstance(value, dict):
        kind = value.get("object")
        if kind in _OBJECTS:
            found.append((shown, where, value))
        elif kind == "list" or "data" in value:
            _collect(value.get("data"), f"{where}.data", shown, found)


def _text(obj: dict[str, Any], name: str, shown: str, where: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise CaseBankError(f"a {obj.get('object')} object has its {name}", path=shown, field=f"{where}.{name}")
    return value


def _criteria(evaluation: dict[str, Any], shown: str, where: str) -> list[dict[str, Any]]:
    criteria = evaluation.get("testing_criteria")
    if criteria is None:
        return []
    need(criteria, list, path=shown, where=f"{where}.testing_criteria", what="a list of graders")
    return [
        need(c, dict, path=shown, where=f"{where}.testing_criteria[{i}]", what="a grader")
        for i, c in enumerate(criteria)
    ]


def _split(item: Any, expected_field: str | None) -> tuple[Any, Any]:
    """A data source item as (input, expected) (see the module doc)."""
    if not isinstance(item, dict) or expected_field is None or expected_field not in item:
        return item, MISSING
    rest = {k: v for k, v in item.items() if k != expected_field}
    return (next(iter(rest.values())) if len(rest) == 1 else rest), item[expected_field]


def _criterion(result: dict[str, Any], criteria: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The testing criterion a grader result belongs to: by id, by name, by ``name-<uuid>``."""
    name = str(result.get("name") or "")
    for test in (
        lambda c: c.get("id") == name,
        lambda c: c.get("name") == name,
        lambda c: isinstance(c.get("name"), str) and name.startswith(f"{c['name']}-"),
    ):
        matches = [c for c in criteria if test(c)]
        if len(matches) == 1:
            return matches[0]
    return None


def _equivalent(criterion: dict[str, Any], expected_field: str | None) -> dict[str, Any] | None:
    """The Evalsite scorer spec checking what the grader checks, or ``None`` (imported-only)."""
    if criterion.get("type") != "string_check" or expected_field is None:
        return None
    reference = _ITEM_FIELD.match(str(criterion.get("reference") or ""))
    if not _OUTPUT_TEXT.match(str(criterion.get("input") or "")) or reference is None:
        return None
    if reference.group(1) != expected_field:
        return None
    operation = criterion.get("operation")
    if operation == "eq":
        return {"name": "exact_match", "args": {"strip": False}}
    if operation in ("like", "ilike"):
        return {"name": "contains", "args": {"casefold": operation == "ilike"}}
    return None


def _item(
    output: dict[str, Any],
    key: str,
    criteria: list[dict[str, Any]],
    expected_field: str | None,
    shown: str,
    where: str,
) -> PeerItem:
    sample = obj(output.get("sample"))
    messages = arr(sample.get("output"))
    answer = next(
        (m.get("content") for m in reversed(messages) if isinstance(m, dict) and m.get("content") is not None), None
    )
    error = obj(sample.get("error"))
    error_text = str(error.get("message") or error.get("code") or "") or None
    usage = obj(sample.get("usage"))
    results = output.get("results")
    need(results, list, path=shown, where=f"{where}.results", what="a list of grader results")
    scores: list[PeerScore] = []
    seen: dict[str, int] = {}
    for index, result in enumerate(arr(results)):
        at = f"{where}.results[{index}]"
        need(result, dict, path=shown, where=at, what="a grader result {name, passed, score}")
        passed = result.get("passed")
        if not isinstance(passed, bool):
            raise CaseBankError("a grader result has passed true or false", path=shown, field=f"{at}.passed")
        criterion = _criterion(result, criteria)
        kind = str((criterion or {}).get("type") or result.get("type") or "grader")
        unit, raw = unit_score(result.get("score"))
        raw.update({k: v for k, v in result.items() if k not in ("name", "passed", "score", "type") and v is not None})
        spec: dict[str, Any] = {"kind": f"openai_evals:{kind}"}
        if criterion is not None:
            spec.update({k: v for k, v in criterion.items() if k != "type"})
        else:
            spec["grader"] = result.get("name")
        scores.append(
            PeerScore(
                name=unique_name(str((criterion or {}).get("name") or result.get("name") or kind), seen),
                value=unit,
                passed=passed,
                reason=_reason(result),
                spec=spec,
                equivalent=None if criterion is None else _equivalent(criterion, expected_field),
                raw=raw,
            )
        )
    return PeerItem(
        case_key=key,
        output=None if error_text else answer,
        error=error_text,
        scores=scores,
        tokens_in=count(usage.get("prompt_tokens")),
        tokens_out=count(usage.get("completion_tokens")),
        model=str(sample.get("model") or "") or None,
        started=number(output.get("created_at")),
        original_id=str(output.get("id") or ""),
        metadata={
            "openai_evals": {
                k: v
                for k, v in {
                    "output_item_id": output.get("id"),
                    "datasource_item_id": output.get("datasource_item_id"),
                    "status": output.get("status"),
                    "finish_reason": sample.get("finish_reason"),
                    "usage": usage or None,
                    "input": sample.get("input"),
                    "sampling": {
                        k: sample.get(k)
                        for k in ("temperature", "top_p", "seed", "max_completion_tokens")
                        if sample.get(k) is not None
                    }
                    or None,
                    "item_key": canonical_json(output.get("datasource_item"))[:200],
                }.items()
                if v is not None
            }
        },
    )


def _reason(result: dict[str, Any]) -> str:
    """A grader's explanation when its result carries one (a model grader's sample output)."""
    sample = result.get("sample")
    if isinstance(sample, dict):
        for name in ("reasoning", "explanation", "output_text"):
            if isinstance(sample.get(name), str):
                return str(sample[name])
    return ""
