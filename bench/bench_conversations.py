"""Conversation cases through the persisted path (issue 25). Run: ``.venv/bin/python bench/bench_conversations.py``.

Each figure is taken on a real ``evalsite eval`` process on a fresh, migrated SQLite file (the
workspace of ``bench_persisted.py``), a no-op target at concurrency 50, ``exact_match`` on every
turn, the median of three runs:

  single-turn    1,000 one-turn cases, cases/s
  conversations  1,000 five-turn conversations (a conversational no-op agent: a ``session``
                 parameter, called once per turn), conversations/s
  ratio          conversations/s over single-turn cases/s: target >= 0.2 (a turn costs no more
                 than a single-turn case)
  peak RSS       of the conversation run (no JSON report) at 1,000 and 10,000 conversations:
                 flat = the larger within 10 % of the smaller

Options: ``--cases N`` (1000), ``--turns T`` (5), ``--rss-cases N`` (10000).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_persisted import Workspace, line, write_cases  # noqa: E402
from machine_speed import machine_line  # noqa: E402

TALKER = """

@target(id="talker", scorers=["exact_match"])
async def talker(message, session):
    return message
"""


def write_conversations(path: Path, n: int, turns: int) -> None:
    """``n`` conversations of ``turns`` turns, each turn expecting its own message back."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            record = {
                "id": f"conv{i}",
                "turns": [{"user": f"c{i} turn {t}", "final_response": f"c{i} turn {t}"} for t in range(turns)],
                "split": "dev",
            }
            f.write(json.dumps(record))
            f.write("\n")


def median_run(ws: Workspace, target: str, cases: Path, report: Path) -> tuple[float, float, dict[str, Any]]:
    """The median-wall of three runs: (wall s, peak RSS MB, the run's JSON report of the median run)."""
    runs = []
    for _ in range(3):
        wall, _cpu, rss, _out = ws.run(
            "eval",
            str(ws.agents),
            "--target",
            target,
            "--set",
            str(cases),
            "--concurrency",
            "50",
            "--quiet",
            "--json",
            str(report),
        )
        runs.append((wall, rss, json.loads(report.read_text())))
    runs.sort(key=lambda r: r[0])
    return runs[1]


def main() -> None:
    """Print the figures (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1_000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--rss-cases", type=int, default=10_000)
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="bench-conversations-") as tmp:
        ws = Workspace(Path(tmp))
        with open(ws.agents / "bench_targets.py", "a", encoding="utf-8") as f:
            f.write(TALKER)
        single = ws.tmp / "single.jsonl"
        write_cases(single, args.cases)
        convs = ws.tmp / "conversations.jsonl"
        write_conversations(convs, args.cases, args.turns)
        report = ws.tmp / "report.json"
        s_wall, _, s_report = median_run(ws, "noop", single, report)
        c_wall, _, c_report = median_run(ws, "talker", convs, report)
        for name, rep in (("single-turn", s_report), ("conversations", c_report)):
            if rep["report"]["passed"] != args.cases:  # a bench of failing cases would time the wrong path
                raise SystemExit(f"{name}: {rep['report']['passed']} of {args.cases} cases passed")
        single_rate = args.cases / s_wall
        conv_rate = args.cases / c_wall
        line(f"single-turn, no-op, {args.cases:,} cases (wall)", single_rate, "cases/s", 1)
        line(
            f"{args.turns}-turn conversations, {args.cases:,} (wall)",
            conv_rate,
            "convs/s",
            single_rate / args.turns,
            note=f"(turns/s {conv_rate * args.turns:,.0f})",
        )
        line("conversations/s over single-turn cases/s", conv_rate / single_rate, "x", 0.2)
        # peak RSS without --json (a JSON report holds every case), the same options at both sizes
        small_rss = ws.run(
            "eval", str(ws.agents), "--target", "talker", "--set", str(convs), "--concurrency", "50", "--quiet"
        )[2]
        big = ws.tmp / "conversations-big.jsonl"
        write_conversations(big, args.rss_cases, args.turns)
        wall, _cpu, big_rss, _ = ws.run(
            "eval", str(ws.agents), "--target", "talker", "--set", str(big), "--concurrency", "50", "--quiet"
        )
        line(
            f"peak RSS growth {args.cases:,} -> {args.rss_cases:,} conversations",
            big_rss / small_rss,
            "x",
            1.10,
            higher_is_better=False,
            note=f"({small_rss:.0f} -> {big_rss:.0f} MB; {args.rss_cases / wall:,.0f} convs/s)",
        )


if __name__ == "__main__":
    main()
