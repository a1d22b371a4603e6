"""Simulated users in ``evalsite eval``: the ``--simulator-*`` options building the LLM-backed
user, and the account at the end of a run: the ``simulator`` block of the JSON report and its
console lines (usage apart from the agent's, variance over repeats, and with a ``--baseline``
the turn where each conversation left the baseline's).

The figures come from :mod:`evalcore.simulator` (:func:`~evalcore.simulator.conversation_variance`,
:func:`~evalcore.simulator.first_divergence`); nothing here decides a verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import CommandParser
from pydantic import ValidationError

from apps.evals.cli.console import UsageError
from apps.evals.queries.simulated import simulated_runs
from apps.evals.runs.config import SimulatorConfig
from apps.evals.runs.simulator import SimulatorSetupError, build_user_simulator, default_simulator_base_url
from evalcore.redact import strip_userinfo
from evalcore.simulator import ConversationVariance, LLMUser, conversation_variance, first_divergence
from evalcore.stats import wilson_interval
from evalcore.typed_numbers import ascii_integer


@dataclass(slots=True)
class SimulatorAccount:
    """What the run's simulated users did.

    Attributes:
        record: The JSON report's ``simulator`` block: ``cases`` / ``runs`` simulated, ``usage``
            (the simulator's ``calls``, ``cached`` replies, ``tokens_in`` / ``tokens_out``: never in
            the agent's tokens), ``variance``
            (:meth:`~evalcore.simulator.ConversationVariance.as_json`) and, with a baseline,
            ``divergence``: per shared (case, repeat) ``{"case_id", "repeat_index", "turn"
            (first differing turn, 1-based; null: the same conversation), "flip" (regression /
            improvement / null), "within_variance"}``, and ``flips``: the run-level statement on
            them (:func:`flipped_cases`).
        lines: The console lines (rich markup).
    """

    record: dict[str, Any]
    lines: list[str] = field(default_factory=list)


def simulator_account(
    eval_run_id: str, *, baseline_id: str | None = None, flips: Iterable[tuple[str, int, str]] = ()
) -> SimulatorAccount | None:
    """The simulated users' account of a finished run, ``None`` when it has no simulated case.

    Args:
        eval_run_id: The run.
        baseline_id: The compared baseline run, if any.
        flips: The baseline comparison's flips as ``(case id, repeat index, kind)``.

    A flip is *within the simulator's variance* when its case played more than one distinct
    conversation across the repeats of either run: the same agent already met different users
    there, so the flip alone does not show the variants differ.
    """
    runs = list(simulated_runs(eval_run_id))
    if not runs:
        return None
    usage = {"calls": 0, "cached": 0, "tokens_in": 0, "tokens_out": 0}
    for _, _, metadata in runs:
        block = metadata.get("simulator")
        for key in usage:
            value = block.get(key) if isinstance(block, dict) else None
            usage[key] += value if type(value) is int else 0
    variance = conversation_variance((case_id, metadata) for case_id, _, metadata in runs)
    cases = len(variance.per_case)
    record: dict[str, Any] = {"cases": cases, "runs": len(runs), "usage": usage, "variance": variance.as_json()}
    lines = [
        f"simulated users: {cases} case(s), {usage['calls']} simulator call(s), {usage['cached']} cached "
        f"repl{'y' if usage['cached'] == 1 else 'ies'}, {usage['tokens_in']} in / {usage['tokens_out']} out "
        "tokens (not the agent's)"
    ]
    if variance.cases:
        lines.append(variance.summary())
    if baseline_id is not None:
        divergence, line, flipped = _divergence(runs, baseline_id, variance, flips)
        record["divergence"] = divergence
        record["flips"] = flipped
        lines += [line, _flips_line(flipped)]
    return SimulatorAccount(record, lines)


def _divergence(
    runs: list[tuple[str, int, dict[str, Any]]],
    baseline_id: str,
    variance: ConversationVariance,
    flips: Iterable[tuple[str, int, str]],
) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    base_runs = list(simulated_runs(baseline_id))
    base = {(case_id, index): metadata.get("turns") for case_id, index, metadata in base_runs}
    base_variance = conversation_variance((case_id, metadata) for case_id, _, metadata in base_runs)
    flipped = {(case_id, index): kind for case_id, index, kind in flips}
    rows: list[dict[str, Any]] = []
    for case_id, index, metadata in runs:
        if (case_id, index) not in base:
            continue
        turn = first_divergence(base[(case_id, index)], metadata.get("turns"))
        varies = any(v.per_case.get(case_id, {}).get("distinct", 1) > 1 for v in (variance, base_variance))
        rows.append(
            {
                "case_id": case_id,
                "repeat_index": index,
                "turn": turn,
                "flip": flipped.get((case_id, index)),
                "within_variance": varies,
            }
        )
    diverged = [row for row in rows if row["turn"] is not None]
    flipped_rows = [row for row in rows if row["flip"] is not None]
    noisy = sum(1 for row in flipped_rows if row["within_variance"])
    line = (
        f"simulated users vs baseline: {len(diverged)}/{len(rows)} shared conversation(s) diverge"
        + (f" (first at turn {min(row['turn'] for row in diverged)})" if diverged else "")
        + f"; {len(flipped_rows)} flipped, {noisy} of them within the simulator's variance"
        " (that case met different users across one run's repeats)"
    )
    return rows, line, flipped_cases(flipped_rows, (variance, base_variance))


def flipped_cases(rows: list[dict[str, Any]], variances: Iterable[ConversationVariance]) -> dict[str, Any]:
    """The run-level statement on the flips between two runs: of the simulated cases with at
    least one flipped (case, repeat), how many met more than one distinct conversation across
    the repeats of either run (the same agent already met different users there, so the flip may
    be the simulator's doing rather than the variants').

    Args:
        rows: The divergence rows with a ``flip``.
        variances: :class:`~evalcore.simulator.ConversationVariance` of the run and of the baseline.

    Returns:
        ``{"cases": N flipped cases, "within_variance": k, "coverage": "n=k/N", "share": k/N,
        "interval": 95% Wilson interval of k/N (Wilson 1927), "unmeasured": flipped cases run
        once in both runs (their variance was not seen: counted in N, never in k), "case_ids":
        the k cases}``; ``share`` and ``interval`` are ``None`` when N is 0.
    """
    chosen = list(variances)
    cases = sorted({str(row["case_id"]) for row in rows})

    def counts(case_id: str) -> list[dict[str, int]]:
        return [v.per_case[case_id] for v in chosen if case_id in v.per_case]

    noisy = [c for c in cases if any(n["distinct"] > 1 for n in counts(c))]
    unmeasured = sum(1 for c in cases if all(n["repeats"] < 2 for n in counts(c)))
    interval = wilson_interval(len(noisy), len(cases)) if cases else None
    return {
        "cases": len(cases),
        "within_variance": len(noisy),
        "coverage": f"n={len(noisy)}/{len(cases)}",
        "share": len(noisy) / len(cases) if cases else None,
        "interval": None if interval is None else list(interval),
        "unmeasured": unmeasured,
        "case_ids": noisy,
    }


def _flips_line(flipped: dict[str, Any]) -> str:
    """The console line of :func:`flipped_cases`."""
    if not flipped["cases"]:
        return "simulated users vs baseline: no simulated case flipped"
    low, high = flipped["interval"]
    line = (
        f"simulated users vs baseline: {flipped['within_variance']}/{flipped['cases']} flipped case(s) met more "
        f"than one distinct conversation in a run, so their flip may be the simulator's doing "
        f"({flipped['share']:.0%}, 95% CI {low:.0%}-{high:.0%})"
    )
    if flipped["unmeasured"]:
        line += f"; {flipped['unmeasured']} ran once in each run (variance not seen: use --repeat)"
    return line


# --- the LLM-backed user of a CLI run ------------------------------------------------------------


def add_simulator_arguments(parser: CommandParser) -> None:
    """``--simulator-model``, ``--simulator-base-url``, ``--simulator-seed``, ``--no-simulator-cache``."""
    group = parser.add_argument_group("simulated users (scenario cases without a script)")
    group.add_argument(
        "--simulator-model",
        help="model playing the user of scenario cases (enables the LLM user; stored with the run: "
        "--resume plays on with it)",
    )
    group.add_argument(
        "--simulator-base-url",
        help="its OpenAI-compatible endpoint (default: --judge-base-url, $EVALSITE_JUDGE_BASE_URL or "
        "$EVALSITE_MODEL_BASE_URL)",
    )
    group.add_argument(
        "--simulator-seed", type=ascii_integer, default=None, help="seed sent with every call (default 0)"
    )
    group.add_argument("--no-simulator-cache", action="store_true", help="do not read or write the simulator's cache")


@dataclass(frozen=True, slots=True)
class SimulatorSetup:
    """The user simulator the ``--simulator-*`` options ask for.

    Attributes:
        config: What the run stores (no credentials), ``None`` without ``--simulator-model``.
        user: The LLM-backed user built from it (with the endpoint as given, credentials
            included), ``None`` without ``--simulator-model``.
    """

    config: SimulatorConfig | None = None
    user: LLMUser | None = None


def simulator_setup(opts: Mapping[str, Any]) -> SimulatorSetup:
    """The run's LLM-backed user from the CLI options (none without ``--simulator-model``).

    The model is built as the judge's is (:func:`apps.evals.runs.simulator.build_user_simulator`:
    the API key from the environment, ``$EVALSITE_JUDGE_API_KEY_ENV`` honoured); its replies are
    cached in the data folder unless ``--no-simulator-cache``. The config keeps the endpoint
    without credentials, so the task worker, the queue's shards and a resume rebuild the same user.

    Raises:
        UsageError: ``--simulator-*`` options without ``--simulator-model``, a negative seed, or a
            model that cannot be built.
    """
    name = opts.get("simulator_model")
    if not name:
        if opts.get("simulator_base_url") or opts.get("simulator_seed") is not None or opts.get("no_simulator_cache"):
            raise UsageError("--simulator-base-url / --simulator-seed / --no-simulator-cache need --simulator-model")
        return SimulatorSetup()
    base_url = opts.get("simulator_base_url") or opts.get("judge_base_url") or default_simulator_base_url()
    try:
        config = SimulatorConfig(
            model=name,
            base_url=strip_userinfo(base_url),
            seed=opts.get("simulator_seed") or 0,
            cache=not opts.get("no_simulator_cache"),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = "--simulator-seed" if first["loc"] == ("seed",) else "--simulator-model"
        raise UsageError(f"{flag}: {first.get('ctx', {}).get('error') or first['msg']}") from None
    try:
        user = build_user_simulator(config, base_url=base_url or None)
    except SimulatorSetupError as exc:
        raise UsageError(f"--simulator-model: {exc}") from None
    return SimulatorSetup(config, user)
