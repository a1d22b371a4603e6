"""``evalsite serve``: the portal, API and websockets (daphne, in-process) plus the task worker.

Steps: apply pending migrations -> mark runs a dead worker left ``running`` as interrupted ->
start ``db_worker`` as a child process (runs started from the browser) -> serve the ASGI app
with daphne, static files included (Django's static handler: no extra dependency, no
``collectstatic``) -> on Ctrl-C stop daphne, ask the worker to finish (it completes its current
task for up to ``--worker-grace`` seconds, then is stopped and that run marked interrupted).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections


def pending_migrations() -> int:
    """How many migrations are not applied to the default database yet."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def worker_command() -> list[str]:
    """The argv that starts the task worker with this interpreter and these settings."""
    manage = Path(settings.BASE_DIR) / "manage.py"
    base = [sys.executable, str(manage)] if manage.exists() else [sys.executable, "-m", "django"]
    return [*base, "db_worker", "--no-reload", "--interval", "0.5", "--verbosity", "0"]


class Command(BaseCommand):
    help = "Serve the portal, the API and live progress (daphne), with the task worker for runs."
    requires_system_checks: list[str] = []  # checked explicitly in handle(), once

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
        parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
        parser.add_argument(
            "--no-worker", action="store_true", help="do not start the task worker (runs started here stay queued)"
        )
        parser.add_argument(
            "--worker-grace",
            type=float,
            default=10.0,
            help="seconds the worker may take to finish its current run on shutdown (default: %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = options["host"], options["port"]
        if not 0 < port < 65536:
            raise CommandError(f"--port must be 1..65535, not {port}")
        self.check(display_num_errors=False)
        self.migrate()
        worker = None if options["no_worker"] else self.start_worker()
        try:
            self.print_banner(host, port, worker is not None)
            self.serve(host, port)
        finally:
            if worker is not None:
                self.stop_worker(worker, options["worker_grace"])

    # -- steps (small, so tests can call them) ---------------------------------------------------

    def migrate(self) -> None:
        n = pending_migrations()
        if n:
            self.stdout.write(f"Applying {n} pending migration{'s' if n != 1 else ''}…")
            call_command("migrate", interactive=False, verbosity=0)

    def start_worker(self) -> subprocess.Popen[bytes]:
        from apps.evals.tasks import mark_orphaned_runs

        # This is the only worker: nothing can be running a task right now.
        orphans = mark_orphaned_runs()
        if orphans:
            self.stdout.write(f"Marked {orphans} run{'s' if orphans != 1 else ''} of a stopped worker as interrupted.")
        # Its own session: Ctrl-C reaches serve only, which then stops the worker in order.
        return subprocess.Popen(worker_command(), env=os.environ.copy(), start_new_session=True)

    def stop_worker(self, worker: subprocess.Popen[bytes], grace_s: float) -> None:
        if worker.poll() is not None:
            return
        worker.send_signal(signal.SIGTERM)  # first signal: finish the current task, then exit
        try:
            worker.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.stdout.write("Stopping the worker now; its current run will be marked interrupted.")
            worker.send_signal(signal.SIGTERM)  # second signal: stop now
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    def print_banner(self, host: str, port: int, with_worker: bool) -> None:
        from django.contrib.auth import get_user_model

        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{port}/"
        self.stdout.write(f"Evalsite is serving at {url}  (API docs: {url}api/docs)")
        self.stdout.write(f"Log in at {url}accounts/login/")
        if not get_user_model().objects.exists():
            self.stdout.write(
                "No users yet: create one with `evalsite createsuperuser` (or `evalsite demo_users` for "
                "viewer/member demo accounts)."
            )
        worker_state = "running" if with_worker else "off (--no-worker): started runs stay queued"
        self.stdout.write(f"Task worker: {worker_state}")
        self.stdout.write("Quit with CONTROL-C.")

    def serve(self, host: str, port: int) -> None:
        # daphne.server installs Twisted's asyncio reactor on import: import it only here.
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        from evalsite.asgi import application

        server = Server(
            application=ASGIStaticFilesHandler(application),
            endpoints=build_endpoint_description_strings(host=host, port=port),
            signal_handlers=True,
            action_logger=self.log_action,
            verbosity=0,
        )
        server.run()

    def log_action(self, protocol: str, action: str, details: dict[str, Any]) -> None:
        """One line per request / websocket event (daphne's access log hook)."""
        if protocol == "http" and action == "complete":
            self.stdout.write(f"{details['method']} {details['path']} {details['status']}")
        elif protocol == "websocket" and action in ("connected", "disconnected", "rejected"):
            self.stdout.write(f"WS {action} {details['path']}")
