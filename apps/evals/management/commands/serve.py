"""``evalsite serve``: the portal, API and websockets (daphne, in-process) plus the task worker.

Steps: check the database (a file that is not a database is a one-line error, exit 2) and apply
pending migrations -> mark runs whose process died as interrupted -> start ``db_worker`` as a
child process (runs started from the browser) and supervise it: when it ends (a target that
calls ``os._exit`` or segfaults kills it), its run is marked interrupted with the case that was
in flight and a new worker starts within a second or two -> serve the ASGI app with daphne,
static files included (Django's static handler: no extra dependency, no ``collectstatic``) ->
on Ctrl-C stop daphne, ask the worker to finish (it completes its current task for up to
``--worker-grace`` seconds, then is stopped and that run marked interrupted).
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from apps.core.secret_key import OLD_PUBLIC_KEY
from apps.evals.console import check_database, finite_float, migration_lock
from apps.evals.liveness import mark_stale_runs
from apps.evals.management.commands.demo_users import DEMO_USERS
from apps.evals.tasks import mark_orphaned_runs


def pending_migrations() -> int:
    """How many migrations are not applied to the default database yet."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_allowed(host: str, allowed: list[str]) -> bool:
    """Whether Django accepts ``host`` under ``allowed`` (its own matching rules)."""
    from django.utils.http import is_same_domain

    return any(pattern == "*" or is_same_domain(host.lower(), pattern.lower()) for pattern in allowed)


def development_defaults() -> list[str]:
    """What is still at its development default, one sentence each (empty when none)."""
    from django.contrib.auth import get_user_model

    notes = []
    if settings.DEBUG:
        notes.append("EVALSITE_DEBUG is on: error pages show code and settings")
    if settings.SECRET_KEY == OLD_PUBLIC_KEY:
        notes.append("EVALSITE_SECRET_KEY is the public development constant: sessions can be forged")
    if not settings.HTTPS:
        notes.append("EVALSITE_HTTPS is off: passwords and session cookies travel unencrypted, no HSTS")
    users = get_user_model().objects.filter(username__in=[u for u, _, _ in DEMO_USERS], is_active=True)
    known = {u: p for u, p, _ in DEMO_USERS}
    weak = [u.username for u in users if u.check_password(known[u.username])]
    if weak:
        notes.append(f"demo accounts with their published passwords: {', '.join(sorted(weak))}")
    return notes


def machine_addresses(*, ipv6: bool = True) -> list[str]:
    """This machine's non-loopback IP addresses, found without network traffic.

    From ``ip -j addr`` (global-scope addresses of every interface) when the ``ip`` tool exists,
    else from resolving the host name (``/etc/hosts`` or the resolver). IPv6 addresses come in
    brackets (``[fd00::2]``), as a Host header carries them. Link-local addresses are skipped
    (they need a zone). Empty when nothing is found.
    """
    import json
    import shutil

    found: list[str] = []
    tool = shutil.which("ip")
    if tool:
        try:
            listing = subprocess.run([tool, "-j", "addr"], capture_output=True, text=True, timeout=5, check=True)
            for interface in json.loads(listing.stdout or "[]"):
                for info in interface.get("addr_info", []):
                    if info.get("scope") == "global" and info.get("local"):
                        found.append(info["local"])
        except (OSError, subprocess.SubprocessError, ValueError):
            found = []
    if not found:
        try:
            infos = socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP)
        except OSError:
            infos = []
        found = [str(info[4][0]) for info in infos]
    addresses: list[str] = []
    for text in found:
        try:
            address = ipaddress.ip_address(text.split("%")[0])
        except ValueError:
            continue
        if address.is_loopback or address.is_link_local or address.is_unspecified:
            continue
        if address.version == 6 and not ipv6:
            continue
        shown = f"[{address}]" if address.version == 6 else str(address)
        if shown not in addresses:
            addresses.append(shown)
    return addresses


def resolves_to_loopback_only(name: str) -> bool:
    """True when ``name`` resolves to loopback addresses only (or not at all): other machines
    cannot reach this one by that name (Debian's ``/etc/hosts`` maps the host name to 127.0.x.1)."""
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return True
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


class PortInUse(CommandError):
    """The port cannot be bound (in use, or not permitted): one line naming it, exit code 1."""


def check_port(host: str, port: int) -> None:
    """Bind ``host:port`` once and release it, as daphne (Twisted) will: ``SO_REUSEADDR`` set.

    Raises:
        PortInUse: The port is taken, or may not be bound here; the message names the port
            and how to pick another.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]") or "0.0.0.0", port))
            sock.listen(1)
        except OSError as exc:
            raise PortInUse(port_message(host, port, exc.strerror or str(exc))) from None


def port_message(host: str, port: int, reason: str) -> str:
    """The one line for a port that cannot be listened on."""
    other = 8001 if port != 8001 else 8002
    return (
        f"cannot listen on {host}:{port} ({reason}): stop what uses port {port} or pick another port: "
        f"evalsite serve --port {other}, or make demo PORT={other}"
    )


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
            type=finite_float,
            default=10.0,
            help="seconds the worker may take to finish its current run on shutdown (default: %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = options["host"], options["port"]
        if not 0 < port < 65536:
            raise CommandError(f"--port must be 1..65535, not {port}", returncode=2)
        if options["worker_grace"] < 0:
            raise CommandError(f"--worker-grace must be >= 0 seconds, not {options['worker_grace']:g}", returncode=2)

        check_database()
        self.check(display_num_errors=False)
        self.migrate()
        check_port(host, port)  # before anything starts or says "serving"
        supervisor = None if options["no_worker"] else WorkerSupervisor(self)
        if supervisor is not None:
            supervisor.start()
        try:
            shown = self.public_address(host)
            self.serve(host, port, banner=self.banner(shown, port, supervisor is not None))
        finally:
            if supervisor is not None:
                supervisor.stop(options["worker_grace"])

    # -- steps (small, so tests can call them) ---------------------------------------------------

    def migrate(self) -> None:
        n = pending_migrations()
        if n:
            self.stdout.write(f"Applying {n} pending migration{'s' if n != 1 else ''}…")
            with migration_lock():
                if pending_migrations():
                    call_command("migrate", interactive=False, verbosity=0)

    def start_worker(self) -> subprocess.Popen[bytes]:
        # No worker of ours is running now: runs it left running are interrupted.
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

    def public_address(self, host: str) -> str:
        """The host to print, one the server accepts; warns (one block, on stderr) about
        development defaults when listening beyond loopback.

        A wildcard bind (``0.0.0.0``, ``::``) is reached by this machine's name and its
        non-loopback addresses (``machine_addresses``). With ``EVALSITE_ALLOWED_HOSTS`` unset they
        are all accepted for this run (``ALLOWED_HOSTS`` is extended in place: the websocket
        origin check shares the list); with it set, the list is kept and the warning names what
        is refused. The printed host is the name when it resolves beyond loopback, else the
        first address; always one that ``ALLOWED_HOSTS`` accepts when there is one.
        """
        if is_loopback(host):
            return host
        wildcard = host in ("0.0.0.0", "::", "")
        name = socket.gethostname()
        if wildcard:
            candidates = [name, *machine_addresses(ipv6=host == "::")]
        else:
            candidates = [f"[{host.strip('[]')}]" if ":" in host else host]
        allowed = settings.ALLOWED_HOSTS
        configured = bool(os.environ.get("EVALSITE_ALLOWED_HOSTS"))
        if not configured:
            for candidate in candidates:
                if not host_allowed(candidate, allowed):
                    allowed.append(candidate)  # in place: the websocket origin check shares this list
        accepted = [c for c in candidates if host_allowed(c, allowed)]
        refused = [c for c in candidates if c not in accepted]
        reachable = [c for c in accepted if not (c == name and resolves_to_loopback_only(c))]
        if reachable:
            shown = reachable[0]
        elif accepted:
            shown = accepted[0]
        else:
            exact = [h for h in allowed if h not in ("*", "testserver") and not h.startswith(".")]
            shown = next((h for h in exact if not is_loopback(h)), candidates[0])
        notes = development_defaults()
        self.stderr.write(
            f"WARNING: listening on {host}, reachable from other machines, with these development defaults:"
        )
        for note in notes:
            self.stderr.write(f"  - {note}")
        listed = ", ".join(h for h in allowed if h != "testserver")
        if configured:
            self.stderr.write(f"  Accepted host names (from EVALSITE_ALLOWED_HOSTS): {listed}")
            if refused:
                self.stderr.write(f"  Not accepted, add them to that list to use them: {', '.join(refused)}")
        else:
            self.stderr.write(f"  Accepted host names for this run: {listed}")
            self.stderr.write("  To choose them, set EVALSITE_ALLOWED_HOSTS=name1,name2 (comma-separated).")
        self.stderr.write("  See README, section Deploying, for the production settings.")
        return shown

    def banner(self, host: str, port: int, with_worker: bool) -> list[str]:
        """The lines printed once the server listens (its URLs, the worker's state)."""
        from django.contrib.auth import get_user_model

        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        url = f"http://{shown}:{port}/"
        lines = [f"Evalsite is serving at {url}  (API docs: {url}api/docs)", f"Log in at {url}accounts/login/"]
        if not get_user_model().objects.exists():
            lines.append(
                "No users yet: create one with `evalsite createsuperuser` (or `evalsite demo_users` for "
                "viewer/member demo accounts)."
            )
        worker_state = "running" if with_worker else "off (--no-worker): started runs stay queued"
        lines += [f"Task worker: {worker_state}", "Quit with CONTROL-C."]
        return lines

    def serve(self, host: str, port: int, banner: list[str] | None = None) -> None:
        """Run daphne until stopped; ``banner`` is printed once it listens.

        Raises:
            PortInUse: daphne could not listen (the port was taken after ``check_port``).
        """
        # daphne.server installs Twisted's asyncio reactor on import: import it only here.
        from channels.routing import get_default_application
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        # settings.ASGI_APPLICATION (evalsite.asgi, a layer above this app), loaded by name
        application = get_default_application()

        failures: list[str] = []
        command = self

        class ServingServer(Server):  # type: ignore[misc]
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


class WorkerSupervisor:
    """Keeps the task worker alive: restarts it when it ends, marks dead runs meanwhile.

    A thread polls the worker every ``poll_s`` seconds. When the worker has ended without being
    asked to (a target ended the process), its run is marked interrupted (its heartbeat names
    the case in flight), its task row is closed, and a new worker starts (after 0.5 s; doubling
    up to 30 s while it keeps dying within 5 s of its start, as a broken installation would).
    The same thread calls ``mark_stale_runs`` every
    few seconds, so runs of dead CLI processes are marked even when nobody looks at a page.
    """

    def __init__(self, command: Command, *, poll_s: float = 0.25) -> None:
        self.command = command
        self.poll_s = poll_s
        self.worker: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="evalsite-worker-supervisor", daemon=True)

    def start(self) -> None:
        """Start the worker (after marking orphaned runs) and the watching thread."""
        self.worker = self.command.start_worker()
        self._thread.start()

    def stop(self, grace_s: float) -> None:
        """Stop watching, then stop the worker in order (see ``Command.stop_worker``)."""
        self._stopping.set()
        self._thread.join(timeout=5)
        with self._lock:
            if self.worker is not None:
                self.command.stop_worker(self.worker, grace_s)

    def _watch(self) -> None:
        from django.db import close_old_connections

        backoff = 0.5
        started = time.monotonic()
        while not self._stopping.wait(self.poll_s):
            try:
                with self._lock:
                    worker = self.worker
                    ended = worker is not None and worker.poll() is not None
                if ended and not self._stopping.is_set():
                    assert worker is not None
                    self.command.stdout.write(
                        f"The task worker (PID {worker.pid}) ended with code {worker.returncode}; restarting it."
                    )
                    if time.monotonic() - started > 5:
                        backoff = 0.5  # it was up (a target ended it): restart at once
                    if self._stopping.wait(backoff):
                        return
                    backoff = min(backoff * 2, 30.0)
                    with self._lock:
                        if self._stopping.is_set():
                            return
                        self.worker = self.command.start_worker()  # marks its run interrupted first
                        self.restarts += 1
                        started = time.monotonic()
                else:
                    mark_stale_runs()
            except Exception:
                import logging

                logging.getLogger(__name__).exception("worker supervisor")
            finally:
                close_old_connections()
