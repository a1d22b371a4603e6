"""What ``evalsite serve`` decides, apart from its printing: which host names the server accepts
and shows, and whether a port can be bound. The task worker it supervises is in
``apps.evals.worker.supervisor``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils.http import is_same_domain

from apps.core.secret_key import OLD_PUBLIC_KEY
from apps.evals.cli.demo_users import DEMO_USERS


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
    return any(pattern == "*" or is_same_domain(host.lower(), pattern.lower()) for pattern in allowed)


def development_defaults() -> list[str]:
    """What is still at its development default, one sentence each (empty when none)."""
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


@dataclass(slots=True)
class PublicAddress:
    """Which host names a server listening beyond loopback answers to.

    Attributes:
        shown: The host to print (reachable from other machines when one is).
        allowed: ``ALLOWED_HOSTS`` after this decision.
        refused: Names of this machine that ``ALLOWED_HOSTS`` does not accept.
        configured: ``EVALSITE_ALLOWED_HOSTS`` was set (the list was kept as it is).
    """

    shown: str
    allowed: list[str]
    refused: list[str]
    configured: bool


def public_address(host: str) -> PublicAddress:
    """Decide the host names of a server listening on ``host`` (not a loopback one).

    A wildcard bind (``0.0.0.0``, ``::``) is reached by this machine's name and its non-loopback
    addresses (:func:`machine_addresses`). With ``EVALSITE_ALLOWED_HOSTS`` unset they are all
    accepted for this run (``ALLOWED_HOSTS`` is extended in place: the websocket origin check
    shares the list); with it set, the list is kept and ``refused`` names what it refuses. The
    shown host is the name when it resolves beyond loopback, else the first address; always one
    that ``ALLOWED_HOSTS`` accepts when there is one.
    """
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
    return PublicAddress(shown, allowed, refused, configured)


def worker_lines(with_worker: bool) -> list[str]:
    """What ``serve`` prints about who executes the runs started from its pages: its task
    worker, or (``--no-worker``) that runs stay queued until a worker runs and how to start one.
    On the scaled setup (``EVALSITE_QUEUE=rq``) runs are sharded onto the RQ queue: the queue
    workers alive now are counted (from Redis)."""
    from apps.evals.worker.queue import queue_backend, sharded_runs

    if queue_backend() == "rq" and sharded_runs():
        from apps.evals.worker.rq import alive_queue_workers

        alive, note = alive_queue_workers()
        lines = [f"Runs started here are sharded onto the RQ queue {settings.EVALSITE_RQ_QUEUE!r} (EVALSITE_QUEUE=rq)."]
        if note:
            lines.append(f"Queue workers: unknown, {note}.")
        elif alive:
            lines.append(f"Queue workers: {alive} alive now (see /status/).")
        else:
            lines.append(
                "Queue workers: none yet: runs stay queued until one runs. Start one on any host that "
                "reaches the database and Redis: `evalsite queue_worker` (with DATABASE_URL and EVALSITE_REDIS_URL)."
            )
        if with_worker:
            lines.append("Task worker: running (resumes of runs that were not sharded)")
        return lines
    if with_worker:
        return ["Task worker: running"]
    return [
        "Task worker: off (--no-worker): runs started here stay queued until a worker runs. "
        "Start one on this database with `evalsite worker` (or drop --no-worker)."
    ]
