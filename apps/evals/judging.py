"""CLI wiring of the LLM judge: ``--judge`` options -> scorers and injected services.

Filled in by the judge feature; without ``--judge`` nothing is added.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import CommandParser


@dataclass(slots=True)
class JudgeSetup:
    scorers: list[Any] = field(default_factory=list)
    services: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


def add_judge_arguments(parser: CommandParser) -> None:
    parser.add_argument("--judge", action="store_true", help="also grade answers with the rubric LLM judge")


def judge_setup(opts: dict[str, Any]) -> JudgeSetup:
    return JudgeSetup()
