"""One batch of the result writer (``apps.evals.results.writer``): trace events, finished runs and their
results, written below the ORM (:mod:`apps.core.bulk`) inside the caller's transaction.

Per batch: the ``Run`` rows (a run whose events arrive before its result gets a ``running``
row at once, so its trace can be watched), then the events, then the results, each with one
``executemany`` (SQLite) or ``COPY`` (PostgreSQL), and one counter update per eval run. Primary
keys of new runs are reserved first, so events and results point at them without a read-back.

Writes are idempotent: a run, event or result already stored (same run id; same run and seq;
same eval run, case and repeat) is skipped, and the run's counters are then recounted from the
stored results instead of being incremented.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import transaction
from django.db.models import Count, Q

from apps.core.bulk import (
    Encoders,
    columns,
    encoders,
    insert_rows,
    json_text,
    reserve_ids,
    update_rows,
    update_where,
)
from apps.core.storable import storable_text
from apps.evals.models import EvalResult, EvalRun
from apps.evals.results.ledger import write_ledger
from apps.evals.results.readback import result_score
from apps.traces.models import Event, Run
from apps.traces.rows import (
    EVENT_COLUMNS,
    EVENT_UNIQUE,
    RUN_COLUMNS,
    RUN_UPDATE_COLUMNS,
    event_values,
    finished_run_values,
    running_run_values,
)
from apps.traces.services import RunAggregate
from evalcore.jsonvalue import to_json
from evalcore.serial import score_records
from evalcore.tracing import TraceEvent
from evalcore.types import CaseResult, case_outcome, expected_hash

RESULT_FIELDS = (
    "eval_run",
    "case_id",
    "repeat_index",
    "split",
    "run",
    "scores",
    "passed",
    "status",
    "reason",
    "expected",
    "expected_hash",
    "score",
)
RESULT_COLUMNS = columns(EvalResult, RESULT_FIELDS)
RESULT_UNIQUE = columns(EvalResult, ("eval_run", "case_id", "repeat_index"))
RUN_UNIQUE = columns(Run, ("run_id",))
_STATUSES = ("passed", "failed", "errored", "unscored")
_NO_SECRETS: list[str] = []  # expected values are the set's, stored as they are (URL userinfo aside)


class BatchWriter:
    """Writes the writer thread's batches; keeps the state that spans batches (runs whose
    events were written before their result, and the step metrics folded from their events).

    Args:
        target_id: Stamped on every ``Run`` row.
        eval_run_id: Results go to this eval run (default: the id in each run's metadata).
        rescore: Results annotate runs that are already stored; run rows are never written.
    """

    def __init__(self, *, target_id: str, eval_run_id: str | None, rescore: bool) -> None:
        self.target_id = target_id
        self.eval_run_id = eval_run_id
        self.rescore = rescore
        self._run_pks: dict[str, int] = {}
        self._aggregates: dict[str, RunAggregate] = {}
        self.written = 0
        """Results this writer stored (rows it found stored already not counted)."""
        self.reported_model = ""
        """The first model a run written by this writer reported (``""``: none did)."""
        self._ledger_specs: dict[str, dict[str, Any]] = {}
        self.optimistic = False
        """Insert with no savepoints (PostgreSQL): a row already stored raises ``IntegrityError``
        and aborts the transaction; the caller restores :meth:`state` and writes the batch again
        with this off. Off, such rows are skipped."""

    def state(self) -> tuple[Any, ...]:
        """The state a batch changes, copied: give it to :meth:`restore` to write the batch again."""
        aggregates = {rid: aggregate.copy() for rid, aggregate in self._aggregates.items()}
        return dict(self._run_pks), aggregates, self.written, self.reported_model

    def restore(self, state: tuple[Any, ...]) -> None:
        """Go back to a :meth:`state` (the batch after it was rolled back)."""
        self._run_pks, self._aggregates, self.written, self.reported_model = state

    def write(self, events: list[TraceEvent], results: list[CaseResult]) -> dict[str, dict[str, int]]:
        """Write one batch (call inside ``transaction.atomic()``).

        Returns:
            Per eval run id, the results written now by status.

        Raises:
            django.db.DatabaseError: The database refused the batch (the transaction rolls back).
            ValueError: A value is not JSON (NaN, an infinity).
        """
        enc = encoders()
        finished = {r.run.run_id for r in results}
        pending: dict[str, list[TraceEvent]] = {}
        aggregates = self._aggregates
        for event in events:
            rid = event.run_id
            aggregate = aggregates.get(rid)
            if aggregate is None:
                aggregate = aggregates[rid] = RunAggregate()
            aggregate.add(event)
            run_events = pending.get(rid)
            if run_events is None:
                pending[rid] = [event]
            else:
                run_events.append(event)
        if self.rescore:
            wanted = [rid for rid in {*pending, *finished} if rid not in self._run_pks]
            self._run_pks.update(Run.objects.filter(run_id__in=wanted).values_list("run_id", "pk"))
        else:
            self._write_runs(pending, results, finished, enc)
        run_pks = self._run_pks
        event_rows = [event_values(run_pks[rid], e, enc) for rid, evs in pending.items() for e in evs]
        insert_rows(Event, EVENT_COLUMNS, event_rows, unique=EVENT_UNIQUE, savepoint=not self.optimistic)
        counts = self._write_results(results, enc)
        for rid in finished:
            run_pks.pop(rid, None)
            aggregates.pop(rid, None)
        return counts

    def _write_runs(
        self,
        pending: dict[str, list[TraceEvent]],
        results: list[CaseResult],
        finished: set[str],
        enc: Encoders,
    ) -> None:
        """Insert ``running`` rows for runs seen first now, finished rows, update known ones."""
        run_pks = self._run_pks
        new_running = [rid for rid in pending if rid not in run_pks and rid not in finished]
        new_finished = sum(1 for r in results if r.run.run_id not in run_pks)
        ids = iter(reserve_ids(Run, len(new_running) + new_finished))
        rows: list[tuple[Any, ...]] = []
        for rid in new_running:
            pk = run_pks[rid] = next(ids)
            rows.append(running_run_values(pk, pending[rid][0], self.target_id, enc))
        updates: list[tuple[Any, ...]] = []
        aggregates = self._aggregates
        target_id = self.target_id
        for result in results:
            record = result.run
            if record.model and not self.reported_model:
                self.reported_model = storable_text(record.model[:200])  # as the run row stores it
            values = finished_run_values(record, aggregates.get(record.run_id), target_id, enc)
            known = run_pks.get(record.run_id)
            if known is None:
                pk = run_pks[record.run_id] = next(ids)
                rows.append((pk, record.run_id, *values, False, None))
            else:
                updates.append((*values, known))
        inserted = insert_rows(Run, RUN_COLUMNS, rows, unique=RUN_UNIQUE, savepoint=not self.optimistic)
        if inserted < len(rows):
            # some run ids were stored already (a run written again): point at those rows and
            # complete them like any run whose row exists
            stored = dict(Run.objects.filter(run_id__in=[r[1] for r in rows]).values_list("run_id", "pk"))
            for row in rows:
                if stored.get(row[1]) != row[0]:
                    run_pks[row[1]] = stored[row[1]]
                    if row[1] in finished:
                        updates.append((*row[2:15], stored[row[1]]))
        update_rows(Run, RUN_UPDATE_COLUMNS, updates)

    def _write_results(self, results: list[CaseResult], enc: Encoders) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        rows: list[tuple[Any, ...]] = []
        secrets = enc.secrets
        run_pks = self._run_pks
        for result in results:
            record = result.run
            case = result.case
            eval_run_id = self.eval_run_id or str(record.metadata.get("eval_run_id"))
            scores = result.scores
            outcome = case_outcome(target_errored=record.error is not None, scores=scores)
            status = outcome.status.value
            counts[eval_run_id][status] += 1
            expected = to_json(case.expected)
            rows.append(
                (
                    eval_run_id,
                    case.id,
                    record.repeat_index,
                    case.split or "",
                    run_pks[record.run_id],
                    json_text(score_records(scores), secrets),
                    status == "passed",
                    status,
                    outcome.reason.value,
                    # what the scorers compared with, kept whatever later happens to the set
                    json_text(expected, _NO_SECRETS),
                    expected_hash(case.expected, plain=expected),
                    result_score(scores),
                )
            )
        inserted = insert_rows(EvalResult, RESULT_COLUMNS, rows, unique=RESULT_UNIQUE, savepoint=not self.optimistic)
        self.written += inserted
        # the judge ledger's rows for these cases, in the same transaction (no commit of its own)
        write_ledger(results, self.eval_run_id, self._ledger_specs, enc, savepoint=not self.optimistic)
        if inserted < len(rows):
            for eval_run_id in counts:
                recount(eval_run_id)
            return counts
        for eval_run_id, by_status in counts.items():
            update_where(
                EvalRun,
                {
                    "n_done": ("+", sum(by_status.values())),
                    **{f"n_{status}": ("+", by_status[status]) for status in _STATUSES if by_status.get(status)},
                },
                {"id": eval_run_id},
            )
        return counts


def recount(eval_run_id: str) -> None:
    """Set an eval run's counters from its stored results (after a write skipped stored ones).

    The run row is locked first (inside the caller's transaction; its own otherwise), so a
    concurrent writer's increment lands after the count, never under it (sharded runs have
    several writers).
    """
    with transaction.atomic():
        EvalRun.objects.select_for_update(no_key=True).filter(pk=eval_run_id).values_list("pk").first()
        _recount(eval_run_id)


def _recount(eval_run_id: str) -> None:
    totals = EvalResult.objects.filter(eval_run_id=eval_run_id).aggregate(
        n_done=Count("id"), **{f"n_{s}": Count("id", filter=Q(status=s)) for s in _STATUSES}
    )
    EvalRun.objects.filter(pk=eval_run_id).update(**totals)
