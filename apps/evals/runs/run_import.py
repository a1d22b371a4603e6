"""Other tools' past runs imported as stored eval runs (``evalsite import-run``): promptfoo results,
OpenAI Evals exports and Braintrust experiments, read by :mod:`evalcore.loaders.peer_runs`
(Inspect logs: :mod:`apps.evals.runs.inspect_import`).

One file (or export folder) is imported in **one transaction**: its set's new cases, every run it
holds and every result, or nothing.

* **Set.** ``set_name`` (``--set``), else the file's own name for it (promptfoo: the config's
  description; OpenAI: the eval's name; Braintrust: the experiment's name), created when it does
  not exist, so a second import of the same file, or the next export of the same eval, lands in
  the same set. Each case of the file is matched to the set's case of the same id, else to the
  one case with the identical input. Cases left over are *created* (a new version of the set)
  when the set is the file's own (no ``--set``) or ``add_cases``; else *skipped*: their results
  are not imported, and the summary names them (matched / created / skipped, by id).
* **Runs.** One eval run per run of the file (promptfoo: provider x prompt; OpenAI: eval run;
  Braintrust: experiment), status ``finished`` (``failed`` with the tool's error), its started /
  finished times, model, target and variant from the file (``target_id`` / ``variant`` override
  them). ``scorer_specs`` stays empty: an imported run is never re-scored with Evalsite's
  scorers by default (``rescore`` refuses it without ``--scorer``, and a re-score is a new run
  beside it). Provenance: a :class:`~apps.evals.models.RunSource` row (tool, version, file name
  and SHA-256, run key, original ids, imported-only scorers) and the same in ``config``
  (``source: import``), with the tool's run aggregates (named metrics, result counts, usage).
* **Results.** One per item (a case met again in one run is its next repeat), the tool's scores
  as Evalsite scores (name, value 0..1, verdict, reason), each with ``metadata`` ``imported``
  (the tool), ``spec`` (the tool's scorer spec), ``equivalent`` (Evalsite's spec, or ``None``),
  ``imported_only`` (no equivalent: scored, not re-runnable; the case page labels each score
  *imported* / *imported only*) and ``tool_figures`` (the tool's numbers that do not fit 0..1).
  Tokens, latency and cost (``metadata.cost_usd``) are kept per result, with a two-event trace
  (the call and its answer).

Importing the same file into the same set again writes nothing: each run's key is unique per
(set, file SHA-256, run key) (:class:`~apps.evals.models.RunSource`), and the run ids derive from
the same three, so two imports racing also end with one run.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Max

from apps.core.storable import case_bank_nul_refusal
from apps.evals.models import EvalCase, EvalResult, EvalRun, EvalRunStatus, EvalSet, RunSource
from apps.evals.results.batches import BatchWriter
from apps.evals.runs.naming import create_numbered_run
from apps.evals.sets.cases import import_cases, refresh_set_hashes
from apps.evals.sets.versions import current_version
from evalcore.errors import InvalidInputError
from evalcore.inference import make_run_id
from evalcore.jsonvalue import MISSING, to_json
from evalcore.loaders import cases_content_hash, nul_at, surrogate_at
from evalcore.loaders.peer_runs import PeerCase, PeerFile, PeerItem, PeerRun, PeerScore, read_peer_runs
from evalcore.report import ReportBuilder
from evalcore.serial import to_record
from evalcore.splits import assign_split
from evalcore.targets import preview
from evalcore.tracing import SPAN_BEGIN, SPAN_END, TraceEvent
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord, Score

__all__ = ["ImportedRun", "PeerImport", "import_peer_file", "peer_run_id"]

_BATCH = 200
TOOL_NAMES = {
    "promptfoo": "promptfoo",
    "openai_evals": "OpenAI Evals",
    "braintrust": "Braintrust",
    "inspect": "Inspect",
}
"""How each tool is named on pages and in messages."""


@dataclass(slots=True)
class ImportedRun:
    """One run of the file and what became of it.

    Attributes:
        eval_run: The stored run (new, or the one an earlier import of the same file made).
        created: False when the same file was imported into this set before (nothing written).
        run: The run as read.
        statuses: Results stored by status (``passed``, ``failed``, ``errored``, ``unscored``).
        skipped_results: Results not imported because their case was skipped.
    """

    eval_run: EvalRun
    created: bool
    run: PeerRun
    statuses: dict[str, int] = field(default_factory=dict)
    skipped_results: int = 0


@dataclass(slots=True)
class PeerImport:
    """What importing one file did.

    Attributes:
        peer: The file as read.
        eval_set: The set its runs belong to.
        set_created: The set did not exist and was made from the file.
        matched: Case ids of the file matched to cases of the set (by id or identical input).
        created: Case ids added to the set.
        skipped: Case ids of the file with no case in the set, not added (``--set`` without
            ``--add-cases``): their results were not imported.
        runs: One per run of the file, in file order.
    """

    peer: PeerFile
    eval_set: EvalSet
    set_created: bool = False
    matched: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    runs: list[ImportedRun] = field(default_factory=list)


def peer_run_id(sha256: str, set_name: str, run_key: str) -> str:
    """The id of the run a file's run makes in a set (16 hex digits)."""
    text = f"peer-run\x00{sha256}\x00{set_name}\x00{run_key}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def import_peer_file(
    path: str | Path,
    *,
    set_name: str | None = None,
    add_cases: bool = False,
    target_id: str | None = None,
    variant: str | None = None,
    pass_threshold: float | None = None,
    peer: PeerFile | None = None,
    user: Any = None,
) -> PeerImport:
    """Import a promptfoo results file, an OpenAI Evals export or a Braintrust experiment (see
    the module doc); ``peer`` is the file already read (the command reads every file first).

    Args:
        pass_threshold: For scores that carry no verdict (Braintrust's), a value at or above it
            passes, below fails; ``None`` keeps them measurements (the case is then *unscored*).

    Raises:
        evalcore.loaders.CaseBankError: The file cannot be read (file, JSON path and field named).
        InvalidInputError: ``pass_threshold`` outside 0..1.
    """
    if pass_threshold is not None and not 0.0 <= pass_threshold <= 1.0:
        raise InvalidInputError(f"--pass-threshold {pass_threshold} is not in 0..1", field="pass_threshold")
    peer = peer if peer is not None else read_peer_runs(path)
    name = (set_name or peer.set_name).strip()[:200]
    own_set = set_name is None
    for _ in range(2):
        try:
            with transaction.atomic():
                return _import(
                    peer,
                    name,
                    add_cases=add_cases or own_set,
                    target_id=target_id,
                    variant=variant,
                    pass_threshold=pass_threshold,
                    user=user,
                )
        except IntegrityError:
            # another import of the same file won the race: the second pass finds its runs
            continue
    raise InvalidInputError(f"{peer.path}: could not import (another import of the same file kept colliding)")


def _import(
    peer: PeerFile,
    name: str,
    *,
    add_cases: bool,
    target_id: str | None,
    variant: str | None,
    pass_threshold: float | None,
    user: Any,
) -> PeerImport:
    eval_set = EvalSet.objects.filter(name=name).first()
    summary = PeerImport(peer=peer, eval_set=eval_set or EvalSet(name=name))
    matched, missing = _match(peer.cases, eval_set)
    summary.matched = sorted(matched)
    case_ids = dict(matched)
    if missing and add_cases:
        _refuse_unstorable(peer, missing)
        summary.set_created = eval_set is None
        eval_set = _add_cases(name, eval_set, missing, peer, user=user)
        summary.created = [case.key for case in missing]
        case_ids.update({case.key: case.key for case in missing})
    else:
        summary.skipped = [case.key for case in missing]
    if eval_set is None:
        raise InvalidInputError(
            f"{peer.path}: no eval set {name!r} and none of the file's {len(peer.cases)} case(s) may be added: "
            "pass --add-cases, or leave out --set to import into the file's own set",
            field="set",
        )
    summary.eval_set = eval_set
    eval_set.refresh_from_db(fields=["content_hash"])
    splits = dict(EvalCase.objects.filter(eval_set=eval_set).values_list("case_id", "split"))
    by_key = {case.key: case for case in peer.cases}
    for run in peer.runs:
        summary.runs.append(
            _import_run(
                peer,
                run,
                eval_set,
                case_ids,
                splits,
                by_key,
                target_id=target_id,
                variant=variant,
                pass_threshold=pass_threshold,
                user=user,
            )
        )
    return summary


def _key(value: Any) -> str:
    return json.dumps(to_json(value), sort_keys=True, ensure_ascii=False)


def _match(cases: list[PeerCase], eval_set: EvalSet | None) -> tuple[dict[str, str], list[PeerCase]]:
    """File case key -> the set's case id (by id, else by the one case with the same input), and
    the file's cases with no case in the set."""
    rows = list(EvalCase.objects.filter(eval_set=eval_set).values_list("case_id", "input")) if eval_set else []
    ids = {case_id for case_id, _ in rows}
    inputs = Counter(_key(value) for _, value in rows)
    by_input = {_key(value): case_id for case_id, value in rows if inputs[_key(value)] == 1}
    matched: dict[str, str] = {}
    missing: list[PeerCase] = []
    for case in cases:
        found = case.key if case.key in ids else by_input.get(_key(case.input))
        if found is None:
            missing.append(case)
        else:
            matched[case.key] = found
    return matched, missing


def _add_cases(name: str, eval_set: EvalSet | None, cases: list[PeerCase], peer: PeerFile, *, user: Any) -> EvalSet:
    """Add the file's cases to the set (creating it), recorded as the set's next version."""
    new = [
        Case(id=c.key, input=c.input, expected=c.expected, metadata={**c.metadata, "imported_from": peer.tool})
        for c in cases
    ]
    if eval_set is None:
        return import_cases(
            name=name, cases=new, content_hash=cases_content_hash(new), source_path=peer.path, user=user
        ).eval_set
    start = (EvalCase.objects.filter(eval_set=eval_set).aggregate(m=Max("position"))["m"] or 0) + 1
    EvalCase.objects.bulk_create(
        [
            EvalCase(
                eval_set=eval_set,
                case_id=case.id,
                input=to_json(case.input),
                expected=None if case.expected is MISSING else to_json(case.expected),
                has_expected=case.expected is not MISSING,
                split=assign_split(name, case.id),
                metadata=to_json(case.metadata),
                position=start + offset,
            )
            for offset, case in enumerate(new)
        ],
        batch_size=500,
    )
    refresh_set_hashes([eval_set.pk], source=f"{TOOL_NAMES[peer.tool]} results {peer.path}", user=user)
    return eval_set


def _import_run(
    peer: PeerFile,
    run: PeerRun,
    eval_set: EvalSet,
    case_ids: dict[str, str],
    splits: dict[str, str],
    by_key: dict[str, PeerCase],
    *,
    target_id: str | None,
    variant: str | None,
    pass_threshold: float | None,
    user: Any,
) -> ImportedRun:
    source = RunSource.objects.filter(eval_set=eval_set, sha256=peer.sha256, run_key=run.key[:255]).first()
    if source is not None:
        return ImportedRun(source.eval_run, False, run)
    run_id = peer_run_id(peer.sha256, eval_set.name, run.key)
    items = [item for item in run.items if item.case_key in case_ids]
    used_splits = {splits.get(case_ids[item.case_key]) for item in items}
    repeats = Counter(item.case_key for item in items)
    epochs = max(repeats.values(), default=1)
    imported_only = run.imported_only()
    eval_run = create_numbered_run(
        id=run_id,
        eval_set=eval_set,
        target_id=_one_line(target_id or run.target_id),
        variant=_one_line(run.variant if variant is None else variant),
        split=used_splits.pop() if len(used_splits) == 1 and None not in used_splits else "all",
        model=_one_line(run.model),
        scorer_specs=[],
        config=_provenance(peer, run, imported_only),
        set_hash=eval_set.content_hash,
        set_version=current_version(eval_set),
        status=EvalRunStatus.RUNNING,
        n_total=len(items),
        created_by=user if getattr(user, "is_authenticated", False) else None,
        started=_when(run.started) or datetime.now(tz=UTC),
        name=_one_line(run.name) or None,
    )
    RunSource.objects.create(
        eval_run=eval_run,
        eval_set=eval_set,
        tool=peer.tool,
        tool_version=peer.tool_version[:64],
        file_format=peer.file_format[:64],
        file_name=Path(peer.path).name[:255],
        file_path=str(Path(peer.path).resolve()),
        sha256=peer.sha256,
        run_key=run.key[:255],
        original_ids=to_json(run.original_ids),
        imported_only=imported_only,
    )
    builder = ReportBuilder(run_id)
    writer = BatchWriter(target_id=eval_run.target_id, eval_run_id=run_id, rescore=False)
    results: list[CaseResult] = []
    events: list[TraceEvent] = []
    seen: Counter[str] = Counter()
    for item in items:
        case_id = case_ids[item.case_key]
        repeat = seen[item.case_key]
        seen[item.case_key] += 1
        case = by_key[item.case_key]
        result, trace = _result(
            peer, item, case, case_id, splits.get(case_id), eval_run, repeat, epochs, pass_threshold
        )
        builder.add(result)
        results.append(result)
        events.extend(trace)
        if len(results) >= _BATCH:
            writer.write(events, results)
            events.clear()
            results.clear()
    if results:
        writer.write(events, results)
    elapsed = (run.finished - run.started) if run.finished is not None and run.started is not None else 0.0
    report = builder.build(elapsed_s=max(0.0, elapsed))
    failed = run.status == "failed"
    EvalRun.objects.filter(pk=run_id).update(
        status=EvalRunStatus.FAILED if failed else EvalRunStatus.FINISHED,
        finished=_when(run.finished) or eval_run.started,
        summary=to_record(report, json_mode=True),
        error=run.error if failed else "",
        n_total=report.n,
    )
    eval_run.refresh_from_db()
    statuses = dict(
        EvalResult.objects.filter(eval_run_id=run_id).values_list("status").annotate(n=Count("id")).order_by()
    )
    return ImportedRun(eval_run, True, run, statuses, skipped_results=len(run.items) - len(items))


def _provenance(peer: PeerFile, run: PeerRun, imported_only: list[str]) -> dict[str, Any]:
    """What the run's ``config`` records of where it came from (the RunSource row, plus more)."""
    record: dict[str, Any] = to_json(
        {
            "source": "import",
            "tool": peer.tool,
            "tool_name": TOOL_NAMES[peer.tool],
            "tool_version": peer.tool_version,
            "file_format": peer.file_format,
            "file": str(Path(peer.path).resolve()),
            "file_name": Path(peer.path).name,
            "sha256": peer.sha256,
            "run_key": run.key,
            "original_ids": run.original_ids,
            "aggregates": run.aggregates,
            "imported_only": imported_only,
            "equivalents": run.equivalents(),
            "not_run": run.not_run,
        }
    )
    return record


def _scores(item: PeerItem, tool: str, pass_threshold: float | None) -> list[Score]:
    scores = []
    for peer_score in item.scores:
        passed = peer_score.passed
        if passed is None and pass_threshold is not None and peer_score.value is not None and tool == "braintrust":
            passed = peer_score.value >= pass_threshold
        value: Any = peer_score.value if peer_score.value is not None else passed
        if value is None:
            value = json.dumps(peer_score.raw.get("score")) if "score" in peer_score.raw else None
        if value is None:
            continue  # nothing measured, nothing judged: no score (never a 0)
        scores.append(
            Score(
                name=peer_score.name,
                value=value,
                passed=passed,
                explanation=peer_score.reason or None,
                metadata=_score_metadata(peer_score, tool),
            )
        )
    return scores


def _score_metadata(score: PeerScore, tool: str) -> dict[str, Any]:
    record: dict[str, Any] = to_json(
        {
            "imported": tool,
            "spec": score.spec,
            "equivalent": score.equivalent,
            "imported_only": score.equivalent is None,
            **({"tool_figures": score.raw} if score.raw else {}),
        }
    )
    return record


def _result(
    peer: PeerFile,
    item: PeerItem,
    case: PeerCase,
    case_id: str,
    split: str | None,
    eval_run: EvalRun,
    repeat: int,
    epochs: int,
    pass_threshold: float | None,
) -> tuple[CaseResult, list[TraceEvent]]:
    run_id = make_run_id(eval_run.pk, case_id, repeat, epochs)
    error = ErrorInfo(f"{peer.tool}_error", item.error) if item.error else None
    started = item.started if item.started is not None else (eval_run.started.timestamp() if eval_run.started else 0.0)
    record = RunRecord(
        case_id=case_id,
        run_id=run_id,
        trace_id=run_id,
        repeat_index=repeat,
        output=None if error else to_json(item.output),
        error=error,
        started_at=started,
        elapsed_ms=item.latency_ms or 0.0,
        model=item.model or eval_run.model or None,
        tokens_in=item.tokens_in,
        tokens_out=item.tokens_out,
        metadata=to_json(
            {
                "variant": eval_run.variant,
                "eval_run_id": eval_run.pk,
                "split": split,
                "source": peer.tool,
                "finish_reason": "error" if error else "stop",
                "original_id": item.original_id,
                **({"cost_usd": item.cost} if item.cost is not None else {}),
                **item.metadata,
            }
        ),
    )
    scored = Case(id=case_id, input=to_json(case.input), expected=case.expected, split=split)
    result = CaseResult(case=scored, run=record, scores=_scores(item, peer.tool, pass_threshold))
    span = {"span_id": "s0", "parent_span_id": None, "kind": "invoke_agent", "source": peer.tool}
    end = {
        **span,
        "elapsed_ms": round(record.elapsed_ms, 3),
        "status": "error" if error else "ok",
        "output_preview": preview(record.output),
        "tokens_in": record.tokens_in,
        "tokens_out": record.tokens_out,
        "model": record.model,
        **({"error": {"type": error.type, "message": error.message}} if error else {}),
    }
    name = eval_run.target_id
    trace = [
        TraceEvent(run_id, run_id, 0, started, SPAN_BEGIN, name, {**span, "input_preview": preview(case.input)}),
        TraceEvent(run_id, run_id, 1, started + record.elapsed_ms / 1000.0, SPAN_END, name, end),
    ]
    return result, trace


def _one_line(text: str) -> str:
    """A tool's label as a run's name / target / variant: one line (control characters, NUL and
    lone surrogates become spaces, runs of spaces one), at most 200 characters."""
    cleaned = "".join(" " if unicodedata.category(c) in ("Cc", "Cs") else c for c in text)
    return " ".join(cleaned.split())[:200]


class UnstorableCaseError(InvalidInputError):
    """A case to add holds text this database cannot store (a NUL on PostgreSQL, a lone surrogate
    on any), as a case bank holding one is refused."""

    field = "add_cases"


def _refuse_unstorable(peer: PeerFile, cases: list[PeerCase]) -> None:
    """Refuse the file before anything is written when a case to add holds a NUL character the
    database cannot store, or a lone UTF-16 surrogate, naming the case, where in the file and where
    in the value.

    Raises:
        UnstorableCaseError: The first such case.
    """
    why = case_bank_nul_refusal()
    for case in cases:
        for part, value in (("input", case.input), ("expected", case.expected), ("metadata", case.metadata)):
            if value is MISSING:
                continue
            found = surrogate_at(value)
            if found is not None:
                raise UnstorableCaseError(
                    f"{peer.path}: case at {case.where}: its {part}{found[0]} holds a lone UTF-16 surrogate "
                    f"(U+{ord(found[1]):04X}), text no database can store; nothing was imported"
                )
            where = nul_at(value) if why is not None else None
            if where is not None:
                raise UnstorableCaseError(
                    f"{peer.path}: case at {case.where}: its {part}{where} holds a NUL character (U+0000): {why}; "
                    "nothing was imported"
                )


def _when(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=UTC) if ts is not None else None
