"""Stop a run early when its target cannot take the set's input at all.

When the first K cases of a run (default :data:`DEFAULT_K`, ``RunConfig.early_stop``,
0 to disable) all error with the same error type, running the rest would only produce more of
the same: the run is stopped and marked ``failed`` with a plain sentence naming the target and
the error, instead of hundreds of errored cases shown as "finished".

Portal runs (executed by the task worker) have it on by default; the environment variable
``EVALSITE_EARLY_STOP`` changes that default (``0`` turns it off). A sharded portal run keeps
its K in ``config["early_stop"]``; the shards' writers apply it across shards to the run's
stored results (``apps.evals.worker.shards.stop_run_early``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from apps.evals.runs.config import RunConfig, read_run_config

DEFAULT_K = 20
"""Cases that must all error the same way before a run is stopped."""


def early_stop_k(config: RunConfig | Mapping[str, Any]) -> int:
    """The K of a run: its ``early_stop``, else the default for portal runs (task executor), else
    0 (off: CLI runs report every case). A mapping is a stored config."""
    if not isinstance(config, RunConfig):
        config = read_run_config(config)
    if config.early_stop is not None:
        return config.early_stop
    if config.executor != "task":
        return 0
    try:
        return max(0, int(os.environ.get("EVALSITE_EARLY_STOP", DEFAULT_K)))
    except ValueError:
        return DEFAULT_K


def early_stop_message(target_id: str, error_type: str, k: int, first_message: str) -> str:
    """The sentence a run stopped early shows (``k``: the cases that all errored)."""
    return (
        f"target {target_id} raised {error_type} on every case (the first {k}): "
        f"it may not accept this set's input. Stopped early. First error: {first_message[:300]}"
    )


class EarlyStopError(RuntimeError):
    """The first K cases all errored with the same error type; the message is the sentence shown."""


class EarlyStopSink:
    """A sink watching the first ``k`` results; raises :class:`EarlyStopError` (which stops the
    engine's worker pool) when all ``k`` are target errors of one type. Put it after the store
    in a ``MultiSink`` so the ``k`` results are kept.
    """

    def __init__(self, target_id: str, k: int) -> None:
        self.target_id = target_id
        self.k = k
        self.seen = 0
        self.error_type: str | None = None
        self.first_message = ""
        self.decided = k <= 0

    def on_event(self, event: Any) -> None:
        return None

    def flush(self) -> None:
        return None

    def on_result(self, result: Any) -> None:
        if self.decided:
            return
        error = result.run.error
        if error is None or (self.error_type is not None and error.type != self.error_type):
            self.decided = True  # one case got through, or the errors differ: run to the end
            return
        if self.error_type is None:
            self.error_type, self.first_message = error.type, str(error.message)
        self.seen += 1
        if self.seen >= self.k:
            self.decided = True
            raise EarlyStopError(early_stop_message(self.target_id, self.error_type, self.k, self.first_message))
