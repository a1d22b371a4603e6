"""A cache of parsed judge answers, so re-scoring the same output does not call the judge again.

What is cached is the judge's parsed per-axis answer (the record of a :class:`JudgeVerdict`, see
:mod:`evalcore.serial`), never the pass/fail verdict: thresholds are applied after the cache, so
they can change without a single new model call. The key covers everything that can change the judge's *answer*: see
:func:`judge_cache_key`.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evalcore._util.sqlite_table import SqliteTable
from evalcore.jsonvalue import MISSING, to_json
from evalcore.redact import redact, strip_userinfo


@runtime_checkable
class JudgeCache(Protocol):
    """Where parsed judge answers are kept between runs (the Django side may provide its own)."""

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer for ``key``, or ``None``."""
        ...

    def set(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` (a JSON object) under ``key``, replacing any previous one."""
        ...


KEY_VERSION = 2
"""Bumped whenever the key's payload changes shape, so old entries are never read under new rules.

Version 2 added the judge's endpoint and model class, the messages sent and ``use_schema``
(version 1 keyed on the model *name* only: a run against another ``--judge-base-url`` serving a
model of the same name reused the first endpoint's verdicts)."""


def judge_endpoint(model: Any) -> dict[str, Any]:
    """What identifies a judge model beyond its name: its class and its endpoint.

    The endpoint is the model's ``endpoint`` attribute when it has one (an
    :class:`~evalcore.runtime.openai_client.OpenAIChatModel`'s base URL; a local model's weights
    file), with any ``user:password@`` removed (:func:`~evalcore.redact.strip_userinfo`: a
    credential never changes the answer, and a cache file must not hold one) and trailing ``/``
    dropped. Query strings are kept (e.g. an ``api-version`` may change the model served).

    Returns:
        ``{"class": "module.QualName", "endpoint": str | None}``.
    """
    cls = type(model)
    raw = getattr(model, "endpoint", None)
    endpoint = strip_userinfo(str(raw)).rstrip("/") if raw is not None else None
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "endpoint": endpoint}


def judge_cache_key(
    *,
    judge_model: str,
    endpoint: dict[str, Any] | str | None,
    prompt_version: str,
    messages: list[dict[str, Any]],
    input: Any,
    output: Any,
    expected: Any,
    rubric: str,
    sample_index: int,
    temperature: float | None,
    seed: int | None,
    max_tokens: int | None,
    use_schema: bool,
) -> str:
    """The cache key: sha256 (hex) of the canonical JSON of everything that shapes the answer.

    Args:
        judge_model: The model name sent to the endpoint.
        endpoint: Where that model is served: :func:`judge_endpoint` of the model object (or a
            base URL string; credentials in it are stripped here as well).
        prompt_version: The prompt template version.
        messages: The exact chat messages sent (so an edited template text changes the key even
            if its version was not bumped).
        input: The case input.
        output: The output judged.
        expected: The expected value (``MISSING`` and ``None`` get different keys).
        rubric: The rendered rubric text (axes and extra notes).
        sample_index: Which of the K samples (each has its own seed).
        temperature: Sampling temperature sent.
        seed: Seed sent.
        max_tokens: Completion token cap sent.
        use_schema: Whether a JSON-schema ``response_format`` is asked for.

    Thresholds are not part of the key: they are applied to the cached answer.
    """
    if isinstance(endpoint, str):
        endpoint = {"class": None, "endpoint": strip_userinfo(endpoint).rstrip("/")}
    payload = {
        "key_version": KEY_VERSION,
        "judge_model": judge_model,
        "endpoint": endpoint,
        "prompt_version": prompt_version,
        "messages": to_json(messages),
        "input": to_json(input),
        "output": to_json(output),
        "expected": {"missing": True} if expected is MISSING else {"value": to_json(expected)},
        "rubric": rubric,
        "sample_index": sample_index,
        "temperature": temperature,
        "seed": seed,
        "max_tokens": max_tokens,
        "use_schema": use_schema,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class InMemoryJudgeCache:
    """A dict-backed :class:`JudgeCache` for one process (tests, notebooks)."""

    def __init__(self) -> None:
        self._items: dict[str, str] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer (a fresh copy), or ``None``."""
        text = self._items.get(key)
        return None if text is None else json.loads(text)

    def set(self, key: str, value: dict[str, Any]) -> None:
        """Store a copy of ``value`` (serialised, so later changes to it do not leak in)."""
        self._items[key] = json.dumps(value, sort_keys=True)

    def __len__(self) -> int:
        return len(self._items)


class SqliteJudgeCache(SqliteTable):
    """A :class:`JudgeCache` in one SQLite table (stdlib ``sqlite3``, WAL journal).

    Safe to share between the tasks of one event loop and between threads (one connection
    guarded by a lock); WAL lets another process (e.g. a second CLI run) read it at the same time.

    Args:
        path: The database file (created with its table if absent), or ``":memory:"``.
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__(
            path,
            "judge_cache",
            "CREATE TABLE IF NOT EXISTS judge_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)",
        )

    def set(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key`` (replacing any previous entry)."""
        text = json.dumps(redact(value), sort_keys=True)  # a file in the data folder: no secrets either
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO judge_cache (key, value, created) VALUES (?, ?, ?)", (key, text, time.time())
            )
