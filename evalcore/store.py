"""Where results go: the sink protocol the runner writes to, and the ``EvalStore`` protocol.

Progress leaves the engine only through an :class:`EvalSink`: one call per trace event and one
per finished case, both synchronous and non-blocking (a store doing I/O queues the write).
:class:`InMemoryEvalStore` keeps everything in dicts, for notebooks and engine tests; the
Django store (``apps.evals.results.writer.DjangoEvalStore``) implements the same protocol.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evalcore.report import EvalReport
from evalcore.tracing import TraceEvent
from evalcore.types import Case, CaseResult, RunRecord


@runtime_checkable
class EvalSink(Protocol):
    """Receives progress from the runner. Methods must not block for long."""

    def on_event(self, event: TraceEvent) -> None:
        """One trace event, in ``seq`` order within its run."""

    def on_result(self, result: CaseResult) -> None:
        """One finished, scored case."""

    def flush(self) -> None:
        """Make everything received so far durable; the runner calls it (on a thread) at the end.

        A sink that buffers nothing does nothing here.
        """


class NullSink:
    """A sink that drops everything."""

    def on_event(self, event: TraceEvent) -> None:
        return None

    def on_result(self, result: CaseResult) -> None:
        return None

    def flush(self) -> None:
        return None


class MultiSink:
    """Fans progress out to several sinks, in order."""

    def __init__(self, *sinks: EvalSink | None) -> None:
        self.sinks = [s for s in sinks if s is not None]

    def on_event(self, event: TraceEvent) -> None:
        for sink in self.sinks:
            sink.on_event(event)

    def on_result(self, result: CaseResult) -> None:
        for sink in self.sinks:
            sink.on_result(result)

    async def case_starting(self, run_id: str) -> None:
        """Await each sink's ``case_starting`` (a durable store marks the case in flight)."""
        for sink in self.sinks:
            starting = getattr(sink, "case_starting", None)
            if starting is not None:
                await starting(run_id)

    def flush(self) -> None:
        """Flush each sink, in order."""
        for sink in self.sinks:
            sink.flush()


@dataclass(slots=True)
class EvalRunInfo:
    """Provenance of an eval run, fixed when it starts.

    Attributes:
        set_name: The eval set's name.
        target_id: The target's id.
        variant: Free A/B label.
        split: ``train``/``dev``/``test``/``all``.
        model: Model name, if the target declares one.
        git_sha: Commit of the code under test, ``None`` outside a git checkout.
        git_dirty: True when the checkout had uncommitted changes.
        scorer_specs: Each scorer's ``{name, args, version}``.
        config: Concurrency, timeout, repeat, and anything else that shaped the run.
        set_hash: Content hash of the cases that were run (sha256 hex).
        source_eval_run_id: For a re-scored run, the eval run whose outputs it re-scored.
    """

    set_name: str
    target_id: str
    variant: str = ""
    split: str = "all"
    model: str | None = None
    git_sha: str | None = None
    git_dirty: bool = False
    scorer_specs: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    set_hash: str = ""
    source_eval_run_id: str | None = None


class EvalStore(EvalSink, Protocol):
    """Persistence for eval runs: an :class:`EvalSink` that can also start, finish and reload runs."""

    def start_eval_run(self, info: EvalRunInfo) -> str:
        """Record a new eval run as ``running``; returns its id."""
        ...

    def finish_eval_run(self, eval_run_id: str, report: EvalReport, *, status: str = "finished") -> None:
        """Mark an eval run finished (or ``failed`` / ``interrupted``) with its report."""
        ...

    def iter_runs(self, eval_run_id: str) -> Iterator[tuple[Case, RunRecord]]:
        """The stored (case, run record) pairs of an eval run, for re-scoring without the target."""
        ...


class InMemoryEvalStore:
    """An :class:`EvalStore` in plain dicts (thread-safe), for notebooks and engine tests.

    Args:
        keep_events: Keep trace events (memory grows with them); off for large benchmark runs.
        keep_results: Keep case results (memory grows with cases); off for O(1) memory runs.
    """

    def __init__(self, *, keep_events: bool = True, keep_results: bool = True) -> None:
        self._lock = threading.Lock()
        self.keep_events = keep_events
        self.keep_results = keep_results
        self.eval_runs: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, CaseResult]] = {}
        self.events: dict[str, list[TraceEvent]] = {}
        self.result_count = 0

    def start_eval_run(self, info: EvalRunInfo) -> str:
        eval_run_id = uuid.uuid4().hex
        with self._lock:
            self.eval_runs[eval_run_id] = {"info": info, "status": "running", "started": time.time(), "report": None}
            self.results[eval_run_id] = {}
        return eval_run_id

    def on_event(self, event: TraceEvent) -> None:
        if self.keep_events:
            with self._lock:
                self.events.setdefault(event.run_id, []).append(event)

    def on_result(self, result: CaseResult) -> None:
        with self._lock:
            self.result_count += 1
            if not self.keep_results:
                return
            eval_run_id = str(result.run.metadata.get("eval_run_id", ""))
            key = result.run.run_id.partition(":")[2] or result.case.id
            self.results.setdefault(eval_run_id, {})[key] = result

    def flush(self) -> None:
        """Nothing to do: every call is already applied."""

    def finish_eval_run(self, eval_run_id: str, report: EvalReport, *, status: str = "finished") -> None:
        with self._lock:
            run = self.eval_runs[eval_run_id]
            run.update(status=status, finished=time.time(), report=report)

    def iter_runs(self, eval_run_id: str) -> Iterator[tuple[Case, RunRecord]]:
        with self._lock:
            results = list(self.results.get(eval_run_id, {}).values())
        for result in results:
            yield result.case, result.run

    def events_for(self, run_id: str) -> list[TraceEvent]:
        """The trace events of one run, in order."""
        with self._lock:
            return sorted(self.events.get(run_id, []), key=lambda e: e.seq)
