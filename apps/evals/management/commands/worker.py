"""``evalsite worker``: the task worker (django-tasks-db's ``db_worker``) with a heartbeat of its own.

What ``serve`` starts, and what to run on another host sharing the database: it executes runs
started from the browser or the API exactly as ``db_worker`` does, and also writes its
``TaskWorker`` row (host, PID, heartbeat every ``EVALSITE_HEARTBEAT_S`` seconds, busy or idle),
which the status page (``/status/``) and every other process read, and sweeps on a clock
(``apps.evals.worker.sweeper``: dead runs, lapsed shards, the search index; pages only read).
With ``--parent-pid`` (given by ``serve``) it stops as soon as that process is gone, even after
a ``kill -9``.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django_tasks_db.management.commands.db_worker import Command as DbWorkerCommand

from apps.evals.cli.console import ensure_database
from apps.evals.worker.heartbeats import WorkerBeat, mark_worker_stopped, register_worker, stop_reason
from apps.evals.worker.sweeper import Sweeper


class Command(DbWorkerCommand):
    help = "Run the task worker (runs started from the portal or the API), with a heartbeat for /status/."

    def add_arguments(self, parser: ArgumentParser) -> None:
        super().add_arguments(parser)
        parser.set_defaults(reload=False)  # a reloader would fork: the heartbeat names one process
        parser.add_argument(
            "--parent-pid", type=int, default=None, help="stop when this process (the serve that started it) ends"
        )
        parser.add_argument("--restarts", type=int, default=0, help="how many workers its serve restarted before it")

    def handle(self, *args: Any, **options: Any) -> None:
        ensure_database()  # a new --db file is migrated first, as eval and import do (it was a traceback)
        worker_id = options["worker_id"]
        register_worker(
            worker_id,
            backend=options["backend_name"],
            queues=options["queue_name"],
            supervisor_pid=options["parent_pid"],
            restarts=options["restarts"],
        )
        beat = WorkerBeat(worker_id, parent_pid=options["parent_pid"])
        beat.start()
        sweeper = Sweeper(name="evalsite-worker-sweeper")
        sweeper.start()
        reason = "stopped"
        try:
            options = {k: v for k, v in options.items() if k not in ("parent_pid", "restarts")}
            super().handle(*args, **options)
        except BaseException as exc:
            reason = f"ended: {type(exc).__name__}" if not isinstance(exc, SystemExit) else "stopped"
            raise
        finally:
            sweeper.stop()
            beat.stop()
            mark_worker_stopped(worker_id, f"stopped: {stop_reason()}" if stop_reason() else reason)
