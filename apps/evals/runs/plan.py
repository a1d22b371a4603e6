"""A stored run's plan: the one thing every executor runs, whoever started the run.

:class:`RunPlan` is built from a stored ``EvalRun`` (its target resolved, its scorers rebuilt from
its stored specs, its :class:`~apps.evals.runs.config.RunConfig` read back) and runs the cases
through the engine. The CLI and the task worker (``apps.evals.runs.execution.execute_eval_run``) and
the queue's shards (``apps.evals.worker.shard_run``) all execute it; only where the cases come from and
where the results go differ.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.evals.models import EvalRun
from apps.evals.runs.config import RunConfig, read_run_config
from apps.evals.runs.limits import endpoint_limiter
from apps.evals.runs.simulator import build_user_simulator
from apps.evals.runs.target_cache import with_target_cache
from evalcore.discovery import TargetSpec, rebind_agents_scorer_specs
from evalcore.inference import make_run_id
from evalcore.ratelimit import limited_target
from evalcore.report import EvalReport
from evalcore.runner import run_eval
from evalcore.scorer_registry import resolve_scorers
from evalcore.scorers.base import Scorer, ScorerServices
from evalcore.simulator import UserSimulator
from evalcore.store import EvalSink
from evalcore.types import Case, CaseResult, ErrorInfo, RunRecord

PROCESS_ENDED = "the process ended while this case ran"
"""The start of the error of a case stored errored because it ended its process twice."""


def process_ended_result(
    eval_run_id: str, case: Case, index: int, repeat: int, variant: str | None, target_id: str
) -> CaseResult:
    """An errored result for a case that ended its process (see ``apps.evals.runs.resume.crash_suspects``)."""
    run_id = make_run_id(eval_run_id, case.id, index, repeat)
    message = f"{PROCESS_ENDED} (os._exit, a crash); not run again on resume"
    return CaseResult(
        case=case,
        run=RunRecord(
            case_id=case.id,
            run_id=run_id,
            trace_id=run_id,
            repeat_index=index,
            error=ErrorInfo("ProcessEnded", message),
            started_at=time.time(),
            metadata={"eval_run_id": eval_run_id, "variant": variant, "split": case.split, "target_id": target_id},
        ),
        scores=[],
    )


def load_run_target(eval_run: EvalRun) -> TargetSpec:
    """The run's target, loaded from the agents folder it recorded (``""``: the portal's).

    Raises:
        LookupError: The target is no longer declared there.
        FileNotFoundError: The folder is gone.
    """
    from apps.agents.registry import load_target  # the workers' and the resume's: a CLI run has its spec

    return load_target(eval_run.target_id, read_run_config(eval_run.config).agents_dir or None)


def run_scorers(eval_run: EvalRun, spec: TargetSpec, *, judge_scorers: list[Scorer] | None = None) -> list[Scorer]:
    """The run's scorers rebuilt from its stored specs (predicates declared in the agents folder
    rebound from it; the target's own when the run stored none).

    With ``judge_scorers`` (a resume with ``--judge``), the stored judge is replaced by them.

    Raises:
        ScorerSpecError, LookupError, TypeError: A stored spec cannot be rebuilt any more.
    """
    stored = list(eval_run.scorer_specs or [])
    if judge_scorers is not None:
        stored = [s for s in stored if s.get("name") != "rubric_judge"]
    if stored and spec.module:  # predicates declared in the agents folder: rebuilt from it
        stored = rebind_agents_scorer_specs(stored, Path(spec.module).parent)
    if judge_scorers is not None:
        return resolve_scorers(stored) + judge_scorers
    return resolve_scorers(stored or spec.scorers)


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What executing a stored run means: its target, scorers and parameters."""

    eval_run_id: str
    """The run's id (each case's run id derives from it)."""
    target_id: str
    """The target's id."""
    variant: str | None
    """The variant's label (``None``: the target's default)."""
    target: Any
    """The resolved target, each call holding a slot of its endpoint (``EVALSITE_ENDPOINT_CONCURRENCY``),
    answered from the target cache when the run asks for it (``config.cache_target``)."""
    scorers: list[Scorer]
    """The scorers every case's output gets."""
    config: RunConfig
    """The run's parameters."""

    @classmethod
    def of(cls, eval_run: EvalRun, spec: TargetSpec, *, scorers: list[Scorer] | None = None) -> RunPlan:
        """The plan of ``eval_run`` against ``spec`` (``scorers``: the caller's, e.g. with the
        judge; default :func:`run_scorers`).

        Raises:
            UnknownVariantError: The run's variant is no longer declared.
            ScorerSpecError, LookupError, TypeError: A stored scorer cannot be rebuilt.
        """
        resolved, label = spec.resolve(eval_run.variant or None)
        # the endpoint's cap and 429 back-off, shared by every executor of this process
        target = limited_target(resolved, endpoint=eval_run.model or spec.id, limiter=endpoint_limiter())
        config = read_run_config(eval_run.config)
        if config.cache_target:  # outside the limiter: a cache hit takes no slot of the endpoint
            target = with_target_cache(target, spec, variant=label, run_model=eval_run.model)
        return cls(
            eval_run_id=eval_run.id,
            target_id=spec.id,
            variant=label,
            target=target,
            scorers=scorers or run_scorers(eval_run, spec),
            config=config,
        )

    async def run(
        self,
        cases: Iterable[Case] | AsyncIterable[Case],
        *,
        sink: EvalSink,
        done: set[tuple[str, int]],
        suspects: Sequence[tuple[Case, int]] = (),
        culprits: Sequence[tuple[Case, int]] = (),
        suspects_concurrency: int = 1,
        services: ScorerServices | None = None,
        user_simulator: UserSimulator | None = None,
    ) -> EvalReport:
        """Run ``cases`` (``done`` pairs skipped; read lazily, so a caller may add to it) through
        the engine into ``sink``; the report of the cases run.

        The cases in flight when a process died come first: ``culprits`` (two deaths counted) are
        stored errored, ``suspects`` run again before the rest at ``suspects_concurrency`` (1: if
        one ends the process again, it is the only case in flight and the next resume errors it).

        ``user_simulator``: who plays scenario cases without a script; default the run's own
        (``config.simulator``, built by :func:`~apps.evals.runs.simulator.build_user_simulator`),
        so a resume, the task worker and the queue's shards meet the user the run started with.

        Raises:
            SimulatorSetupError: The run's simulator cannot be built in this process.
        """
        if user_simulator is None and self.config.simulator is not None:
            user_simulator = build_user_simulator(self.config.simulator)
        options: dict[str, Any] = {
            "timeout_s": self.config.timeout_s,
            "repeat": self.config.repeat,
            "sink": sink,
            "eval_run_id": self.eval_run_id,
            "variant": self.variant,
            "services": services,
            "run_metadata": {"target_id": self.target_id},
            "scorer_timeout_s": self.config.scorer_timeout_s,
            "conversation_timeout_s": self.config.conversation_timeout_s,
            "user_simulator": user_simulator,
        }
        repeat = self.config.repeat
        for case, index in culprits:
            sink.on_result(process_ended_result(self.eval_run_id, case, index, repeat, self.variant, self.target_id))
            done.add((case.id, index))
        if suspects:
            wanted = {(c.id, i) for c, i in suspects}
            first = {c.id: c for c, _ in suspects}
            others = {(cid, i) for cid in first for i in range(repeat)} - wanted
            await run_eval(
                first.values(),
                self.target,
                self.scorers,
                concurrency=suspects_concurrency,
                skip=others | done,
                **options,
            )
            done.update(wanted)
        return await run_eval(
            cases, self.target, self.scorers, concurrency=self.config.concurrency, skip=done, **options
        )
