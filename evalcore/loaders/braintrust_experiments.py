"""Braintrust experiments as runs: the experiment's events as Braintrust's API returns them.

Why Braintrust (of Langfuse dataset runs, LangSmith experiments and Braintrust experiments): its
``GET /v1/experiment/{id}/fetch`` answer is one self-contained, documented object per case
(``ExperimentEvent`` in the OpenAPI spec Braintrust publishes and versions at
github.com/braintrustdata/braintrust-openapi, Apache-2.0): input, output, expected, error,
scores, metadata and timing metrics in the same row, linked into a trace by ``span_id`` /
``root_span_id``. A Langfuse dataset run item only points at a trace (the scores live on the
trace, the input on the dataset item: three objects to join, fetched separately), and a
LangSmith experiment is runs plus feedback plus examples, again separate objects with no
published file format.

Read: a fetch answer ``{"events": [...], "cursor": ...}``, a JSON list of such pages or of
events, or JSONL with one event a line; optionally ``{"experiment": {...the experiment
object: id, name, project_id, created...}, "events": [...]}`` (the experiment object as
``GET /v1/experiment/{id}`` returns it). Each event needs ``id``, ``span_id`` and
``root_span_id`` (required by the spec) and ``experiment_id``.

Mapping: one run per ``experiment_id``; a root span (``is_root``, or no ``span_parents``) is one
case's result: input, expected (the case's expected value), output, error, ``scores`` (each a
score named as in Braintrust, value 0..1, *no verdict*: Braintrust scores are measurements; an
import can set one with a pass threshold), ``metrics.start`` / ``end`` as start and latency,
tokens from the root's metrics or summed over its ``llm`` child spans, the model from its
metadata or an ``llm`` child span's; a ``score`` child span's ``metadata.rationale`` (or text
output) is its score's reason. The same input met again in one experiment (trials) is a repeat
of its case. Case id: ``auto-`` + a hash of the input. Scores are imported-only (Braintrust's
scorer code is not in the export).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from evalcore.jsonvalue import MISSING
from evalcore.loaders._peer import (
    PeerCase,
    PeerFile,
    PeerItem,
    PeerRun,
    PeerScore,
    count,
    load_json,
    load_jsonl,
    need,
    number,
    obj,
    stable_key,
    unit_score,
)
from evalcore.loaders.errors import CaseBankError

__all__ = ["looks_like", "read"]

_HEAD = re.compile(r'"experiment_id"\s*:')
_REQUIRED = ("id", "span_id", "root_span_id", "experiment_id")


def looks_like(head: str) -> bool:
    """Whether the first bytes of a file hold Braintrust experiment events."""
    return bool(_HEAD.search(head)) and '"root_span_id"' in head


def read(path: Path, display: str, sha256: str) -> PeerFile:
    """Read Braintrust experiment events (see the module doc).

    Raises:
        CaseBankError: No events, or an event missing a required field (named by its JSON path,
            e.g. ``events[3].root_span_id``).
    """
    if path.is_dir():
        raise CaseBankError("a Braintrust experiment is one file (its events), not a folder", path=display)
    experiment: dict[str, Any] = {}
    events: list[tuple[str, int | None, dict[str, Any]]] = []
    text = path.read_bytes()[:4096].decode("utf-8-sig", errors="replace").lstrip()
    if text.startswith("{") and _one_line_object(text):
        for line, value in load_jsonl(path, display):
            events.append(
                (f"line {line}", line, need(value, dict, path=display, where="$", what="an event", line=line))
            )
    else:
        doc = load_json(path, display)
        pages = doc if isinstance(doc, list) else [doc]
        for page_index, page in enumerate(pages):
            where = f"[{page_index}]" if isinstance(doc, list) else ""
            if isinstance(page, dict) and isinstance(page.get("events"), list):
                if isinstance(page.get("experiment"), dict):
                    experiment = page["experiment"]
                for index, event in enumerate(page["events"]):
                    at = f"{where}.events[{index}]".lstrip(".")
                    events.append((at, None, need(event, dict, path=display, where=at, what="an event")))
            elif isinstance(page, dict):
                events.append((where or "$", None, page))
            else:
                need(page, dict, path=display, where=where or "$", what="a fetch page {events} or an event")
    if not events:
        raise CaseBankError("no experiment events in it", path=display)
    for where, at_line, event in events:
        for name in _REQUIRED:
            if not isinstance(event.get(name), str) or not event.get(name):
                raise CaseBankError(
                    "every experiment event has it (Braintrust's ExperimentEvent)",
                    path=display,
                    line=at_line,
                    field=f"{where}.{name}" if at_line is None else name,
                )
    children: dict[str, list[dict[str, Any]]] = defaultdict(list)
    roots: list[tuple[str, dict[str, Any]]] = []
    for where, _, event in events:
        if event.get("is_root") is True or not event.get("span_parents"):
            roots.append((where, event))
        else:
            children[event["root_span_id"]].append(event)
    if not roots:
        raise CaseBankError("no root span (is_root, or no span_parents): no case result in it", path=display)
    cases: dict[str, PeerCase] = {}
    runs: dict[str, PeerRun] = {}
    for where, event in sorted(roots, key=lambda r: number((r[1].get("metrics") or {}).get("start")) or 0.0):
        value = event.get("input")
        key = stable_key(value, path=display, where=f"{where}.input")
        expected = event["expected"] if "expected" in event and event["expected"] is not None else MISSING
        if key not in cases:
            origin = obj(event.get("origin"))
            cases[key] = PeerCase(
                key=key,
                input=value,
                expected=expected,
                metadata={
                    "braintrust": {k: v for k, v in {"origin": origin or None, "tags": event.get("tags")}.items() if v}
                },
                where=where,
            )
        experiment_id = event["experiment_id"]
        run = runs.get(experiment_id)
        if run is None:
            name = (
                str(experiment.get("name") or experiment_id)
                if experiment.get("id") in (None, experiment_id)
                else experiment_id
            )
            run = runs[experiment_id] = PeerRun(
                key=experiment_id,
                name=name,
                target_id="braintrust",
                variant=name,
                original_ids={"experiment_id": experiment_id, "project_id": event.get("project_id")},
                aggregates={k: experiment[k] for k in ("repo_info", "metadata", "commit") if experiment.get(k)},
            )
        run.items.append(_item(event, key, children.get(event["root_span_id"], [])))
    for run in runs.values():
        starts = [i.started for i in run.items if i.started is not None]
        ends = [i.started + (i.latency_ms or 0.0) / 1000.0 for i in run.items if i.started is not None]
        run.started = min(starts) if starts else None
        run.finished = max(ends) if ends else None
        run.model = next((i.model for i in run.items if i.model), "") or ""
        if run.model:
            run.target_id = f"braintrust:{run.model}"
    first = next(iter(runs.values()))
    return PeerFile(
        path=display,
        sha256=sha256,
        tool="braintrust",
        tool_version="",
        file_format="Braintrust experiment events (API v1 fetch)",
        set_name=str(experiment.get("name") or f"braintrust experiment {first.key}")[:200],
        cases=list(cases.values()),
        runs=list(runs.values()),
    )


def _one_line_object(text: str) -> bool:
    try:
        value = json.loads(text.split("\n", 1)[0])
    except ValueError:
        return False
    return isinstance(value, dict) and "events" not in value


def _item(event: dict[str, Any], key: str, spans: list[dict[str, Any]]) -> PeerItem:
    metrics = obj(event.get("metrics"))
    start, end = number(metrics.get("start")), number(metrics.get("end"))
    llm = [s for s in spans if isinstance(s.get("span_attributes"), dict) and s["span_attributes"].get("type") == "llm"]
    tokens_in: int | None = count(metrics.get("prompt_tokens"))
    tokens_out: int | None = count(metrics.get("completion_tokens"))
    if tokens_in is None and llm:
        tokens_in = sum(count((s.get("metrics") or {}).get("prompt_tokens")) or 0 for s in llm)
        tokens_out = sum(count((s.get("metrics") or {}).get("completion_tokens")) or 0 for s in llm)
    meta = obj(event.get("metadata"))
    model = meta.get("model") or next(
        (s["metadata"].get("model") for s in llm if isinstance(s.get("metadata"), dict) and s["metadata"].get("model")),
        None,
    )
    reasons = {}
    for span in spans:
        attributes = obj(span.get("span_attributes"))
        if attributes.get("type") == "score" and attributes.get("name"):
            span_meta = obj(span.get("metadata"))
            why = span_meta.get("rationale") or (span.get("output") if isinstance(span.get("output"), str) else None)
            if why:
                reasons[str(attributes["name"])] = str(why)
    scores = []
    raw_scores = obj(event.get("scores"))
    for name, value in raw_scores.items():
        if value is None:
            continue  # a scorer that did not score this case: no score, not a 0
        unit, raw = unit_score(value)
        scores.append(
            PeerScore(
                name=str(name),
                value=unit,
                passed=None,
                reason=reasons.get(str(name), ""),
                spec={"kind": "braintrust:score", "scorer": name},
                raw=raw,
            )
        )
    error = event.get("error")
    return PeerItem(
        case_key=key,
        output=None if error else event.get("output"),
        error=None if not error else (error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)),
        scores=scores,
        latency_ms=(end - start) * 1000.0 if start is not None and end is not None and end >= start else None,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        model=str(model) if model else None,
        started=start,
        original_id=str(event["id"]),
        metadata={
            "braintrust": {
                k: v
                for k, v in {
                    "id": event.get("id"),
                    "span_id": event.get("span_id"),
                    "root_span_id": event.get("root_span_id"),
                    "metadata": meta or None,
                    "tags": event.get("tags"),
                    "spans": len(spans) + 1,
                }.items()
                if v
            }
        },
    )
