"""``evalsite serve``: the portal, API and websockets (daphne, in-process) plus the task worker.

Steps: check the database (a file that is not a database is a one-line error, exit 2) and apply
pending migrations -> mark runs whose process died as interrupted (never those of a live worker
of another ``serve``) -> start ``evalsite worker`` as a child process (runs started from the
browser; it stops by itself if this process is killed) and supervise it
(``apps.evals.worker.supervisor``): when it ends (a target that calls ``os._exit`` or segfaults kills
it), its run is marked interrupted with the case that was in flight, queued again (that case is
errored, the others run) and a new worker starts within a second or two -> serve the ASGI app with daphne,
static files included (Django's static handler: no extra dependency, no ``collectstatic``) ->
on Ctrl-C stop daphne, ask the worker to finish (it completes its current task for up to
``--worker-grace`` seconds, then is stopped and that run marked interrupted).
"""

from __future__ import annotations

import signal
import threading
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.evals.cli.console import check_database, finite_float, migration_lock, pending_migrations
from apps.evals.cli.serving import (
    PortInUse,
    check_port,
    development_defaults,
    is_loopback,
    port_message,
    public_address,
    worker_lines,
)
from apps.evals.worker.supervisor import WorkerSupervisor
from apps.evals.worker.sweeper import Sweeper
from evalcore.typed_numbers import ascii_integer


class Command(BaseCommand):
    help = "Serve the portal, the API and live progress (daphne), with the task worker for runs."
    requires_system_checks: list[str] = []  # checked explicitly in handle(), once

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
        parser.add_argument("--port", type=ascii_integer, default=8000, help="port (default: %(default)s)")
        parser.add_argument(
            "--no-worker",
            action="store_true",
            help="do not start the task worker: runs started here stay queued until a worker runs "
            "(`evalsite worker` on this database; `evalsite queue_worker` with EVALSITE_QUEUE=rq)",
        )
        parser.add_argument(
            "--worker-grace",
            type=finite_float,
            default=10.0,
            help="seconds the worker may take to finish its current run on shutdown (default: %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            # Started as a background job (`make demo &`), under nohup or by some CI runners,
            # serve inherits SIGINT *ignored* and Ctrl-C / `kill -INT` would do nothing: take
            # Python's usual handling back (it stops daphne, then the worker, in order).
            signal.signal(signal.SIGINT, signal.default_int_handler)
        host, port = options["host"], options["port"]
        if not 0 < port < 65536:
            raise CommandError(f"--port must be 1..65535, not {port}", returncode=2)
        if options["worker_grace"] < 0:
            raise CommandError(f"--worker-grace must be >= 0 seconds, not {options['worker_grace']:g}", returncode=2)
        check_database()
        self.check(display_num_errors=False)
        self.migrate()
        check_port(host, port)  # before anything starts or says "serving"
        supervisor = None if options["no_worker"] else WorkerSupervisor(self.stdout.write)
        # pages only read: without the supervisor (which sweeps), serve sweeps on a thread of its own
        sweeper = Sweeper() if supervisor is None else None
        if supervisor is not None:
            supervisor.start()
        if sweeper is not None:
            sweeper.start()
        try:
            shown = self.public_address(host)
            self.serve(host, port, banner=self.banner(shown, port, supervisor is not None))
        finally:
            if supervisor is not None:
                supervisor.stop(options["worker_grace"])
            if sweeper is not None:
                sweeper.stop()

    # -- steps (small, so tests can call them) ---------------------------------------------------

    def migrate(self) -> None:
        n = pending_migrations()
        if n:
            self.stdout.write(f"Applying {n} pending migration{'s' if n != 1 else ''}…")
            with migration_lock():
                if pending_migrations():
                    call_command("migrate", interactive=False, verbosity=0)

    def public_address(self, host: str) -> str:
        """The host to print, one the server accepts (see ``serving.public_address``); warns (one
        block, on stderr) about development defaults when listening beyond loopback."""
        if is_loopback(host):
            return host
        decided = public_address(host)
        self.stderr.write(
            f"WARNING: listening on {host}, reachable from other machines, with these development defaults:"
        )
        for note in development_defaults():
            self.stderr.write(f"  - {note}")
        listed = ", ".join(h for h in decided.allowed if h != "testserver")
        if decided.configured:
            self.stderr.write(f"  Accepted host names (from EVALSITE_ALLOWED_HOSTS): {listed}")
            if decided.refused:
                self.stderr.write(f"  Not accepted, add them to that list to use them: {', '.join(decided.refused)}")
        else:
            self.stderr.write(f"  Accepted host names for this run: {listed}")
            self.stderr.write("  To choose them, set EVALSITE_ALLOWED_HOSTS=name1,name2 (comma-separated).")
        self.stderr.write("  See README, section Deploying, for the production settings.")
        return decided.shown

    def banner(self, host: str, port: int, with_worker: bool) -> list[str]:
        """The lines printed once the server listens (its URLs, the worker's state)."""
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        url = f"http://{shown}:{port}/"
        lines = [f"Evalsite is serving at {url}  (API docs: {url}api/docs)", f"Log in at {url}accounts/login/"]
        if not get_user_model().objects.exists():
            lines.append(
                "No users yet: create one with `evalsite createsuperuser` (or `evalsite demo_users` for "
                "viewer/member demo accounts)."
            )
        lines += worker_lines(with_worker)
        lines.append("Quit with CONTROL-C.")
        return lines

    def serve(self, host: str, port: int, banner: list[str] | None = None) -> None:
        """Run daphne until stopped; ``banner`` is printed once it listens.

        Raises:
            PortInUse: daphne could not listen (the port was taken after ``check_port``).
        """
        # daphne.server installs Twisted's asyncio reactor on import: import it only here.
        from channels.routing import get_default_application
        from daphne.endpoints import build_endpoint_description_strings
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        # daphne that refuses oversized and unauthenticated bodies as they arrive (rs3-03)
        from apps.core.daphne_limits import LimitedServer as Server

        # settings.ASGI_APPLICATION (evalsite.asgi, a layer above this app), loaded by name
        application = get_default_application()

        failures: list[str] = []
        command = self

        class ServingServer(Server):
            def listen_success(self, listening: Any) -> None:
                super().listen_success(listening)
                for line in banner or []:
                    command.stdout.write(line)

            def listen_error(self, failure: Any) -> None:
                failures.append(str(failure.getErrorMessage()))
                self.stop()

        server = ServingServer(
            application=ASGIStaticFilesHandler(application),
            endpoints=build_endpoint_description_strings(host=host, port=port),
            signal_handlers=True,
            action_logger=self.log_action,
            verbosity=0,
        )
        server.run()
        if failures:
            raise PortInUse(port_message(host, port, failures[0]))

    def log_action(self, protocol: str, action: str, details: dict[str, Any]) -> None:
        """One line per request / websocket event (daphne's access log hook)."""
        if protocol == "http" and action == "complete":
            self.stdout.write(f"{details['method']} {details['path']} {details['status']}")
        elif protocol == "websocket" and action in ("connected", "disconnected", "rejected"):
            self.stdout.write(f"WS {action} {details['path']}")
