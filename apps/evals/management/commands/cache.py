"""``evalsite cache stats|clear``: the target response cache (``evalsite eval --cache-target``).

``stats`` lists the stored answers per target and variant; ``clear`` deletes them (all, or one
target's, or one variant's) so the next ``--cache-target`` run calls the target again. The cache is
the file ``$EVALSITE_DATA_DIR/target_cache.sqlite3`` (:mod:`apps.evals.runs.target_cache`).
"""

from __future__ import annotations

import datetime as dt
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.evals.runs.target_cache import cache_path, open_target_cache


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


class Command(BaseCommand):
    help = "Show or clear the target response cache (what `evalsite eval --cache-target` reads and writes)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="{stats,clear}")
        sub.add_parser("stats", help="stored answers per target and variant")
        clear = sub.add_parser("clear", help="delete stored answers (all of them unless --target is given)")
        clear.add_argument("--target", help="only this target's answers")
        clear.add_argument("--variant", help="only this variant's answers (needs --target)")

    def handle(self, *args: Any, **opts: Any) -> None:
        path = cache_path()
        if not path.exists():
            self.stdout.write(f"target cache {path}: empty (no run with --cache-target yet)")
            return
        try:
            cache = open_target_cache(path)
        except Exception as exc:  # noqa: BLE001 - a damaged file: one line, exit 2
            raise CommandError(f"target cache {path}: cannot be read: {exc}", returncode=2) from None
        if opts["action"] == "stats":
            stats = cache.stats()
            self.stdout.write(f"target cache {path}: {sum(s.entries for s in stats)} answer(s)")
            for s in stats:
                who = s.target_id + (f" / {s.variant}" if s.variant else "")
                self.stdout.write(
                    f"  {who}: {s.entries} answer(s), {s.bytes / 1024:.1f} KiB, "
                    f"stored {_when(s.oldest)} .. {_when(s.newest)}"
                )
            return
        if opts["variant"] is not None and not opts["target"]:
            raise CommandError("--variant needs --target (the variant of which target?)", returncode=2)
        deleted = cache.clear(target_id=opts["target"], variant=opts["variant"])
        what = (
            "" if not opts["target"] else f" of {opts['target']}" + (f" / {opts['variant']}" if opts["variant"] else "")
        )
        self.stdout.write(f"target cache: {deleted} answer(s){what} deleted")
