"""The targets of the agents folder, imported once and kept until a module changes.

Every page that lists targets (start a run, the playground) and every chat turn asks here; the
folder's modules are imported again only when its set of ``*.py`` files or one of their
modification times (or sizes) changes, not on each request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from evalcore.discovery import Discovery, DiscoveryProblem, TargetSpec, discover_targets
from evalcore.errors import NotFoundError

Signature = tuple[tuple[str, int, int, int], ...]
"""``(file name, mtime in ns, size in bytes, inode)`` of every ``*.py`` file, sorted by name."""


@dataclass(frozen=True, slots=True)
class _Entry:
    signature: Signature
    discovery: Discovery


class TargetRegistry:
    """Discoveries of agents folders, cached per resolved folder and keyed by its modules' stats.

    Thread-safe: one folder is imported by one thread at a time; others wait for its result.
    """

    def __init__(self) -> None:
        self._entries: dict[Path, _Entry] = {}
        self._lock = threading.Lock()

    def discovery(self, folder: str | Path) -> Discovery:
        """The targets and problems of ``folder``, imported afresh only if a module changed.

        Raises:
            FileNotFoundError: ``folder`` does not exist or is not a directory.
        """
        root = Path(folder).resolve()
        with self._lock:
            signature = _signature(root)
            entry = self._entries.get(root)
            if entry is None or entry.signature != signature:
                entry = _Entry(signature, discover_targets(root))
                self._entries[root] = entry
            return entry.discovery

    def clear(self) -> None:
        """Forget every folder (the next call imports afresh)."""
        with self._lock:
            self._entries.clear()


def _signature(root: Path) -> Signature:
    if not root.is_dir():
        raise FileNotFoundError(f"agents folder not found: {root}")
    stats = []
    for path in root.glob("*.py"):
        try:
            st = path.stat()
        except FileNotFoundError:  # removed while listing: the next call sees it gone
            continue
        stats.append((path.name, st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(sorted(stats))


registry = TargetRegistry()
"""The process's registry (pages, chat turns, the task worker)."""


def agents_discovery(agents_dir: str | Path | None = None) -> Discovery:
    """The discovery of ``agents_dir`` (default ``settings.EVALSITE_AGENTS_DIR``), cached.

    Raises:
        FileNotFoundError: The folder does not exist.
    """
    return registry.discovery(agents_dir or settings.EVALSITE_AGENTS_DIR)


def discovered_targets() -> tuple[dict[str, TargetSpec], list[DiscoveryProblem | str]]:
    """Targets declared in ``settings.EVALSITE_AGENTS_DIR`` by id, and the problems met: one per
    module that failed to load, or the sentence saying the folder is missing."""
    try:
        discovery = agents_discovery()
    except FileNotFoundError as exc:
        return {}, [str(exc)]
    return discovery.targets, list(discovery.problems)


def load_target(target_id: str, agents_dir: str | Path | None = None) -> TargetSpec:
    """Find a declared target by id in the agents folder (default ``settings.EVALSITE_AGENTS_DIR``).

    Raises:
        NotFoundError: No such target (the message lists the known ids and any broken modules).
        FileNotFoundError: The folder does not exist.
    """
    discovery = agents_discovery(agents_dir)
    spec = discovery.targets.get(target_id)
    if spec is None:
        known = ", ".join(discovery.targets) or "none"
        broken = "; ".join(f"{p.path}: {p.message}" for p in discovery.problems)
        raise NotFoundError(
            f"no target {target_id!r} (known: {known})" + (f"; broken modules: {broken}" if broken else ""),
            field="target_id",
        )
    return spec
