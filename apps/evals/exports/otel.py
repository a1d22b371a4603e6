"""Eval runs' traces out over OTLP/HTTP (``evalsite export-traces``, and every finished run's
when ``EVALSITE_OTLP_ENDPOINT`` is set). The span mapping: :mod:`evalcore.otel.export`.

Each case's trace is one OTLP trace. Its root span carries the eval run and the case
(``evalsite.eval_run.id``, ``evalsite.case.id``, split, repeat, status, the mean score) and
every score as ``evalsite.score.<scorer>`` (``.passed``, ``.error`` beside it) plus one
``gen_ai.evaluation.result`` event per score (the conventions' evaluation event).

The automatic export runs in a thread of its own after the run is marked ended (``finished``
or ``failed``; an ``interrupted`` run is exported when a resume finishes it): the run never
waits on it and a collector that is down costs one logged warning, never the run.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from apps.evals.models import EvalResult, EvalRun, EvalRunStatus
from apps.traces.models import Run
from apps.traces.otel_export import events_by_run, run_spans
from evalcore.conversations import report_turns
from evalcore.errors import NotFoundError
from evalcore.otel import semconv as sc
from evalcore.otel.export import CaseRoot
from evalcore.otel.model import OtelEvent, OtelSpan, to_ns
from evalcore.otel.sdk import export_spans, parse_headers, traces_endpoint

log = logging.getLogger(__name__)

CHUNK = 200
"""Results read per query (and their events in one more)."""
EXPLANATION_CHARS = 2000


def score_root(result: EvalResult, eval_run: EvalRun, *, ended_at: float) -> CaseRoot:
    """The root-span extras of one case: its eval run, status and scores (``ended_at``: Unix
    seconds, the time of the evaluation events)."""
    attributes: dict[str, Any] = {
        sc.EVAL_RUN_ID: eval_run.id,
        sc.EVAL_SET: eval_run.eval_set.name,
        sc.CASE_ID: result.case_id,
        sc.CASE_REPEAT: result.repeat_index,
        sc.CASE_STATUS: result.status,
        sc.TARGET_ID: eval_run.target_id,
    }
    for key, value in (
        (sc.CASE_SPLIT, result.split),
        (sc.CASE_REASON, result.reason),
        (sc.VARIANT, eval_run.variant),
        (sc.GIT_SHA, eval_run.git_sha),
        (sc.CASE_SCORE, result.score),
    ):
        if value not in (None, ""):
            attributes[key] = value
    events: list[OtelEvent] = []
    for score in result.scores or []:
        name = str(score.get("name") or "score")
        value, passed, error = score.get("value"), score.get("passed"), score.get("error")
        prefix = sc.SCORE_PREFIX + name
        if value is not None:
            attributes[prefix] = value
        if passed is not None:
            attributes[prefix + ".passed"] = bool(passed)
        if error:
            attributes[prefix + ".error"] = str(error)
        event: dict[str, Any] = {sc.EVALUATION_NAME: name}
        if isinstance(value, bool):
            event[sc.EVALUATION_SCORE_VALUE] = 1.0 if value else 0.0
        elif isinstance(value, int | float):
            event[sc.EVALUATION_SCORE_VALUE] = float(value)
        elif isinstance(value, str):
            event[sc.EVALUATION_SCORE_LABEL] = value
        if passed is not None and sc.EVALUATION_SCORE_LABEL not in event:
            event[sc.EVALUATION_SCORE_LABEL] = "pass" if passed else "fail"
        explanation = score.get("explanation") or error
        if explanation:
            event[sc.EVALUATION_EXPLANATION] = str(explanation)[:EXPLANATION_CHARS]
        events.append(OtelEvent(sc.EVALUATION_EVENT, to_ns(ended_at), event))
    return CaseRoot(attributes=attributes, events=events)


def eval_run_traces(eval_run: EvalRun, *, case_id: str | None = None) -> Iterator[list[OtelSpan]]:
    """The spans of each case's trace of an eval run (one list per result, in result order),
    read :data:`CHUNK` results at a time."""
    results = EvalResult.objects.filter(eval_run=eval_run).select_related("run").order_by("id")
    if case_id is not None:
        results = results.filter(case_id=case_id)
    last = 0
    while True:
        chunk = list(results.filter(id__gt=last)[:CHUNK])
        if not chunk:
            return
        last = chunk[-1].id
        events = events_by_run(result.run for result in chunk)
        for result in chunk:
            run = result.run
            ended = run.started.timestamp() + (run.elapsed_ms or 0.0) / 1000.0
            spans = run_spans(run, events[run.pk], root=score_root(result, eval_run, ended_at=ended))
            yield mark_turns(spans, result)


def run_traces(run: Run) -> list[OtelSpan]:
    """One stored run's trace (an eval case's gets its latest eval result's scores)."""
    result = run.eval_results.select_related("eval_run__eval_set").order_by("-id").first()
    events = events_by_run([run])[run.pk]
    if result is None:
        return run_spans(run, events)
    ended = run.started.timestamp() + (run.elapsed_ms or 0.0) / 1000.0
    return mark_turns(run_spans(run, events, root=score_root(result, result.eval_run, ended_at=ended)), result)


TURN_INDEX = "evalsite.turn.index"
TURN_STATUS = "evalsite.turn.status"


def mark_turns(spans: list[OtelSpan], result: EvalResult) -> list[OtelSpan]:
    """``spans`` with a conversation case's per-turn results on its ``turn`` spans: the turn's
    number (``evalsite.turn.index``, 1-based), its status (``evalsite.turn.status``, by the case
    rule) and each score it got (``evalsite.score.<name>``, ``.passed``, ``.error``), from
    :func:`evalcore.conversations.report_turns`. A single-turn case's spans are returned as they are."""
    turns = report_turns(result.run.metadata, result.scores)
    if not turns:
        return spans
    by_number = {turn.get("turn"): turn for turn in turns}
    for span in spans:
        if span.attributes.get(sc.SPAN_KIND) != "turn":
            continue
        try:
            number = json.loads(span.attributes.get(sc.SPAN_BEGIN) or "{}").get("turn")
        except (TypeError, ValueError, AttributeError):
            continue
        turn = by_number.get(number)
        if turn is None:
            continue
        span.attributes[TURN_INDEX] = number
        span.attributes[TURN_STATUS] = turn.get("status")
        for score in turn.get("scores") or []:
            prefix = sc.SCORE_PREFIX + str(score.get("name") or "score")
            for suffix, key in (("", "value"), (".passed", "passed"), (".error", "error")):
                value = score.get(key)
                if value is not None and not isinstance(value, dict | list):
                    span.attributes[prefix + suffix] = value
    return spans


@dataclass(slots=True)
class TraceExport:
    """What an export sent.

    Attributes:
        endpoint: The traces URL posted to.
        traces, spans: Sent and accepted.
        error: Why it stopped (``""``: everything was accepted).
    """

    endpoint: str
    traces: int = 0
    spans: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def export_traces(
    ref: str,
    *,
    endpoint: str,
    headers: dict[str, str] | None = None,
    case_id: str | None = None,
    timeout_s: float = 10.0,
    batch_spans: int = 2000,
) -> TraceExport:
    """Send the traces ``ref`` names to an OTLP/HTTP endpoint.

    Args:
        ref: An eval run id (every case's trace; ``case_id`` picks one case) or a run id
            (``<eval run id>:<case id>``, ``otlp:<trace id>``, a playground turn's). A repeated
            run's run ids end in ``#N`` (``RUN:q1#0``); ``RUN:q1`` without it names every repeat.
        endpoint: A base URL or a ``.../v1/traces`` URL.
        headers: Request headers (``{"Authorization": "Bearer ..."}``).
        timeout_s: The exporter's budget per request.
        batch_spans: Spans handed to the exporter at once (it posts them 512 a request).

    Raises:
        NotFoundError: ``ref`` names neither an eval run nor a run (or the case has no result).
    """
    outcome = TraceExport(traces_endpoint(endpoint))
    eval_run = EvalRun.objects.select_related("eval_set").filter(pk=ref).first()
    if eval_run is not None:
        traces: Iterator[list[OtelSpan]] = eval_run_traces(eval_run, case_id=case_id)
    else:
        key = ref if case_id is None else f"{ref}:{case_id}"
        runs = list(Run.objects.filter(run_id=key)) or list(
            # <eval run id>:<case id> of a repeated run: every repeat (<eval run id>:<case id>#N)
            Run.objects.filter(run_id__startswith=f"{key}#").order_by("run_id")
        )
        if not runs:
            raise NotFoundError(
                f"no eval run or run {key!r} (an eval run id, or a run id like <eval run id>:<case id>; "
                "a repeated run's are <eval run id>:<case id>#N, N from 0)"
            )
        traces = (run_traces(run) for run in runs)
    pending: list[OtelSpan] = []
    count = 0

    def flush() -> bool:
        sent = export_spans(pending, endpoint=endpoint, headers=headers, timeout_s=timeout_s)
        outcome.spans += sent.spans
        if sent.ok:
            outcome.traces += count
        outcome.error = sent.error
        pending.clear()
        return sent.ok

    for spans in traces:
        pending.extend(spans)
        count += 1
        if len(pending) >= batch_spans:
            if not flush():
                return outcome
            count = 0
    if pending and not flush():
        return outcome
    if eval_run is not None and case_id is not None and outcome.traces == 0:
        raise NotFoundError(f"eval run {ref} has no result for case {case_id!r}")
    return outcome


_threads: list[threading.Thread] = []
_threads_lock = threading.Lock()


def on_eval_run_finished(sender: Any, *, eval_run_id: str, status: str, **kwargs: Any) -> None:
    """``eval_run_finished`` listener: with ``EVALSITE_OTLP_ENDPOINT`` set, the run's traces go
    to it from a background thread (``finished`` and ``failed`` runs)."""
    endpoint = settings.EVALSITE_OTLP_ENDPOINT
    if not endpoint or status not in (EvalRunStatus.FINISHED, EvalRunStatus.FAILED):
        return
    try:
        headers = parse_headers(settings.EVALSITE_OTLP_HEADERS)
    except ValueError as exc:
        log.warning("EVALSITE_OTLP_HEADERS: %s; eval run %s's traces are not exported", exc, eval_run_id)
        return
    thread = threading.Thread(
        target=_export_in_background,
        args=(eval_run_id, endpoint, headers, settings.EVALSITE_OTLP_TIMEOUT_S),
        name=f"otlp-export-{eval_run_id}",
    )
    with _threads_lock:
        _threads[:] = [t for t in _threads if t.is_alive()]
        _threads.append(thread)
    thread.start()


def _export_in_background(eval_run_id: str, endpoint: str, headers: dict[str, str], timeout_s: float) -> None:
    try:
        outcome = export_traces(eval_run_id, endpoint=endpoint, headers=headers, timeout_s=timeout_s)
        if not outcome.ok:
            log.warning(
                "eval run %s: traces not exported to %s (%d of its traces sent): %s; the run is stored, "
                "send them again with `evalsite export-traces %s`",
                eval_run_id,
                outcome.endpoint,
                outcome.traces,
                outcome.error,
                eval_run_id,
            )
    except Exception:
        log.warning("eval run %s: the OTLP export failed", eval_run_id, exc_info=True)
    finally:
        connection.close()


def finish_exports_before_exit() -> None:
    """Let the background exports of this process end before it exits (a one-shot command: the
    interpreter's shutdown stops the thread pools the SDK's exporter uses, so an export still
    running then failed with "cannot schedule new futures after interpreter shutdown").

    Waits at most a few export timeouts (``EVALSITE_OTLP_TIMEOUT_S``); an export still running
    after that is named, with the command that sends it again."""
    with _threads_lock:
        running = [t for t in _threads if t.is_alive()]
    if not running:
        return
    limit = 3 * float(settings.EVALSITE_OTLP_TIMEOUT_S) + 5
    if not wait_for_exports(limit):
        for thread in running:
            if thread.is_alive():
                run_id = thread.name.removeprefix("otlp-export-")
                log.warning(
                    "eval run %s: traces still being exported after %.0f s; not waiting longer: "
                    "send them with `evalsite export-traces %s`",
                    run_id,
                    limit,
                    run_id,
                )


def wait_for_exports(timeout_s: float | None = None) -> bool:
    """Wait for the background exports started so far; whether all ended within ``timeout_s``."""
    with _threads_lock:
        threads = list(_threads)
    for thread in threads:
        thread.join(timeout_s)
    return not any(thread.is_alive() for thread in threads)
