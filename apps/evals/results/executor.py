"""Who executes a run: this process as stamped on a run's row, the heartbeat's period and
staleness, whether a process or a task worker is alive, and the case whose target runs in
this context (the result writer sets it; the exit guard reads it)."""

from __future__ import annotations

import contextvars
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.utils import timezone

from apps.evals.models import TaskWorker

current_run_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("evalsite_current_run_id", default=None)
"""The run id of the case whose target runs in this context (set by the store before each call;
context variables follow the case into its thread), so ``os._exit`` can name its caller."""


@dataclass(frozen=True, slots=True)
class Executor:
    """The process executing a run: host name and PID."""

    host: str
    pid: int

    def __str__(self) -> str:
        return f"PID {self.pid} on {self.host}"


def this_executor() -> Executor:
    """This process, as stamped on the runs it executes."""
    return Executor(socket.gethostname(), os.getpid())


def heartbeat_interval_s() -> float:
    """Seconds between heartbeats of an executing process (``EVALSITE_HEARTBEAT_S``, default 2)."""
    return float(getattr(settings, "EVALSITE_HEARTBEAT_S", 2.0))


def stale_after_s() -> float:
    """Seconds without a heartbeat after which a run is interrupted (``EVALSITE_STALE_AFTER_S``, 15)."""
    return float(getattr(settings, "EVALSITE_STALE_AFTER_S", 15.0))


def pid_alive(pid: int) -> bool:
    """Whether a process of this host with this PID exists (zombies count as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


@cache
def this_namespace() -> str:
    """This host's boot and PID namespace (``<boot id>:<pid ns inode>``; ``""`` where unknown).

    Two processes see each other's PIDs only when this is equal: containers sharing a host
    name (``--network host``) or a reused host name after a reboot differ here.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def is_alive(worker: TaskWorker, *, now: datetime | None = None) -> bool:
    """Whether a worker row is a live process: not stopped, heartbeat fresher than
    ``EVALSITE_STALE_AFTER_S``, and, when it runs in this host's PID namespace, its PID exists
    (a worker that just died is dead at once, not 15 s later)."""
    if worker.stopped is not None:
        return False
    current = now or timezone.now()
    if worker.heartbeat_at < current - timedelta(seconds=stale_after_s()):
        return False
    if worker.namespace and worker.namespace == this_namespace():
        return pid_alive(worker.pid)
    if not worker.namespace and worker.host == socket.gethostname():
        return pid_alive(worker.pid)
    return True


def live_executors() -> set[tuple[str, int]]:
    """``(host, pid)`` of every live worker (see :func:`is_alive`): their runs are not dead, whatever
    a PID check from another namespace or an old run heartbeat would say."""
    cutoff = timezone.now() - timedelta(seconds=stale_after_s())
    rows = TaskWorker.objects.filter(stopped__isnull=True, heartbeat_at__gte=cutoff)
    return {(w.host, w.pid) for w in rows if is_alive(w)}


def executor_fields(executor: Executor | None = None) -> dict[str, Any]:
    """The row fields that stamp ``executor`` (default: this process) on a run, heartbeat now."""
    executor = executor or this_executor()
    return {"executor_host": executor.host, "executor_pid": executor.pid, "heartbeat_at": timezone.now()}


def database_file() -> str | None:
    """The default database's file when it is SQLite on disk, else ``None``."""
    db = settings.DATABASES["default"]
    name = str(db.get("NAME") or "")
    if not db["ENGINE"].endswith("sqlite3") or not name or name == ":memory:" or name.startswith("file:"):
        return None
    return os.path.abspath(name)


def file_identity(path: str | None) -> tuple[int, int] | None:
    """(device, inode) of a file, ``None`` when it does not exist (or no path)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)
