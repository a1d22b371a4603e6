"""How deep each task queue is, whatever backend holds it.

Each backend of ``settings.TASKS`` is asked through a *probe*: a function
``probe(alias: str, options: dict) -> QueueDepth`` (``options`` is that backend's ``TASKS``
entry). The probe for django-tasks-db is built in; another backend (RQ on Redis, Celery) plugs in
with :func:`register_probe` or the ``EVALSITE_QUEUE_PROBES`` setting (backend class path -> probe
path), so the status page needs no change when the queue does. A backend without a probe is
listed with its depth unknown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Min
from django.utils.module_loading import import_string

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """One backend's queue, as its probe reads it.

    Attributes:
        ready: Tasks waiting to be taken (due now).
        running: Tasks taken by a worker and not finished.
        oldest_enqueued_at: When the oldest waiting task was enqueued (``None``: none waits).
    """

    ready: int
    running: int
    oldest_enqueued_at: datetime | None


QueueProbe = Callable[[str, dict[str, Any]], QueueDepth]

_PROBES: dict[str, QueueProbe | str] = {
    "django_tasks_db.DatabaseBackend": "apps.evals.worker.queue_depth.database_queue",
    "django_tasks_db.backend.DatabaseBackend": "apps.evals.worker.queue_depth.database_queue",
}


def register_probe(backend_path: str, probe: QueueProbe | str) -> None:
    """Use ``probe`` (a function or its dotted path) for backends of class ``backend_path``."""
    _PROBES[backend_path] = probe


def probe_for(backend_path: str) -> QueueProbe | None:
    """The probe for a backend class path (``EVALSITE_QUEUE_PROBES`` first), ``None`` when none."""
    configured = getattr(settings, "EVALSITE_QUEUE_PROBES", {}) or {}
    probe = configured.get(backend_path) or _PROBES.get(backend_path)
    if probe is None:
        return None
    return import_string(probe) if isinstance(probe, str) else probe


def database_queue(alias: str, options: dict[str, Any]) -> QueueDepth:
    """django-tasks-db's queue: its ``DBTaskResult`` rows of backend ``alias``."""
    from django_tasks_db.models import DBTaskResult

    rows = DBTaskResult.objects.filter(backend_name=alias)
    ready = rows.ready()
    return QueueDepth(
        ready=ready.count(),
        running=rows.running().count(),
        oldest_enqueued_at=ready.aggregate(oldest=Min("enqueued_at"))["oldest"],
    )


@dataclass(frozen=True, slots=True)
class QueueState:
    """A ``settings.TASKS`` backend and its depth (``depth`` ``None``: no probe for it, or it failed;
    ``note`` says why)."""

    alias: str
    backend: str
    depth: QueueDepth | None
    note: str = ""


def queue_states() -> list[QueueState]:
    """Every configured task backend with its depth, in ``settings.TASKS`` order."""
    states = []
    for alias, options in settings.TASKS.items():
        backend = str(options.get("BACKEND", ""))
        probe = probe_for(backend)
        if probe is None:
            states.append(QueueState(alias, backend, None, "no queue probe for this backend"))
            continue
        try:
            states.append(QueueState(alias, backend, probe(alias, options)))
        except Exception as exc:  # the page still shows workers and runs when a queue is unreachable
            log.exception("queue probe of %s", alias)  # the message may hold an address: logged, not shown
            note = f"cannot read the queue ({type(exc).__name__}; see the log)"
            states.append(QueueState(alias, backend, None, note))
    return states
