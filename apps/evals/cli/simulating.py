"""The simulated users' account at the end of ``evalsite eval``: the ``simulator`` block of the
JSON report and its console lines (usage apart from the agent's, variance over repeats, and
with a ``--baseline`` the turn where each conversation left the baseline's).

The figures come from :mod:`evalcore.simulator` (:func:`~evalcore.simulator.conversation_variance`,
:func:`~evalcore.simulator.first_divergence`); nothing here decides a verdict.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from apps.evals.queries.simulated import simulated_runs
from evalcore.simulator import ConversationVariance, conversation_variance, first_divergence


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
