"""What the command line asks of a run, decided here so ``evalsite eval`` only parses and prints:
the new run's config (defaults from :class:`~apps.evals.runs.config.RunConfig`), what a resume
keeps and what it may change, the judge a resume must repeat, and the held-out notice.

Every refusal is a :class:`RunOptionError` whose message names the command-line flag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from apps.evals.models import EvalCase, EvalRun, EvalSet
from apps.evals.queries.runs import test_split_runs
from apps.evals.runs.config import JudgeConfig, RunConfig, RunConfigError, SimulatorConfig, read_run_config
from apps.evals.runs.prepare import cli_executor_config
from evalcore.errors import InvalidInputError
from evalcore.scoring import takes_rubric
from evalcore.splits import guard_split

DEFAULT_SPLIT = "dev"
"""The split of a new run when ``--split`` is not given."""

FLAGS = {
    "concurrency": "--concurrency",
    "timeout_s": "--timeout",
    "scorer_timeout_s": "--scorer-timeout",
    "conversation_timeout_s": "--conversation-timeout",
    "repeat": "--repeat",
    "shard_size": "--shard-size",
    "judge.samples": "--judge-samples",
}
"""The command-line flag of each run parameter the command line sets."""

RESUME_KEEPS = {
    "eval_set": "--set",
    "split": "--split",
    "allow_test": "--allow-test",
    "variant": "--variant",
    "name": "--name",
    "mapping": "--map",
    "auto_id": "--auto-id",
    "scorer": "--scorer",
    "repeat": "--repeat",
    "timeout": "--timeout",
    "conversation_timeout": "--conversation-timeout",
    "executor": "--executor",
    "shard_size": "--shard-size",
}
"""Options of a new run (by their argparse names) that ``--resume`` refuses unless they repeat the
run's own value (the run keeps its own); it accepts ``--concurrency`` and ``--scorer-timeout``
(the run goes on with the new value)."""


class RunOptionError(InvalidInputError):
    """A command-line option the run refuses (the message names the flag)."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The run options of ``evalsite eval`` as parsed (``None``: not given)."""

    concurrency: int | None = None
    """``--concurrency``."""
    timeout_s: float | None = None
    """``--timeout``, seconds."""
    scorer_timeout_s: float | None = None
    """``--scorer-timeout``, seconds."""
    conversation_timeout_s: float | None = None
    """``--conversation-timeout``, seconds."""
    repeat: int | None = None
    """``--repeat``."""
    executor: str | None = None
    """``--executor``: ``process`` (default) or ``queue``."""
    shard_size: int | None = None
    """``--shard-size`` (a queue run only)."""
    judge: bool = False
    """``--judge`` was given."""
    cache_target: bool | None = None
    """``--cache-target`` (``True``), ``--no-cache`` (``False``), neither (``None``: a new run takes
    ``EVALSITE_CACHE_TARGET``, a resume keeps the run's own)."""

    def given(self) -> dict[str, Any]:
        """The run parameters given, by :class:`RunConfig` field name (a shard size only for a
        queue run)."""
        values = {
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "scorer_timeout_s": self.scorer_timeout_s,
            "conversation_timeout_s": self.conversation_timeout_s,
            "repeat": self.repeat,
            "shard_size": self.shard_size if self.executor == "queue" else None,
            "cache_target": self.cache_target,
        }
        return {k: v for k, v in values.items() if v is not None}

    def check(self) -> None:
        """Check the values before anything else is read (a resume changes some of them too).

        Raises:
            RunOptionError: A value out of range, naming its flag.
        """
        _parse(self.given())


def _flag_message(exc: RunConfigError) -> str:
    flag = FLAGS.get(exc.field or "", exc.field)
    if exc.field in ("timeout_s", "scorer_timeout_s", "conversation_timeout_s"):
        return f"{flag} must be > 0 seconds (a finite number), got {exc.value!r}"
    if exc.field in ("concurrency", "repeat", "shard_size", "judge.samples"):
        return f"{flag} must be >= 1, got {exc.value!r}"
    return f"{flag}: {exc.message}"


def _parse(values: Mapping[str, Any], base: RunConfig | None = None) -> RunConfig:
    try:
        return base.updated(**values) if base is not None else RunConfig.parse(values)
    except RunConfigError as exc:
        raise RunOptionError(_flag_message(exc), field=exc.field) from None


def new_run_config(
    options: RunOptions, *, judge: JudgeConfig | None = None, simulator: SimulatorConfig | None = None
) -> RunConfig:
    """The config of a new CLI run: the options given, each other parameter its default, this
    process as its executor (or the queue's workers, with ``--executor queue``), the judge and
    the user simulator (``--simulator-*``) stored with it.

    Raises:
        RunOptionError: A value out of range, or ``--judge`` with ``--executor queue`` (the
            workers have no judge options).
    """
    if options.executor == "queue" and options.judge:
        raise RunOptionError("--judge runs in this process only; drop --executor queue", field="executor")
    values: dict[str, Any] = {**options.given(), **cli_executor_config(), "judge": judge, "simulator": simulator}
    if options.cache_target is None:
        values["cache_target"] = settings.EVALSITE_CACHE_TARGET
    if options.executor == "queue":
        values["executor"] = "queue"
    return _parse(values)


def new_run_split(split: str | None, allow_test: bool) -> str:
    """The split of a new run (``--split``, default :data:`DEFAULT_SPLIT`), checked against the
    lockbox before anything is imported.

    Raises:
        HeldOutError: ``test`` or ``all`` without ``--allow-test``.
    """
    chosen = split or DEFAULT_SPLIT
    guard_split(chosen, allow_test)
    return chosen


def held_out_notice(eval_set: EvalSet, split: str, *, target_id: str, variant: str | None) -> str | None:
    """The line a run of the held-out test split gets before it starts: whether the lockbox of
    this set was opened for this target and variant before (``None``: not a test-split run)."""
    if split not in ("test", "all"):
        return None
    before = test_split_runs(eval_set, variant=variant, target_id=target_id)
    who = target_id + (f" / {variant}" if variant else "")
    when = "first run" if before == 0 else f"run {before} time(s) before this one (the lockbox is open)"
    return f"held-out test split of {eval_set.name!r} for {who}: {when}"


def unchecked_rubric_notice(eval_set: EvalSet, split: str, scorers: Sequence[Any]) -> str | None:
    """The line a run gets when conversation cases of its split state a per-turn ``rubric`` but
    none of its scorers reads one (no ``--judge``): those rubrics are not checked, and a case whose
    other turns pass is passed. ``None`` when nothing is left unchecked.

    A scorer reads rubrics by :func:`evalcore.scoring.takes_rubric`, the rule scoring applies.
    """
    if any(takes_rubric(scorer) for scorer in scorers):
        return None
    cases = EvalCase.objects.filter(eval_set=eval_set, input__has_key="turns")
    if split != "all":
        cases = cases.filter(split=split)
    n = 0
    for expected in cases.values_list("expected", flat=True).iterator(chunk_size=500):
        turns = expected.get("turns") if isinstance(expected, dict) else expected
        if isinstance(turns, list) and any(isinstance(t, dict) and t.get("rubric") for t in turns):
            n += 1
    if not n:
        return None
    return (
        f"{n} conversation case(s) state a per-turn rubric, but no scorer reads one: those rubrics are "
        "not checked (give --judge to grade them)"
    )


def on_queue(eval_run: EvalRun) -> bool:
    """Whether the queue's workers execute the run (a new ``--executor queue`` run, or any
    sharded run)."""
    return bool(eval_run.n_shards) or read_run_config(eval_run.config).executor == "queue"


def check_resume_keeps(eval_run: EvalRun, given: Mapping[str, Any], *, target: str | None) -> None:
    """A resume keeps the run's own set, split, variant, scorers, repeats, per-case timeout,
    executor and target: an option of a new run is refused unless it repeats the run's value.

    Args:
        eval_run: The run to resume.
        given: The parsed options by argparse name (:data:`RESUME_KEEPS`'s keys).
        target: ``--target``.

    Raises:
        RunOptionError: Naming the option to drop (or the run's own target).
    """
    config = read_run_config(eval_run.config)
    own = {
        "split": eval_run.split,
        "allow_test": True if eval_run.split in ("test", "all") else None,
        "repeat": config.repeat,
        "executor": "queue" if on_queue(eval_run) else "process",
        "shard_size": config.shard_size,
        "name": eval_run.name,
    }
    for option, flag in RESUME_KEEPS.items():
        value = given.get(option)
        if value not in (None, False, [], "") and value != own.get(option):
            raise RunOptionError(
                "--resume keeps the run's own set, split, variant, scorers, repeats, per-case timeout "
                f"and executor; drop {flag}"
            )
    if target and target != eval_run.target_id:
        raise RunOptionError(f"--resume {eval_run.id}: the run's target is {eval_run.target_id!r}")


def judge_flags(judge: JudgeConfig) -> list[str]:
    """The ``--judge`` options that name a run's judge (model, endpoint without credentials,
    samples), as a resume must repeat them."""
    words = ["--judge", "--judge-model", judge.model]
    if judge.base_url:
        words += ["--judge-base-url", judge.base_url]
    if judge.samples != 1:
        words += ["--judge-samples", str(judge.samples)]
    return words


def refuse_another_judge(eval_run: EvalRun, given: JudgeConfig | None) -> None:
    """A resume grades the rest of the run with the judge its first cases had: ``--judge`` on a run
    graded without one, or a judge whose model, endpoint or samples differ, would mix two judges
    under the run's one judge record.

    Raises:
        RunOptionError: The options name another judge (or one the run did not use).
    """
    stored = read_run_config(eval_run.config).judge
    if given is None or stored is None:
        if given is not None:
            raise RunOptionError(f"--resume {eval_run.id}: this run was graded without the LLM judge; drop --judge")
        return
    differ = [key for key in ("model", "base_url", "samples") if getattr(given, key) != getattr(stored, key)]
    if differ:
        raise RunOptionError(
            f"--resume {eval_run.id}: the run was graded by another judge ({', '.join(differ)} differ); "
            f"resume it with the same one: {' '.join(judge_flags(stored))}"
        )


def simulator_flags(simulator: SimulatorConfig) -> list[str]:
    """The ``--simulator-*`` options that name a run's simulated user (model, seed), as a
    resume given any must repeat them."""
    return ["--simulator-model", simulator.model, "--simulator-seed", str(simulator.seed)]


def refuse_another_simulator(eval_run: EvalRun, given: SimulatorConfig | None) -> None:
    """A resume plays the rest of the run's scenario cases with the user its first cases met: a
    ``--simulator-model`` on a run started without one, or a model or seed that differ, would
    mix two users in one run (its variance and its comparisons would mean nothing). Given none,
    the resume uses the run's own (:attr:`RunConfig.simulator`); the endpoint and the cache
    may change (an endpoint that moved, a cache to skip).

    Raises:
        RunOptionError: The options name another simulated user (or one the run did not have).
    """
    stored = read_run_config(eval_run.config).simulator
    if given is None:
        return
    if stored is None:
        raise RunOptionError(
            f"--resume {eval_run.id}: this run was started without an LLM-backed user simulator; drop --simulator-model"
        )
    differ = [key for key in ("model", "seed") if getattr(given, key) != getattr(stored, key)]
    if differ:
        raise RunOptionError(
            f"--resume {eval_run.id}: the run's simulated users were played by another simulator "
            f"({', '.join(differ)} differ); resume it with the same one: {' '.join(simulator_flags(stored))} "
            "(or give no --simulator-* option: the run's own is used)"
        )


def resume_changes(eval_run: EvalRun, options: RunOptions) -> dict[str, Any]:
    """What a resume changes in the run's config (its own is kept otherwise): this process as its
    executor, and the options a resume may change (``--scorer-timeout``: a stuck scorer;
    ``--concurrency``: a busy endpoint; ``--cache-target`` / ``--no-cache``: each case is marked
    cached or not on its own, so a run may mix them).

    Raises:
        RunOptionError: A value out of range.
    """
    changes: dict[str, Any] = dict(cli_executor_config())
    if options.scorer_timeout_s is not None:
        changes["scorer_timeout_s"] = options.scorer_timeout_s
    if options.concurrency is not None:
        changes["concurrency"] = options.concurrency
    if options.cache_target is not None:  # the cases still to run use the cache, or not
        changes["cache_target"] = options.cache_target
        if read_run_config(eval_run.config).cache_target and not options.cache_target:
            changes["cache_target_used"] = True  # its first cases may be cached: still counted
    _parse(changes, read_run_config(eval_run.config))
    return changes
