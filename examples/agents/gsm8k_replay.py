"""GSM8K replay: four real GPT-3 models, replayed from OpenAI's recorded solutions.

OpenAI published, with GSM8K (openai/grade-school-math, MIT), one solution per test question
from each of four GPT-3 runs — 6B and 175B parameters, each either finetuned or finetuned plus
a verifier — and labelled each solution ``is_correct``. This target returns the recorded
solution for the case's question, so a full GSM8K run needs no model and no network, and its
pass counts are known in advance: scored with ``numeric_match`` over all 1,319 questions they
must equal OpenAI's labels (286, 515, 458 and 742 correct).

The recorded file is shipped unchanged in ``data/`` (see ``examples/build_sets.py``), so the
example runs from a fresh clone.
"""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path
from typing import Any

from evalcore.discovery import TargetSpec
from evalcore.targets import RunContext
from evalcore.types import TargetOutput

SOLUTIONS_PATH = Path(__file__).resolve().parent / "data" / "gsm8k_example_model_solutions.jsonl.gz"
"""OpenAI's ``example_model_solutions.jsonl``, gzip-compressed, content unchanged."""

MODELS: tuple[str, ...] = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
"""The recorded runs, smallest and weakest first (the variant labels)."""

_cache: dict[str, dict[str, dict[str, Any]]] = {}
_lock = threading.Lock()


def load_solutions(path: Path = SOLUTIONS_PATH) -> dict[str, dict[str, Any]]:
    """The recorded solutions keyed by question text (read once per path, then cached).

    Returns:
        question -> the file's row: ``{"question", "ground_truth", "<model>": {"is_correct",
        "solution"}, ...}``.

    Raises:
        FileNotFoundError: The data file is missing (regenerate it with ``examples/build_sets.py``).
    """
    key = str(path)
    with _lock:
        if key not in _cache:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                rows = (json.loads(line) for line in handle if line.strip())
                _cache[key] = {row["question"]: row for row in rows}
        return _cache[key]


class NotRecordedError(LookupError):
    """A question the replay has no recorded answer for (its message says so in plain words)."""


class ReplayModel:
    """A target that answers a GSM8K question with one recorded model's solution.

    Args:
        model: One of :data:`MODELS`.
        path: The recorded-solutions file.

    Raises:
        ValueError: ``model`` is not a recorded run.
    """

    def __init__(self, model: str, path: Path = SOLUTIONS_PATH) -> None:
        if model not in MODELS:
            raise ValueError(f"no recorded run {model!r} (recorded: {', '.join(MODELS)})")
        self.model = model
        self.path = path
        self.name = f"gsm8k-replay-{model}"

    async def run(self, input: Any, ctx: RunContext) -> TargetOutput:
        """Return the recorded solution text for the question ``input``.

        The solution is the model's own reasoning ending in ``A: <number>``; the output's
        ``model`` is the run's name, so provenance is recorded on every run.

        Args:
            input: The question text (or a ``{"question": ...}`` object).
            ctx: The run context (unused: a replay needs nothing but the question).

        A question outside the recording (e.g. typed in the playground) is an error with a
        plain sentence saying so (:class:`NotRecordedError`), never a bare ``KeyError``: a
        replay knows only the questions it recorded, and in an eval such a case is errored,
        not scored as the model's mistake.

        Raises:
            TypeError: ``input`` carries no question text.
            NotRecordedError: The question is not one of the 1,319 GSM8K test questions.
        """
        question = input.get("question") if isinstance(input, dict) else input
        if isinstance(question, list):  # a playground conversation: its last user message
            users = [m.get("content") for m in question if isinstance(m, dict) and m.get("role") == "user"]
            question = users[-1] if users else None
        if not isinstance(question, str):
            raise TypeError(f"expected the question text, got {type(input).__name__}")
        solutions = load_solutions(self.path)
        row = solutions.get(question) or solutions.get(question.strip())
        if row is None:
            raise NotRecordedError(
                f"This replay has no recorded answer for that question. It replays {self.model}'s "
                f"recorded solutions to the {len(solutions):,} GSM8K test questions only: ask one of "
                'them word for word (open a case of the gsm8k_test set and use "Open in playground").'
            )
        recorded = row[self.model]
        # The label is OpenAI's, stored so a reviewer can see it next to our own verdict.
        return TargetOutput(
            output=recorded["solution"],
            model=self.model,
            metadata={"recorded_is_correct": bool(recorded["is_correct"])},
        )


gsm8k_replay = TargetSpec(
    input_kind="text",
    id="gsm8k-replay",
    variants={model: ReplayModel(model) for model in MODELS},
    default_variant="175b_verification",
    scorers=["numeric_match"],
    description="GSM8K test: replays OpenAI's recorded GPT-3 6B/175B solutions (no model needed)",
    default_set="../sets/gsm8k_test.jsonl",
)
