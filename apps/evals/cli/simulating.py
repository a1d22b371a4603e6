"""Simulated users in ``evalsite eval``: the ``--simulator-*`` options building the LLM-backed
user, and the account at the end of a run: the ``simulator`` block of the JSON report and its
console lines (usage apart from the agent's, variance over repeats, and with a ``--baseline``
the turn where each conversation left the baseline's).

The figures come from :mod:`evalcore.simulator` (:func:`~evalcore.simulator.conversation_variance`,
:func:`~evalcore.simulator.first_divergence`); nothing here decides a verdict.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.management.base import CommandParser

from apps.evals.cli.console import UsageError
from apps.evals.queries.simulated import simulated_runs
from evalcore.judge.cache import SqliteJudgeCache
from evalcore.redact import register_secret, url_secrets
from evalcore.runtime.models import ModelError
from evalcore.simulator import ConversationVariance, LLMUser, conversation_variance, first_divergence
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
            improvement / null), "within_variance"}``.
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
        divergence, line = _divergence(runs, baseline_id, variance, flips)
        record["divergence"] = divergence
        lines.append(line)
    return SimulatorAccount(record, lines)


def _divergence(
    runs: list[tuple[str, int, dict[str, Any]]],
    baseline_id: str,
    variance: ConversationVariance,
    flips: Iterable[tuple[str, int, str]],
) -> tuple[list[dict[str, Any]], str]:
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
    return rows, line


# --- the LLM-backed user of a CLI run ------------------------------------------------------------

SIMULATOR_CACHE_FILE = "user_simulator_cache.sqlite3"
"""The simulated users' reply cache, in the data folder (beside the judge's)."""


def add_simulator_arguments(parser: CommandParser) -> None:
    """``--simulator-model``, ``--simulator-base-url``, ``--simulator-seed``, ``--no-simulator-cache``."""
    group = parser.add_argument_group("simulated users (scenario cases without a script)")
    group.add_argument("--simulator-model", help="model playing the user of scenario cases (enables the LLM user)")
    group.add_argument(
        "--simulator-base-url",
        help="its OpenAI-compatible endpoint (default: --judge-base-url, $EVALSITE_JUDGE_BASE_URL or "
        "$EVALSITE_MODEL_BASE_URL)",
    )
    group.add_argument("--simulator-seed", type=ascii_integer, default=0, help="seed sent with every call (default 0)")
    group.add_argument("--no-simulator-cache", action="store_true", help="do not read or write the simulator's cache")


def simulator_setup(opts: Mapping[str, Any]) -> LLMUser | None:
    """The run's LLM-backed user from the CLI options (``None`` without ``--simulator-model``).

    The model is built as the judge's is (:func:`evalcore.runtime.openai_client.model_from_settings`,
    the API key from the environment, ``$EVALSITE_JUDGE_API_KEY_ENV`` honoured); its replies are
    cached in :data:`SIMULATOR_CACHE_FILE` in the data folder unless ``--no-simulator-cache``.

    Raises:
        UsageError: ``--simulator-*`` options without ``--simulator-model``, ``--executor queue``
            (workers have no simulator), or a model that cannot be built.
    """
    name = opts.get("simulator_model")
    if not name:
        if opts.get("simulator_base_url") or opts.get("simulator_seed") or opts.get("no_simulator_cache"):
            raise UsageError("--simulator-base-url / --simulator-seed / --no-simulator-cache need --simulator-model")
        return None
    if opts.get("executor") == "queue":
        raise UsageError("--simulator-model: the LLM-backed user runs in-process only, not with --executor queue")
    # lazy: it imports the openai SDK (~0.5 s), needed only when a simulator is asked for
    from evalcore.runtime.openai_client import model_from_settings

    env = dict(os.environ)
    base_url = (
        opts.get("simulator_base_url")
        or opts.get("judge_base_url")
        or env.get("EVALSITE_JUDGE_BASE_URL")
        or env.get("EVALSITE_MODEL_BASE_URL")
    )
    env["EVALSITE_MODEL"] = name
    for secret in url_secrets(base_url or ""):
        register_secret(secret)  # a password in the URL is redacted like a configured key
    if base_url:
        env["EVALSITE_MODEL_BASE_URL"] = base_url
    if env.get("EVALSITE_JUDGE_API_KEY_ENV"):
        env["EVALSITE_MODEL_API_KEY_ENV"] = env["EVALSITE_JUDGE_API_KEY_ENV"]
    try:
        model = model_from_settings(env)
    except ModelError as exc:
        raise UsageError(f"--simulator-model: {exc}") from None
    cache = None
    if not opts.get("no_simulator_cache"):
        settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
        cache = SqliteJudgeCache(settings.DATA_DIR / SIMULATOR_CACHE_FILE)
    return LLMUser(model, cache=cache, seed=int(opts.get("simulator_seed") or 0))
