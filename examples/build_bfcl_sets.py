"""Build the BFCL example case banks from the Berkeley Function-Calling Leaderboard v4 data.

Reads ``BFCL_v4_<category>.json`` and ``possible_answer__BFCL_v4_<category>.json`` (JSON Lines
despite the name) and writes ``examples/sets/bfcl_<category>.jsonl``, one case per question:

* ``id``: the BFCL id (e.g. ``simple_python_0``);
* ``input``: ``{"question": [{"role", "content"}, ...], "functions": [<function docs>]}``; the
  question is BFCL's single turn, kept as a message list so system prompts survive;
* ``expected``: BFCL's possible answer, ``[{"func": {"arg": [accepted values...]}}, ...]``
  (``""`` among accepted values = the argument may be omitted), or ``[]`` for irrelevance
  (the right behaviour is to call no function);
* ``tags``: ``[category]``; ``metadata``: ``{"source": "BFCL v4"}``.

Usage::

    python examples/build_bfcl_sets.py [--source /work/shared/realdata/bfcl] [--out examples/sets]

Score with ``tool_calls:mode=any_order,strings=bfcl`` (BFCL's parallel checker ignores order and
standardises strings).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "irrelevance",
)
"""The BFCL v4 categories converted (single-turn, Python-typed; irrelevance has no answers)."""

NO_ANSWER: frozenset[str] = frozenset({"irrelevance"})
"""Categories whose correct behaviour is to call no function (no possible-answer file)."""

DEFAULT_SOURCE = Path("/work/shared/realdata/bfcl")
DEFAULT_OUT = Path(__file__).resolve().parent / "sets"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def build_category(category: str, source: Path) -> list[dict[str, Any]]:
    """The case records of one category, in BFCL order.

    Raises:
        FileNotFoundError: A source file is missing.
        ValueError: A question has no possible answer, or has several turns.
    """
    questions = _read_jsonl(source / f"BFCL_v4_{category}.json")
    answers: dict[str, Any] = {}
    if category not in NO_ANSWER:
        answers = {
            row["id"]: row["ground_truth"] for row in _read_jsonl(source / f"possible_answer__BFCL_v4_{category}.json")
        }
    records = []
    for row in questions:
        if len(row["question"]) != 1:
            raise ValueError(f"{row['id']}: expected one turn, got {len(row['question'])}")
        if category in NO_ANSWER:
            expected: Any = []
        elif row["id"] in answers:
            expected = answers[row["id"]]
        else:
            raise ValueError(f"{row['id']}: no possible answer")
        records.append(
            {
                "id": row["id"],
                "input": {"question": row["question"][0], "functions": row["function"]},
                "expected": expected,
                "tags": [category],
                "split": None,
                "metadata": {"source": "BFCL v4"},
            }
        )
    return records


def write_sets(source: Path = DEFAULT_SOURCE, out: Path = DEFAULT_OUT) -> dict[str, int]:
    """Write every category's ``bfcl_<category>.jsonl``; returns category -> case count."""
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for category in CATEGORIES:
        records = build_category(category, source)
        with (out / f"bfcl_{category}.jsonl").open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        counts[category] = len(records)
    return counts


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder with the BFCL v4 files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for bfcl_<category>.jsonl")
    args = parser.parse_args()
    for category, count in write_sets(args.source, args.out).items():
        print(f"bfcl_{category}.jsonl: {count} cases")


if __name__ == "__main__":
    main()
