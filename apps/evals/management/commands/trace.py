"""``evalsite trace RUN_ID``: print a run's span tree with timings, tokens, tool arguments and results.

RUN_ID is a run id (``<eval run id>:<case id>``) or an eval run id plus ``--case``.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from rich.console import Console
from rich.tree import Tree

from apps.evals.cli.console import UsageError, open_existing_database
from apps.evals.models import EvalResult, EvalRun
from apps.traces.models import Event, Run
from evalcore.spans import FoldedSpan, fold_spans


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _add(parent: Tree, item: Any, limit: int | None) -> None:
    """Add one folded span (with what happened in it) or point event under ``parent``."""
    if not isinstance(item, FoldedSpan):
        payload = item.payload or {}
        colour = "red" if item.type == "error" else "magenta"
        body = {k: v for k, v in payload.items() if k != "parent_span_id"}
        parent.add(f"[{colour}]{item.type}[/] {item.name} {_short(body)}")
        return
    begin, end = item.begin_payload, item.end_payload
    label = f"[cyan]{item.kind}[/] {item.name}"
    if begin.get("arguments") is not None:
        label += f"  args={_short(begin['arguments'], limit or 160)}"
    if item.end is not None:
        bits = [f"{end.get('elapsed_ms', 0):.1f} ms"]
        if end.get("tokens_in") or end.get("tokens_out"):
            bits.append(f"tokens {end.get('tokens_in') or 0}/{end.get('tokens_out') or 0}")
        if end.get("status") == "error":
            bits.append(f"[red]error {_short(end.get('error'))}[/]")
        label = f"{label}  [dim]{'  '.join(bits)}[/]"
    node = parent.add(label)
    for child in item.children:
        _add(node, child, limit)
    for key in ("result", "output_preview", "content_preview"):
        if end.get(key) is not None:
            node.add(f"[dim]{key}:[/] {_short(end[key], limit or 200)}")
            break


class Command(BaseCommand):
    help = "Print the span tree of one run."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", nargs="?", help="a run id, or an eval run id with --case")
        parser.add_argument("--latest", action="store_true", help="the latest eval run's first failing case")
        parser.add_argument("--case", help="case id within the eval run")
        parser.add_argument("--full", action="store_true", help="print payloads whole, not previews")

    @staticmethod
    def _latest_run_id() -> str:
        eval_run = EvalRun.objects.filter(n_done__gt=0).order_by("-started").first()
        if eval_run is None:
            raise UsageError("no eval run stored yet")
        results = EvalResult.objects.filter(eval_run=eval_run).select_related("run")
        result = results.exclude(status="passed").order_by("id").first() or results.order_by("id").first()
        return result.run.run_id if result else ""

    def handle(self, *args: Any, **opts: Any) -> None:
        open_existing_database()
        if opts["latest"]:
            run_id = self._latest_run_id()
        elif not opts["run_id"]:
            raise UsageError("give a RUN_ID (or --latest)")
        else:
            run_id = opts["run_id"] if not opts["case"] else f"{opts['run_id']}:{opts['case']}"
        run = Run.objects.filter(run_id=run_id).first()
        if run is None:
            raise UsageError(f"no run {run_id!r} (a run id looks like <eval run id>:<case id>)")
        console = Console(highlight=False)
        tokens = f"  tokens {run.tokens_in or 0}/{run.tokens_out or 0}" if run.tokens_in or run.tokens_out else ""
        root = Tree(
            f"[bold]{run.run_id}[/]  {run.status}  {run.elapsed_ms or 0:.1f} ms{tokens}"
            + (f"  model {run.model}" if run.model else "")
        )
        limit = 10_000 if opts["full"] else None
        events: list[Event] = list(Event.objects.filter(run=run).order_by("seq"))
        for item in fold_spans(events).roots:
            _add(root, item, limit)
        console.print(root)
        if run.error:
            console.print(f"[red]error[/] {run.error.get('type')}: {run.error.get('message')}")
        console.print(f"final answer: {_short(run.final_answer, 2000)}")
