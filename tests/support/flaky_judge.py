"""A stand-in judge endpoint that grades by the answer and fails a share of its calls.

It answers the rubric judge's questions (chat completions) with accuracy 5 when the answer in
the prompt does not contain ``WRONG`` and 1 when it does; a seeded ``fail_share`` of calls
gets a 503 or a 429 instead (alternately), each with ``Retry-After: 0``.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any

from tests.support.stand_in_llm import Scripted, StandInLLM, completion_body

AXES = ("completeness", "grounding", "hazard_avoidance", "calibration")


class FlakyJudge(StandInLLM):
    """The stand-in judge. ``calls`` / ``failures`` count what it answered."""

    def __init__(self, *, fail_share: float = 0.1, seed: int = 7) -> None:
        super().__init__()
        self.fail_share = fail_share
        self._random = random.Random(seed)
        self._count_lock = threading.Lock()
        self.calls = 0
        self.failures = 0

    def _next_answer(self, body: Any) -> Scripted:
        with self._count_lock:
            self.calls += 1
            fail = self._random.random() < self.fail_share
            if fail:
                self.failures += 1
                status = 503 if self.failures % 2 else 429
        if fail:
            error = {"error": {"message": "stand-in judge: overloaded", "type": "overloaded"}}
            return Scripted(status, json.dumps(error).encode(), {"Retry-After": "0"})
        # the answer under judgement is in the prompt; nothing else there says WRONG
        answer = json.dumps(body.get("messages", [])) if isinstance(body, dict) else ""
        accuracy = 1 if "WRONG" in answer else 5
        grades = {"accuracy": {"score": accuracy, "reason": "checked"}}
        grades.update({axis: {"score": 4, "reason": "fine"} for axis in AXES})
        return Scripted(200, json.dumps(completion_body(json.dumps(grades), usage=(40, 20))).encode())

    def __enter__(self) -> FlakyJudge:
        self.start()
        return self
