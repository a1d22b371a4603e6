"""Recording the judge reliability ledger: one ``ScorerInvocation`` row per scorer or judge
invocation, offline (an eval run's case) or online (a trace).

The interface others build on:

* :class:`Invocation` — one row's values (kind, scorer, status, reason, latency, tokens, cost...).
* :func:`record_invocations` — write a batch of them (one multi-row insert, inside the caller's
  transaction when there is one; rows already stored are skipped, so a batch written twice is one).
* :func:`invocations_from_result` — the rows a finished case's scores imply (the result writer calls
  it on each batch, so ledger rows are committed with the results they describe, no extra commit).

Reasons are short fixed phrases (``REASON_*``) followed, for errors, by the scorer's own first line,
so the ledger can be grouped by reason: "no judge configured", "judge unreachable", "rate-limited",
"judge timed out", "invalid judge JSON", "empty output", "scorer error", "scorer timeout",
"target errored", "not scored".
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.core.bulk import Encoders, clean_text, columns, encoders, insert_rows, json_text
from apps.evals.models import EvalRun, InvocationKind, InvocationStatus, ScorerInvocation
from evalcore.judge.outcome import JUDGE_SCORE
from evalcore.types import CaseResult, Score

REASON_NO_JUDGE = "no judge configured"
REASON_UNREACHABLE = "judge unreachable"
REASON_RATE_LIMITED = "rate-limited"
REASON_JUDGE_TIMEOUT = "judge timed out"
REASON_INVALID_JSON = "invalid judge JSON"
REASON_EMPTY_OUTPUT = "empty output"
REASON_EMPTY_INPUT = "empty input"
REASON_SCORER_ERROR = "scorer error"
REASON_SCORER_TIMEOUT = "scorer timeout"
REASON_TARGET_ERRORED = "target errored"
REASON_NOT_SCORED = "not scored"
REASON_REUSED = "reused from the source run"
"""Skipped by ``evalsite rejudge --only``: the case was not re-asked, its source verdict kept."""

REUSED_KEY = "reused_from"
"""Score metadata key naming the eval run a score was copied from (not asked again)."""

JUDGE_NAMES = frozenset({JUDGE_SCORE, "rule_adherence", "ragas", "deepeval", "autoevals"})
"""Scorer names that call a model (their rows are kind ``judge``)."""

_FIELDS = (
    "kind",
    "scorer",
    "spec",
    "judge_model",
    "eval_run",
    "case_id",
    "repeat_index",
    "trace_id",
    "status",
    "reason",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "calls",
    "cost_usd",
    "created",
    "finished",
)
_KINDS = frozenset(InvocationKind.values)
_STATUSES = frozenset(InvocationStatus.values)
_UNIQUE = ("eval_run", "case_id", "repeat_index", "scorer", "trace_id")
_REASON_MAX = ScorerInvocation._meta.get_field("reason").max_length or 300


@dataclass(slots=True)
class Invocation:
    """One scorer or judge invocation, as the ledger stores it.

    Attributes:
        kind: ``"judge"`` (calls a model) or ``"scorer"``.
        scorer: The scorer's name (``rubric_judge``, ``exact_match``...).
        status: ``queued`` / ``running`` / ``done`` / ``errored`` / ``skipped``.
        reason: Why, for ``errored`` and ``skipped`` (a ``REASON_*`` phrase, then detail); required then.
        judge_model: The judge model's name ("" for a plain scorer).
        spec: The scorer spec record ``{name, args, version}``: for online rows (offline ones leave it
            empty: their eval run's ``scorer_specs`` hold it once).
        eval_run_id: Offline: the eval run (with ``case_id`` and ``repeat_index``).
        case_id: Offline: the case.
        repeat_index: Offline: the repeat (``None`` online).
        trace_id: Online scoring: the trace scored ("" offline).
        latency_ms: Wall time of the invocation, milliseconds (``None``: not measured).
        tokens_in: Judge prompt tokens (``None`` for a plain scorer).
        tokens_out: Judge completion tokens.
        calls: Model calls made (samples and retries included; 0: answered from the cache).
        cost_usd: Cost in US dollars (``None``: no price known; computed on read from the price table).
        created: When it was queued (default: now).
        finished: When it ended (``None`` while queued or running).

    Raises:
        ValueError: At construction, on an unknown kind or status, an ``errored`` / ``skipped`` row
            with no reason, or a row that names neither an eval run nor a trace.
    """

    kind: str
    scorer: str
    status: str
    reason: str = ""
    judge_model: str = ""
    spec: Mapping[str, Any] | None = None
    eval_run_id: str | None = None
    case_id: str = ""
    repeat_index: int | None = None
    trace_id: str = ""
    latency_ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    calls: int | None = None
    cost_usd: float | None = None
    created: dt.datetime | None = None
    finished: dt.datetime | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"invocation kind must be one of {InvocationKind.values}, got {self.kind!r}")
        if self.status not in _STATUSES:
            raise ValueError(f"invocation status must be one of {InvocationStatus.values}, got {self.status!r}")
        if self.status in (InvocationStatus.ERRORED, InvocationStatus.SKIPPED) and not self.reason:
            raise ValueError(f"an {self.status} invocation of {self.scorer!r} needs a reason")
        if not self.eval_run_id and not self.trace_id:
            raise ValueError(f"an invocation of {self.scorer!r} names neither an eval run nor a trace")


def record_invocations(invocations: Iterable[Invocation]) -> int:
    """Write a batch of invocations (one multi-row insert; ``COPY`` on PostgreSQL).

    Inside the caller's transaction when there is one (the result writer's: the rows commit with
    the results); else in its own. A row already stored (same eval run, case, repeat, scorer and
    trace) is skipped.

    Returns:
        The rows inserted.

    Raises:
        django.db.DatabaseError: The database refused the batch.
    """
    rows = invocation_rows(invocations)
    if not rows:
        return 0
    with transaction.atomic():
        return insert_rows(ScorerInvocation, _COLUMNS, rows, unique=_UNIQUE_COLUMNS)


def write_ledger(
    results: Sequence[CaseResult],
    eval_run_id: str | None,
    specs_cache: dict[str, dict[str, Any]],
    enc: Encoders,
    *,
    savepoint: bool = True,
) -> int:
    """The result writer's hook: the ledger rows of a batch of finished cases, inserted inside the
    writer's transaction (so they commit with the results, with no commit of their own).

    Args:
        results: The batch's finished cases.
        eval_run_id: Their eval run (default: the id in each run's metadata).
        specs_cache: The writer's own ``{eval run id: {scorer name: spec record}}``, read once per run.
        enc: The batch's encoders.
        savepoint: As :func:`apps.core.bulk.insert_rows` (``False``: a clash aborts the transaction).

    Returns:
        The rows inserted.
    """
    invocations: list[Invocation] = []
    for result in results:
        run_id = eval_run_id or str(result.run.metadata.get("eval_run_id"))
        specs = specs_cache.get(run_id)
        if specs is None:
            stored = EvalRun.objects.filter(pk=run_id).values_list("scorer_specs", flat=True).first()
            specs = specs_cache[run_id] = {str(s.get("name")): s for s in (stored or []) if isinstance(s, dict)}
        invocations.extend(_invocations(result, run_id, specs))
    rows = invocation_rows(invocations, enc)
    return insert_rows(ScorerInvocation, _COLUMNS, rows, unique=_UNIQUE_COLUMNS, savepoint=savepoint)


def invocation_rows(invocations: Iterable[Invocation], enc: Encoders | None = None) -> list[tuple[Any, ...]]:
    """Database tuples for :data:`_COLUMNS` (for a writer that inserts them itself); ``enc``: the
    batch's encoders (looked up when not given)."""
    enc = enc or encoders()
    now = timezone.now()
    stamp = enc.datetime
    now_value = stamp(now)  # one stored form of "now" for the batch
    no_spec = json_text({}, enc.secrets)
    secrets = enc.secrets
    rows = []
    for inv in invocations:
        rows.append(
            (
                inv.kind,
                clean_text(inv.scorer[:200], secrets),
                json_text(dict(inv.spec), enc.secrets) if inv.spec else no_spec,
                clean_text(inv.judge_model[:200], secrets),
                inv.eval_run_id,
                inv.case_id,
                inv.repeat_index,
                inv.trace_id,
                inv.status,
                # an error's text can hold a credential (a URL's userinfo, a key echoed back):
                # redacted as the scores' copy of it is
                clean_text(inv.reason, secrets)[:_REASON_MAX],
                inv.latency_ms,
                inv.tokens_in,
                inv.tokens_out,
                inv.calls,
                inv.cost_usd,
                stamp(inv.created) if inv.created is not None else now_value,
                _finished(inv, now_value, stamp),
            )
        )
    return rows


def _finished(inv: Invocation, now_value: Any, stamp: Any) -> Any:
    """When the invocation ended: given, else now for an ended one, NULL while queued or running."""
    if inv.finished is not None:
        return stamp(inv.finished)
    return None if inv.status in (InvocationStatus.QUEUED, InvocationStatus.RUNNING) else now_value


_COLUMNS = columns(ScorerInvocation, _FIELDS)
_UNIQUE_COLUMNS = columns(ScorerInvocation, _UNIQUE)


def invocations_from_result(
    result: CaseResult,
    *,
    eval_run_id: str,
    specs: Sequence[Mapping[str, Any]] = (),
    reused: bool = False,
) -> list[Invocation]:
    """The ledger rows one finished case implies: one per scorer that gave scores (its verdict
    score, or its first); for a case with no score at all, one ``skipped`` row per scorer of
    ``specs`` (the target errored, or nothing scored it).

    Args:
        result: The finished case.
        eval_run_id: The eval run it belongs to.
        specs: The run's scorer spec records (``EvalRun.scorer_specs``), so a scorer that gave
            nothing is still a row.
        reused: The scores were copied from a source run, not asked (``rejudge --only``):
            rows are ``skipped`` with :data:`REASON_REUSED`.
    """
    spec_by_name = {str(s.get("name")): s for s in specs if isinstance(s, Mapping)}
    return _invocations(result, eval_run_id, spec_by_name, reused)


def _invocations(
    result: CaseResult, eval_run_id: str, spec_by_name: Mapping[str, Mapping[str, Any]], reused: bool = False
) -> list[Invocation]:
    """:func:`invocations_from_result` with the run's specs by name built once (the writer's path)."""
    names = tuple(spec_by_name)
    by_scorer: dict[str, list[Score]] = {}
    for score in result.scores:
        by_scorer.setdefault(_scorer_of(score.name, names), []).append(score)
    record = result.run
    rows: list[Invocation] = []
    for name, scores in by_scorer.items():
        main = next((s for s in scores if s.name == name), scores[0])
        rows.append(_row(name, main, spec_by_name.get(name), result, eval_run_id, reused))
    for name, spec in spec_by_name.items():
        # a scorer whose scores carry other names (a predicate named after its function) is
        # not told apart from one that gave nothing: only a case with no score at all says so
        if name in by_scorer or by_scorer:
            continue
        reason = REASON_TARGET_ERRORED if record.error is not None else REASON_NOT_SCORED
        rows.append(
            Invocation(
                kind=_kind(name),
                scorer=name,
                status=InvocationStatus.SKIPPED,
                reason=reason,
                judge_model=str((spec.get("args") or {}).get("judge_model") or ""),
                eval_run_id=eval_run_id,
                case_id=result.case.id,
                repeat_index=record.repeat_index,
            )
        )
    return rows


def _kind(name: str) -> str:
    return InvocationKind.JUDGE if name in JUDGE_NAMES else InvocationKind.SCORER


@functools.lru_cache(maxsize=4096)
def _scorer_of(score_name: str, names: tuple[str, ...]) -> str:
    """The scorer a score came from: the spec name it is or prefixes (``rubric_judge.accuracy``
    -> ``rubric_judge``), else the score name's first dotted part (cached: a run repeats them)."""
    for name in names:
        if score_name == name or score_name.startswith(name + "."):
            return name
    return score_name.split(".", 1)[0]


def _row(
    name: str,
    score: Score,
    spec: Mapping[str, Any] | None,
    result: CaseResult,
    eval_run_id: str,
    reused: bool,
) -> Invocation:
    meta = score.metadata or {}
    judge_model = str(meta.get("judge_model") or ((spec or {}).get("args") or {}).get("judge_model") or "")
    status: str
    reused = reused or bool(meta.get(REUSED_KEY))
    if reused:
        status, reason = InvocationStatus.SKIPPED, REASON_REUSED
    elif score.error is not None:
        status, reason = error_reason(score, judge=name in JUDGE_NAMES)
    else:
        status, reason = InvocationStatus.DONE, ""
    is_judge = name in JUDGE_NAMES
    return Invocation(
        kind=_kind(name),
        scorer=name,
        status=status,
        reason=reason,
        judge_model=judge_model,
        eval_run_id=eval_run_id,
        case_id=result.case.id,
        repeat_index=result.run.repeat_index,
        latency_ms=_number(meta.get("judge_ms")) if not reused else None,
        tokens_in=_int(meta.get("judge_tokens_in")) if is_judge and not reused else None,
        tokens_out=_int(meta.get("judge_tokens_out")) if is_judge and not reused else None,
        calls=_int(meta.get("judge_calls")) if is_judge and not reused else None,
    )


def error_reason(score: Score, *, judge: bool) -> tuple[str, str]:
    """``(status, reason)`` of a failed score: ``skipped`` when nothing was asked (no judge, an
    empty output), else ``errored``; the reason a fixed phrase, then the error's first line."""
    meta = score.metadata or {}
    kind = str(meta.get("kind") or "")
    detail = (score.error or "").strip().splitlines()[0] if score.error else ""
    if kind == "no_model":
        return InvocationStatus.SKIPPED, REASON_NO_JUDGE
    if kind == "empty_output":
        return InvocationStatus.SKIPPED, REASON_EMPTY_OUTPUT
    if kind == "empty_input":
        return InvocationStatus.SKIPPED, REASON_EMPTY_INPUT
    lowered = detail.lower()
    if detail.startswith("Timeout: scorer"):
        return InvocationStatus.ERRORED, f"{REASON_SCORER_TIMEOUT}: {detail}"
    if not judge or not kind:
        return InvocationStatus.ERRORED, f"{REASON_SCORER_ERROR}: {detail}"
    if kind == "timeout":
        phrase = REASON_JUDGE_TIMEOUT
    elif kind == "model_error":
        rate_limited = "429" in lowered or "rate limit" in lowered or "ratelimit" in lowered
        phrase = REASON_RATE_LIMITED if rate_limited else REASON_UNREACHABLE
    else:  # every parse failure kind: not JSON, wrong shape, out of range...
        phrase = REASON_INVALID_JSON
    return InvocationStatus.ERRORED, f"{phrase}: {detail}"


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
