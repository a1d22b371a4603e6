"""Resume rules: which runs may be resumed and how (the same for the CLI and the task worker), and
what happens to the cases that were in flight when a run's process died.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.runs.config import read_run_config
from apps.evals.runs.liveness import RunBusy, busy_reason, claim_for_resume
from apps.evals.runs.plan import run_scorers
from evalcore.discovery import TargetSpec
from evalcore.errors import InvalidInputError
from evalcore.inference import make_run_id
from evalcore.scorers.base import Scorer
from evalcore.types import Case


class ResumeRefused(InvalidInputError):
    """A run that cannot be resumed (the message says why and what to do)."""


@dataclass(slots=True)
class ResumePlan:
    """A run claimed for resuming: the run (config updated), its target, the scorers to use
    (its own, rebuilt, plus the judge's) and how many case results it already holds."""

    eval_run: EvalRun
    spec: TargetSpec
    scorers: list[Scorer]
    done: int


def check_resumable(eval_run: EvalRun, *, judge_available: bool) -> None:
    """The rules every resume obeys, checked before anything is written.

    Args:
        eval_run: The run to resume.
        judge_available: The resumer has LLM-judge options (the CLI's ``--judge``); the worker
            has none.

    Raises:
        RunBusy: The run is running, queued, or finished (only interrupted or failed runs resume).
        ResumeRefused: A re-scored run, a set changed since the run started, or a judged run
            without the judge.
    """
    reason = busy_reason(eval_run)
    if reason is not None:
        raise RunBusy(reason)
    if eval_run.source_eval_run_id:
        raise ResumeRefused("a re-scored run cannot be resumed; re-score its source again")
    if eval_run.set_hash and eval_run.eval_set.content_hash != eval_run.set_hash:
        raise ResumeRefused(f"eval set {eval_run.eval_set.name!r} changed since the run started; start a new run")
    if read_run_config(eval_run.config).judge is not None and not judge_available:
        raise ResumeRefused("this run used the LLM judge: resume it from the CLI with the same --judge options")


def claim_resume(
    eval_run: EvalRun,
    spec: TargetSpec,
    *,
    judge_scorers: list[Scorer],
    config: Mapping[str, Any],
    status: str = EvalRunStatus.RUNNING,
) -> ResumePlan:
    """Check ``eval_run`` can be resumed against ``spec``, claim it atomically, change its config
    by ``config`` (:class:`~apps.evals.runs.config.RunConfig` fields, e.g. the new executor, a new
    ``scorer_timeout_s``; the rest is kept).

    Raises:
        RunConfigError: A changed value out of range (checked before anything is written).
        RunBusy: Another process holds the run (of two resumes started at once, one gets it),
            or it is not interrupted / failed.
        ResumeRefused: See :func:`check_resumable`.
        ScorerSpecError, UnknownVariantError, LookupError, TypeError: The run's scorers or
            variant cannot be rebuilt from the agents folder any more.
    """
    check_resumable(eval_run, judge_available=bool(judge_scorers))
    scorers = run_scorers(eval_run, spec, judge_scorers=judge_scorers)
    spec.resolve(eval_run.variant or None)
    changed = read_run_config(eval_run.config).updated(**config)
    claim_for_resume(eval_run.id, status=status)
    EvalRun.objects.filter(pk=eval_run.pk).update(config=changed.stored())
    eval_run.refresh_from_db()
    return ResumePlan(eval_run, spec, scorers, eval_run.results.count())


def claim_queued_resume(eval_run: EvalRun) -> None:
    """Claim ``eval_run`` for a resume that a worker will execute (the portal's, the API's, a
    sharded run's): the resume rules (no judge in a worker), its agents folder still exists, and
    the run is marked queued.

    Nothing of the agents folder is imported here: this runs in the web server (a request only
    queues work), and the folder a CLI run recorded is anyone's code. The worker loads the target
    and, when it is gone, marks the run failed saying so.

    Raises:
        RunBusy: The run is queued, running or finished.
        ResumeRefused: The set changed, the judge is needed, or the recorded agents folder is gone.
    """
    check_resumable(eval_run, judge_available=False)
    folder = read_run_config(eval_run.config).agents_dir
    if folder and not Path(folder).is_dir():
        raise ResumeRefused(f"the agents folder of this run, {folder}, no longer exists; start a new run")
    claim_for_resume(eval_run.id, status=EvalRunStatus.QUEUED)


def in_flight_case_ids(eval_run: EvalRun, repeat: int) -> list[str]:
    """The ids of the cases in flight when the run's process died (from its run ids), so a resume
    reads only those cases for :func:`crash_suspects`."""
    prefix = f"{eval_run.id}:"
    found: set[str] = set()
    for rid in eval_run.in_flight or []:
        if not isinstance(rid, str) or not rid.startswith(prefix):
            continue
        case_id = rid[len(prefix) :]
        if repeat > 1:
            case_id = case_id.rpartition("#")[0] or case_id
        found.add(case_id)
    return sorted(found)


def crash_suspects(
    eval_run: EvalRun, cases: Iterable[Case], repeat: int, done: set[tuple[str, int]]
) -> tuple[list[tuple[Case, int]], list[tuple[Case, int]]]:
    """The cases in flight when the run's process died: (to run again alone, to error).

    A case is errored (not run again) once it counts two deaths: its own target called
    ``os._exit`` (``liveness.exit_guard`` counts two at once), or the process died while it was
    the only case in flight, twice (a segfault; a death with several cases in flight counts
    against none of them). Running it again would only kill the resumed run too. Every other
    case in flight (a ``kill -9``, several cases running at once) runs again first, one at a
    time, so a crashing case is soon alone. The counts persist on the run (``crash_suspects``);
    ``in_flight`` is cleared.
    """
    in_flight = [rid for rid in eval_run.in_flight or [] if isinstance(rid, str)]
    counts = count_deaths(in_flight, eval_run.crash_suspects)
    EvalRun.objects.filter(pk=eval_run.pk).update(in_flight=[], crash_suspects=counts)
    return sort_in_flight(eval_run.id, cases, repeat, done, in_flight, counts)


def count_deaths(in_flight: list[str], counts: dict[str, int] | None) -> dict[str, int]:
    """The deaths counted per case run id (``counts``, updated): a process that died while one
    case ran alone counts one against it; a death with several cases in flight counts against none."""
    updated = dict(counts or {})
    if len(in_flight) == 1:
        updated[in_flight[0]] = updated.get(in_flight[0], 0) + 1
    return updated


def sort_in_flight(
    eval_run_id: str,
    cases: Iterable[Case],
    repeat: int,
    done: set[tuple[str, int]],
    in_flight: list[str],
    counts: dict[str, int],
) -> tuple[list[tuple[Case, int]], list[tuple[Case, int]]]:
    """The (case, repeat) pairs of ``in_flight`` not ``done``, in ``cases`` order: (to run again
    first, to error: two deaths counted). Shared by a run's resume and a shard's re-delivery."""
    wanted = set(in_flight)
    suspects: list[tuple[Case, int]] = []
    culprits: list[tuple[Case, int]] = []
    if not wanted:
        return suspects, culprits
    for case in cases:
        for index in range(repeat):
            rid = make_run_id(eval_run_id, case.id, index, repeat)
            if rid in wanted and (case.id, index) not in done:
                (culprits if counts.get(rid, 0) >= 2 else suspects).append((case, index))
    return suspects, culprits
