"""Every write of online scoring: rules, matching traces to rules, scoring them, backfill.

The worker's steps (:mod:`apps.online.tasks` calls them; tests call them directly):

1. :func:`match_traces` — each new trace against each active rule: a matched trace gets one
   :class:`~apps.online.models.OnlineScore` row, ``pending`` (reason ``queued``) when sampled,
   else ``not_sampled``.
2. :func:`score_pending` — pending rows scored with the rule's scorer specs (the engine's
   :func:`evalcore.scoring.score_run`, as offline runs score). A judge that could not be reached
   or rate-limited the call leaves the row ``pending`` with that reason, tried again on the next
   pass, ``errored`` after :data:`MAX_ATTEMPTS`; a rule needing a judge when none is configured
   keeps its rows ``pending`` with the reason "no judge configured" and asks nothing.
3. Alerts and their webhooks: :mod:`apps.online.alerting`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.core.bulk import columns, encoders, json_text, update_rows
from apps.evals.models import EvalCase, EvalSet, InvocationKind, InvocationStatus
from apps.evals.results.ledger import (
    JUDGE_NAMES,
    REASON_NO_JUDGE,
    REASON_NOT_SCORED,
    Invocation,
    error_reason,
    record_invocations,
)
from apps.online.judging import judge_services, needs_judge
from apps.online.matching import is_sampled, matches, needs_span_facts, span_facts, window_start
from apps.online.models import OnlineScore, Reason, ScoreState, ScoringRule
from apps.traces.models import Event, Run, RunStatus
from evalcore.errors import InvalidInputError
from evalcore.scorer_registry import scorer_from_spec
from evalcore.scorers.base import Scorer, ScorerServices, ScorerSpecError
from evalcore.scoring import score_run
from evalcore.serial import score_records
from evalcore.tracing import SPAN_BEGIN
from evalcore.types import Case, CaseStatus, RunRecord, Score, case_outcome

INGESTED_PREFIX = "otlp:"
"""Run ids of ingested traces (``apps.traces.otel_ingest``): rules apply to these only."""
MAX_ATTEMPTS = 3
"""Passes a trace is tried when the judge is unreachable or rate-limited before it is errored."""
BATCH = 200
"""Pending rows scored per step (one query, one bulk update)."""
CONCURRENCY = 8
"""Traces scored at once within a step (judge calls in flight)."""
RETRYABLE = (Reason.JUDGE_UNREACHABLE, Reason.RATE_LIMITED)

_UPDATED = ["state", "reason", "detail", "attempts", "scores", "values", "passed", "scored_at"]
_UPDATED_COLUMNS = columns(OnlineScore, _UPDATED)


# -- rules ---------------------------------------------------------------------------------------


def checked_scorers(specs: Any) -> list[Scorer]:
    """The scorers of a rule's ``scorers`` field (a list of specs as ``evalsite eval --scorer``
    takes them: a string or a ``{name, args}`` object).

    Raises:
        InvalidInputError: Not a non-empty list, or a spec naming no known scorer or bad
            arguments (``field`` ``scorers``; the message names the spec's index).
    """
    if not isinstance(specs, list) or not specs:
        raise InvalidInputError('scorers: give a non-empty list of scorer specs, e.g. ["exact_match"]', field="scorers")
    scorers = []
    for index, spec in enumerate(specs):
        try:
            scorers.append(scorer_from_spec(spec))
        except (ScorerSpecError, KeyError, TypeError) as exc:
            raise InvalidInputError(f"scorers[{index}]: {exc}", field="scorers") from None
    return scorers


MAX_WINDOW_MINUTES = 366 * 24 * 60
"""The longest window a rule may cut, minutes (366 days): longer ones overflow date arithmetic on
traces' timestamps, and no alert compares windows of years."""


def check_rule_fields(values: dict[str, Any]) -> None:
    """Refuse a rule's bad values with a message naming the field.

    Raises:
        InvalidInputError: ``sample_rate`` outside 0..1, ``window_minutes`` outside 1..MAX_WINDOW_MINUTES,
            ``attributes`` not an object, ``tags`` not a list of strings, bad ``scorers``.
    """
    rate = values.get("sample_rate", 1.0)
    if not isinstance(rate, int | float) or not 0.0 <= float(rate) <= 1.0:
        raise InvalidInputError(f"sample_rate: {rate!r} is not a share in 0..1", field="sample_rate")
    minutes = values.get("window_minutes", 60)
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_WINDOW_MINUTES:
        raise InvalidInputError(
            f"window_minutes: {minutes!r} is not a whole number of minutes in 1..{MAX_WINDOW_MINUTES:,} (a window"
            " lasts at least 1 minute and at most 366 days)",
            field="window_minutes",
        )
    if not isinstance(values.get("attributes", {}), dict):
        raise InvalidInputError("attributes: give an object of attribute name -> value", field="attributes")
    tags = values.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidInputError("tags: give a list of strings", field="tags")
    if "scorers" in values:
        checked_scorers(values["scorers"])


def create_rule(*, name: str, scorers: list[Any], owner: Any = None, **fields: Any) -> ScoringRule:
    """Create a scoring rule (the portal's form, the API and the admin call this).

    Raises:
        InvalidInputError: A bad field (see :func:`check_rule_fields`) or a name in use.
    """
    values = {"scorers": scorers, **fields}
    check_rule_fields(values)
    if ScoringRule.objects.filter(name=name).exists():
        raise InvalidInputError(f"name: a rule named {name!r} exists", field="name")
    return ScoringRule.objects.create(name=name, owner=owner, **values)


def update_rule(rule: ScoringRule, **fields: Any) -> ScoringRule:
    """Change a rule's fields. Rows already matched keep their sample and scores (a change
    applies to traces matched from now on; run a backfill to apply it to past ones).

    Raises:
        InvalidInputError: A bad field (see :func:`check_rule_fields`).
    """
    check_rule_fields(fields)
    for key, value in fields.items():
        setattr(rule, key, value)
    rule.save()
    return rule


# -- matching ------------------------------------------------------------------------------------


@dataclass(slots=True)
class MatchOutcome:
    """What matching stored: rows new this time, by rule id ``{rule: (matched, sampled)}``."""

    by_rule: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def matched(self) -> int:
        return sum(m for m, _ in self.by_rule.values())

    @property
    def sampled(self) -> int:
        return sum(s for _, s in self.by_rule.values())


def _match(rules: Sequence[ScoringRule], runs: Sequence[Run]) -> MatchOutcome:
    outcome = MatchOutcome()
    if not rules or not runs:
        return outcome
    facts = span_facts(runs) if any(needs_span_facts(r) for r in rules) else {}
    rows = []
    for rule in rules:
        matched = sampled = 0
        for run in runs:
            if not matches(rule, run, facts.get(run.pk)):
                continue
            take = is_sampled(run.trace_id, rule.sample_rate)
            matched += 1
            sampled += take
            rows.append(
                OnlineScore(
                    rule=rule,
                    run=run,
                    window_start=window_start(run.started, rule.window_minutes),
                    sampled=take,
                    state=ScoreState.PENDING if take else ScoreState.NOT_SAMPLED,
                    reason=Reason.QUEUED if take else Reason.NONE,
                )
            )
        outcome.by_rule[rule.pk] = (matched, sampled)
    # a trace whose spans arrive in several requests is matched once (the unique rule+run)
    OnlineScore.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
    return outcome


_RUN_FIELDS = ("id", "run_id", "trace_id", "target_id", "model", "started", "metadata")


def match_traces(run_ids: Sequence[str]) -> MatchOutcome:
    """Match ingested traces (by run id) against every active rule; idempotent.

    A trace is matched once its root span (no parent) is stored: spans exported before their
    root (a batch processor sends children first) leave it for the request that brings the root,
    which sends the trace again (its answer and input are read from the whole trace then).
    """
    rules = list(ScoringRule.objects.filter(active=True))
    wanted = [r for r in run_ids if r.startswith(INGESTED_PREFIX)]
    runs = list(Run.objects.filter(run_id__in=wanted).only(*_RUN_FIELDS)) if rules and wanted else []
    rooted = set(
        Event.objects.filter(run_id__in=[r.pk for r in runs], type=SPAN_BEGIN, payload__parent_span_id=None)
        .values_list("run_id", flat=True)
        .distinct()
    )
    return _match(rules, [r for r in runs if r.pk in rooted])


def backfill(rule: ScoringRule, *, start: datetime, end: datetime, chunk: int = 1000) -> MatchOutcome:
    """Match the ingested traces that started in ``[start, end)`` against ``rule`` (then
    :func:`score_pending` scores the sampled ones). Traces it matched before are left as they are.

    Raises:
        InvalidInputError: ``end`` is not after ``start``.
    """
    if end <= start:
        raise InvalidInputError(f"backfill: end {end.isoformat()} is not after start {start.isoformat()}", field="end")
    total = MatchOutcome(by_rule={rule.pk: (0, 0)})
    runs = Run.objects.filter(run_id__startswith=INGESTED_PREFIX, started__gte=start, started__lt=end).order_by("pk")
    last = 0
    while True:
        page = list(runs.filter(pk__gt=last).only(*_RUN_FIELDS)[:chunk])
        if not page:
            return total
        got = _match([rule], page).by_rule[rule.pk]
        before = total.by_rule[rule.pk]
        total.by_rule[rule.pk] = (before[0] + got[0], before[1] + got[1])
        last = page[-1].pk


# -- scoring -------------------------------------------------------------------------------------


@dataclass(slots=True)
class ScoreOutcome:
    """What one :func:`score_pending` call did, in rows."""

    scored: int = 0
    errored: int = 0
    pending: int = 0
    """Left pending with a reason (judge unreachable, rate-limited, no judge configured)."""
    seconds: float = 0.0


def trace_input(run: Run) -> Any:
    """What a trace was asked: its last user message (from ``metadata["input_messages"]``),
    else all its input messages, else ``None``."""
    messages = (run.metadata or {}).get("input_messages") or []
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return message.get("content")
    return messages or None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def reference_expected(eval_set: EvalSet | None) -> dict[str, Any]:
    """The reference set's expected values by canonical input (cases without one left out)."""
    if eval_set is None:
        return {}
    cases = EvalCase.objects.filter(eval_set=eval_set, has_expected=True).values_list("input", "expected")
    return {_canonical(i): e for i, e in cases.iterator(chunk_size=1000)}


def classify(score: Score) -> Reason:
    """Why a score errored, as a coverage reason, read as the judge ledger reads it
    (:func:`apps.evals.results.ledger.error_reason`): no judge model, the judge's endpoint
    rate-limiting (429) or failing / timing out (unreachable), else a scorer error (an answer
    that does not parse included)."""
    kind = str(score.metadata.get("kind") or "")
    text = (score.error or "").lower()
    if kind == "no_model":
        return Reason.NO_JUDGE
    if kind == "model_error":
        limited = "429" in text or "rate limit" in text or "ratelimit" in text
        return Reason.RATE_LIMITED if limited else Reason.JUDGE_UNREACHABLE
    if kind == "timeout":
        return Reason.JUDGE_UNREACHABLE
    return Reason.SCORER_ERROR


def ledger_rows(run: Run, scorers: Sequence[Scorer], scores: Sequence[Score]) -> list[Invocation]:
    """The judge ledger's rows for one scoring of one trace: one per scorer, its verdict score
    (or its first) deciding the status (``apps.evals.results.ledger``)."""
    rows = []
    for scorer in scorers:
        mine = [s for s in scores if s.name == scorer.name or s.name.startswith(scorer.name + ".")]
        main = next((s for s in mine if s.name == scorer.name), mine[0] if mine else None)
        judge = scorer.name in JUDGE_NAMES
        spec = scorer.spec()
        status: str
        if main is None:
            status, reason = InvocationStatus.SKIPPED, REASON_NOT_SCORED
        elif main.error is not None:
            status, reason = error_reason(main, judge=judge)
        else:
            status, reason = InvocationStatus.DONE, ""
        meta = main.metadata if main is not None else {}
        rows.append(
            Invocation(
                kind=InvocationKind.JUDGE if judge else InvocationKind.SCORER,
                scorer=scorer.name,
                status=status,
                reason=reason,
                judge_model=str(meta.get("judge_model") or spec.args.get("judge_model") or ""),
                spec={"name": spec.name, "args": spec.args, "version": spec.version},
                trace_id=run.trace_id,
                latency_ms=_number(meta.get("judge_ms")),
                tokens_in=_whole(meta.get("judge_tokens_in")),
                tokens_out=_whole(meta.get("judge_tokens_out")),
                calls=_whole(meta.get("judge_calls")),
            )
        )
    return rows


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _whole(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(slots=True)
class _Prepared:
    scorers: list[Scorer]
    judge: bool
    expected: dict[str, Any]


def _verdict(row: OnlineScore, scores: list[Score], now: datetime) -> None:
    """Set ``row``'s state, reason, values and verdict from its scores."""
    row.attempts += 1
    row.scored_at = now
    row.scores = score_records(scores)
    row.values = {s.name: s.value for s in scores if s.error is None and isinstance(s.value, bool | int | float)}
    outcome = case_outcome(target_errored=False, scores=scores)
    errors = [classify(s) for s in scores if s.error is not None]
    retry = next((r for r in errors if r in RETRYABLE), None)
    if outcome.status is CaseStatus.ERRORED and retry is not None and row.attempts < MAX_ATTEMPTS:
        row.state, row.reason = ScoreState.PENDING, retry
        row.detail = next((s.error or "" for s in scores if s.error), "")[:2000]
    elif outcome.status is CaseStatus.ERRORED:
        row.state, row.reason = ScoreState.ERRORED, errors[0] if errors else Reason.SCORER_ERROR
        row.detail = next((s.error or "" for s in scores if s.error), "")[:2000]
        row.passed = None
    else:
        row.state, row.reason, row.detail = ScoreState.SCORED, Reason.NONE, ""
        row.passed = {CaseStatus.PASSED: True, CaseStatus.FAILED: False}.get(outcome.status)


async def _close_judges(services: ScorerServices) -> None:
    """Close the judge clients' connections of this loop before it ends (else they are collected
    open, on a closed loop)."""
    judges = services.judge.values() if isinstance(services.judge, Mapping) else [services.judge]
    for judge in judges:
        close = getattr(judge, "aclose", None)
        if close is not None:
            await close()


def _write_rows(rows: list[OnlineScore]) -> None:
    """Store the rows' outcome: one ``executemany`` UPDATE (the ORM's ``bulk_update`` builds a
    ``CASE`` per field and row: 90% of a no-op scorer's pass at 1,000 rows)."""
    enc = encoders()
    stamp = enc.datetime
    update_rows(
        OnlineScore,
        _UPDATED_COLUMNS,
        [
            (
                row.state,
                row.reason,
                row.detail,
                row.attempts,
                json_text(row.scores, enc.secrets),
                json_text(row.values, enc.secrets),
                row.passed,
                stamp(row.scored_at) if row.scored_at is not None else None,
                row.pk,
            )
            for row in rows
        ],
    )


async def _score_rows(
    items: list[tuple[OnlineScore, Case, RunRecord, list[Scorer]]], services: ScorerServices
) -> list[list[Score]]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(case: Case, record: RunRecord, scorers: list[Scorer]) -> list[Score]:
        async with gate:
            return await score_run(case, record, scorers, services=services)

    return await asyncio.gather(*(one(c, r, s) for _, c, r, s in items))


def score_pending(*, rule: ScoringRule | None = None, services: ScorerServices | None = None) -> ScoreOutcome:
    """Score every pending row due now (of ``rule``, or of every rule), :data:`BATCH` at a time.

    Each row is tried once per call: a row left pending (judge unreachable or rate-limited) waits
    for the next call. ``services`` defaults to the configured judge (:mod:`apps.online.judging`).
    """
    started = time.perf_counter()
    if services is None:
        services, problem = judge_services()
    else:
        problem = "" if services.judge is not None else "no judge configured"
    outcome = ScoreOutcome()
    prepared: dict[int, _Prepared] = {}
    pending = OnlineScore.objects.filter(state=ScoreState.PENDING).select_related("run", "rule").order_by("pk")
    if rule is not None:
        pending = pending.filter(rule=rule)
    with asyncio.Runner() as runner:  # one event loop for the whole call: the judge's client lives in it
        try:
            _score_batches(runner, pending, prepared, services, problem, outcome)
        finally:
            runner.run(_close_judges(services))
    outcome.seconds = time.perf_counter() - started
    return outcome


def _score_batches(
    runner: asyncio.Runner,
    pending: Any,
    prepared: dict[int, _Prepared],
    services: ScorerServices,
    problem: str,
    outcome: ScoreOutcome,
) -> None:
    last = 0
    while True:
        rows = list(pending.filter(pk__gt=last)[:BATCH])
        if not rows:
            break
        last = rows[-1].pk
        now = timezone.now()
        items = []
        done: list[OnlineScore] = []
        ledger: list[Invocation] = []
        for row in rows:
            prep = prepared.get(row.rule_id)
            if prep is None:
                try:
                    scorers = checked_scorers(row.rule.scorers)
                except InvalidInputError as exc:  # a rule edited in the admin to a bad spec
                    row.state, row.reason, row.detail, row.scored_at = (
                        ScoreState.ERRORED,
                        Reason.SCORER_ERROR,
                        str(exc),
                        now,
                    )
                    done.append(row)
                    continue
                prep = prepared[row.rule_id] = _Prepared(
                    scorers, needs_judge(scorers), reference_expected(row.rule.reference_set)
                )
            run = row.run
            if run.status == RunStatus.ERROR:  # an errored trace has no answer to judge (never a 0)
                message = (run.error or {}).get("message", "") if isinstance(run.error, dict) else ""
                row.state, row.reason, row.detail, row.scored_at = ScoreState.ERRORED, Reason.TRACE_ERROR, message, now
                done.append(row)
                continue
            if prep.judge and problem:
                if row.reason != Reason.NO_JUDGE:  # said once, in the row and the ledger
                    row.reason, row.detail = Reason.NO_JUDGE, problem
                    done.append(row)
                    ledger.extend(
                        Invocation(
                            kind=InvocationKind.JUDGE if s.name in JUDGE_NAMES else InvocationKind.SCORER,
                            scorer=s.name,
                            status=InvocationStatus.SKIPPED,
                            reason=REASON_NO_JUDGE,
                            trace_id=run.trace_id,
                        )
                        for s in prep.scorers
                    )
                continue
            question = trace_input(run)
            key = _canonical(question)
            case = (
                Case(id=run.run_id, input=question, expected=prep.expected[key])
                if key in prep.expected
                else Case(id=run.run_id, input=question)
            )
            record = RunRecord(
                case_id=run.run_id,
                run_id=run.run_id,
                trace_id=run.trace_id,
                output=run.final_answer,
                error=None,
                model=run.model or None,
                tokens_in=run.tokens_in,
                tokens_out=run.tokens_out,
            )
            items.append((row, case, record, prep.scorers))
        results = runner.run(_score_rows(items, services)) if items else []
        for (row, _, _, scorers), scores in zip(items, results, strict=True):
            _verdict(row, scores, now)
            done.append(row)
            ledger.extend(ledger_rows(row.run, scorers, scores))
        with transaction.atomic():  # the scores and their ledger rows commit together
            _write_rows(done)
            record_invocations(ledger)
        for row in done:
            if row.state == ScoreState.SCORED:
                outcome.scored += 1
            elif row.state == ScoreState.ERRORED:
                outcome.errored += 1
        outcome.pending += sum(1 for row in rows if row.state == ScoreState.PENDING)
