"""The target response cache of a run (``evalsite eval --cache-target``): where it lives and how a
run's target is wrapped with it (:mod:`evalcore.target_cache` holds the key and the rules).

The cache is one SQLite file in the data folder, ``$EVALSITE_DATA_DIR/target_cache.sqlite3``
(:func:`cache_path`), beside the judge's: every executor of the machine (the CLI, the task worker,
the queue's workers) reads and writes the same file.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from django.conf import settings

from apps.evals.models import EvalRun, EvalRunStatus
from apps.evals.queries.target_cache import SUMMARY_KEY, run_cache_figures, used_cache
from evalcore.discovery import TargetSpec
from evalcore.target_cache import SqliteTargetCache, cached_target, target_identity
from evalcore.targets import ResolvedTarget

FILE_NAME = "target_cache.sqlite3"
"""The cache file's name in the data folder."""

_lock = threading.Lock()
_open: dict[str, SqliteTargetCache] = {}


def cache_path() -> Path:
    """Where the target cache lives: ``settings.DATA_DIR / target_cache.sqlite3``."""
    return Path(settings.DATA_DIR) / FILE_NAME


def open_target_cache(path: Path | None = None) -> SqliteTargetCache:
    """The process's connection to the cache file (``path``: default :func:`cache_path`), opened
    once and shared by every run of the process (the cache is thread-safe).

    Raises:
        sqlite3.DatabaseError: The file is not a SQLite database.
        OSError: The data folder cannot be created.
    """
    file = path or cache_path()
    with _lock:
        cache = _open.get(str(file))
        if cache is None:
            file.parent.mkdir(parents=True, exist_ok=True)
            cache = _open[str(file)] = SqliteTargetCache(file)
        return cache


def with_target_cache(
    target: ResolvedTarget, spec: TargetSpec, *, variant: str, run_model: str | None = None
) -> ResolvedTarget:
    """``target`` (the run's, already resolved) answered from the target cache when it can be.

    The key's target part (:func:`evalcore.target_cache.target_identity`) is the target id, the
    variant label, the declared model and the run's model, a fingerprint of the variant's
    declared object and the content hash of the module that declares it (``spec.module``).
    """
    declared: Any = spec.variants[variant] if spec.variants and variant in spec.variants else spec.target
    identity = target_identity(
        target_id=spec.id,
        variant=variant,
        target=declared,
        models={"declared": spec.model, "run": run_model or None},
        module=spec.module or None,
    )
    return cached_target(target, cache=open_target_cache(), identity=identity, target_id=spec.id, variant=variant)


def store_cache_figures(sender: Any, *, eval_run_id: str, status: str, **kwargs: Any) -> None:
    """``eval_run_finished`` listener: when a run that used the target cache has finished, store its
    cached-case count and the wall time of the cases that called the target
    (:func:`apps.evals.queries.target_cache.run_cache_figures`) in ``summary["target_cache"]``, so
    the leaderboard never scans its results. Runs in the process that ended the run, after the
    commit (a page only reads); a resume that finishes the run again stores them again."""
    if status != EvalRunStatus.FINISHED:
        return
    run = EvalRun.objects.filter(pk=eval_run_id).only("pk", "config", "summary").first()
    if run is None or not used_cache(run.config):
        return
    figures = run_cache_figures([run.pk]).get(run.pk)
    if figures is None:
        return
    summary = dict(run.summary or {}) if isinstance(run.summary, dict) else {}
    summary[SUMMARY_KEY] = figures
    EvalRun.objects.filter(pk=run.pk).update(summary=summary)
