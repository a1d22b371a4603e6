"""Regenerate the example case banks (and the replay data) from the raw public data.

The example suites run offline from a fresh clone, so the derived files are committed; this
script is how they were made, and running it again must reproduce them byte for byte::

    .venv/bin/python examples/build_sets.py                      # reads /work/shared/realdata
    .venv/bin/python examples/build_sets.py --realdata DIR --out DIR

Writes, under ``--out`` (default: this ``examples/`` folder):

* ``sets/gsm8k_test.jsonl`` — the 1,319 GSM8K test questions (openai/grade-school-math, MIT).
* ``sets/hotpotqa_dev100.jsonl`` — the first 100 HotpotQA dev (distractor) questions (CC BY-SA 4.0).
* ``agents/data/gsm8k_example_model_solutions.jsonl.gz`` — the recorded GPT-3 solutions the
  replay target returns, copied unchanged from the source.

See ``examples/README.md`` for the case layout and ``realdata/SOURCES.md`` for the commits.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent
DEFAULT_REALDATA = Path("/work/shared/realdata")

GSM8K_MODELS: tuple[str, ...] = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
"""The four recorded GPT-3 runs in ``example_model_solutions.jsonl`` (size x training method)."""

GSM8K_SOLUTIONS_NAME = "gsm8k_example_model_solutions.jsonl.gz"


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What :func:`build` wrote: one path per output file and the case counts."""

    gsm8k_set: Path
    gsm8k_solutions: Path
    hotpotqa_set: Path
    gsm8k_cases: int
    hotpotqa_cases: int


def gsm8k_final_answer(answer: str) -> str:
    """The final number of a GSM8K reference answer: the text after ``####``, commas removed.

    Args:
        answer: The full reference answer (reasoning lines, then ``#### <number>``).

    Returns:
        The number as a string, e.g. ``"2125"`` for ``"... #### 2,125"``.

    Raises:
        ValueError: The answer has no ``####`` line.
    """
    _head, sep, tail = answer.rpartition("####")
    if not sep:
        raise ValueError(f"GSM8K answer without '####': {answer[-60:]!r}")
    return tail.strip().replace(",", "")


def gsm8k_cases(
    test_rows: Iterable[dict[str, Any]], solution_rows: Iterable[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """GSM8K test rows (and their recorded solutions, same order) as case-bank records.

    Each record: ``id`` ``gsm8k-test-NNNN`` (1-based line number), ``input`` the question,
    ``expected`` the final number as a string, ``tags`` ``["gsm8k", "steps-N"]`` (N = number of
    reasoning lines in the reference answer), no ``split`` (assigned by hashing at load time),
    ``metadata``: the full reference ``answer``, the recorded ``labels`` (model -> OpenAI's
    ``is_correct``) and the ``source`` line.

    Raises:
        ValueError: The two files disagree on a question (they must be line-aligned).
    """
    for number, (row, solutions) in enumerate(zip(test_rows, solution_rows, strict=True), start=1):
        if row["question"] != solutions["question"]:
            raise ValueError(f"line {number}: test.jsonl and example_model_solutions.jsonl disagree on the question")
        steps = len(row["answer"].splitlines()) - 1
        yield {
            "id": f"gsm8k-test-{number:04d}",
            "input": row["question"],
            "expected": gsm8k_final_answer(row["answer"]),
            "tags": ["gsm8k", f"steps-{steps}"],
            "metadata": {
                "answer": row["answer"],
                "labels": {model: bool(solutions[model]["is_correct"]) for model in GSM8K_MODELS},
                "source": f"openai/grade-school-math grade_school_math/data/test.jsonl line {number}",
            },
        }


def hotpotqa_cases(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """HotpotQA rows in the Hugging Face layout as case-bank records.

    The HF layout stores ``context`` and ``supporting_facts`` as column dicts
    (``{"title": [...], "sentences": [[...], ...]}``); a paragraph's text is its sentences
    joined as they are (each sentence after the first carries its leading space, so joining
    with ``""`` restores the Wikipedia text, as the official HotpotQA code does).

    Each record: ``id`` ``hotpot-dev-NNN`` (1-based position in the source file, which has no
    ``_id``), ``input`` ``{"question", "paragraphs": [{"title", "text"}, ...]}`` in the source
    order, ``expected`` ``{"answer", "supporting_titles"}`` (unique titles of the supporting
    facts, first-seen order), ``tags`` ``[type, level]``, ``metadata.supporting_facts`` the
    sentence-level ``[title, sentence index]`` pairs.
    """
    for number, row in enumerate(rows, start=1):
        context = row["context"]
        paragraphs = [
            {"title": title, "text": "".join(sentences)}
            for title, sentences in zip(context["title"], context["sentences"], strict=True)
        ]
        facts = row["supporting_facts"]
        pairs = [[title, sent_id] for title, sent_id in zip(facts["title"], facts["sent_id"], strict=True)]
        yield {
            "id": f"hotpot-dev-{number:03d}",
            "input": {"question": row["question"], "paragraphs": paragraphs},
            "expected": {"answer": row["answer"], "supporting_titles": list(dict.fromkeys(facts["title"]))},
            "tags": [row["type"], row["level"]],
            "metadata": {
                "supporting_facts": pairs,
                "source": f"hotpot_dev_distractor_v1 (HF layout) record {number}",
            },
        }


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records one JSON object per line (UTF-8, keys in insertion order); returns the count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def build(realdata: Path = DEFAULT_REALDATA, out: Path = EXAMPLES) -> BuildResult:
    """Regenerate every derived example file from ``realdata`` into ``out``.

    Args:
        realdata: The folder holding ``gsm8k/`` and ``hotpotqa/`` as described in its SOURCES.md.
        out: The examples folder to write into (``sets/`` and ``agents/data/`` below it).

    Returns:
        The written paths and case counts.

    Raises:
        FileNotFoundError: A source file is missing.
        ValueError: The sources are inconsistent (see :func:`gsm8k_cases`).
    """
    solutions_src = realdata / "gsm8k" / "example_model_solutions.jsonl.gz"
    test_rows = _read_jsonl(realdata / "gsm8k" / "test.jsonl")
    solution_rows = _read_jsonl(solutions_src)
    gsm8k_set = out / "sets" / "gsm8k_test.jsonl"
    gsm8k_count = write_jsonl(gsm8k_set, gsm8k_cases(test_rows, solution_rows))

    # Copied unchanged so the replay target returns exactly what OpenAI recorded.
    gsm8k_solutions = out / "agents" / "data" / GSM8K_SOLUTIONS_NAME
    gsm8k_solutions.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(solutions_src, gsm8k_solutions)

    with (realdata / "hotpotqa" / "hotpot_dev_distractor_first100.hf_format.json").open(encoding="utf-8") as handle:
        hotpot_rows = json.load(handle)
    hotpotqa_set = out / "sets" / "hotpotqa_dev100.jsonl"
    hotpot_count = write_jsonl(hotpotqa_set, hotpotqa_cases(hotpot_rows))
    return BuildResult(gsm8k_set, gsm8k_solutions, hotpotqa_set, gsm8k_count, hotpot_count)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdata", type=Path, default=DEFAULT_REALDATA, help="source data folder")
    parser.add_argument("--out", type=Path, default=EXAMPLES, help="examples folder to write into")
    args = parser.parse_args(argv)
    result = build(args.realdata, args.out)
    print(f"{result.gsm8k_set}: {result.gsm8k_cases} cases")
    print(f"{result.hotpotqa_set}: {result.hotpotqa_cases} cases")
    print(f"{result.gsm8k_solutions}: copied")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
