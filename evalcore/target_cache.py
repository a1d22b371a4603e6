"""A cache of target responses, so re-running a bake-off costs nothing for what did not change.

Off by default (``evalsite eval --cache-target``; ``run_eval`` takes a target wrapped by
:func:`cached_target`). A case's answer is read from the cache when everything that can change it
is the same as when it was stored (:func:`target_identity` and :func:`target_cache_key`):

- the target's id and the variant's label;
- the case input (as the target receives it) and the repeat index (three repeats are three
  answers, not one answer three times);
- the model and its parameters: the declared model names, and a fingerprint of the variant's
  object (:func:`fingerprint`): an ``Agent``'s model name, class and endpoint, instructions, tools
  and their schemas, ``temperature`` / ``seed`` / ``max_tokens`` / ``max_steps``; a
  ``functools.partial``'s arguments; a function's bytecode, defaults and closure values; any
  other object's public attributes;
- the target's code: the sha256 of the module file that declares it.

What is never cached: an errored call (the target raised, timed out, or returned ``None``),
and a conversation case played turn by turn (each turn's answer depends on the session's
history and state, which the key does not cover: such cases always call the target, and are
counted as ``skipped``). A conversation case given whole to a target that is not conversational
is one call with one input, and is cached like any other case.

A hit returns the stored answer with no call: the run record's tokens are 0 (nothing was spent,
so it costs nothing; the first call's tokens stay in ``metadata["target_cache"]``), its metadata carries
``target_cache: {"hit": true, "key", "source_run_id", "source_elapsed_ms", "stored_at",
"tokens_in", "tokens_out"}``, and the trace gets a ``target_cache`` span saying so. Its
elapsed time measures a lookup, not the target: latency figures leave hit cases out
(:func:`is_hit` on a run's metadata) and say how many.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import time
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evalcore._util.sqlite_table import SqliteTable
from evalcore.jsonvalue import NotJSONError, to_json
from evalcore.redact import strip_userinfo
from evalcore.targets import ResolvedTarget, RunContext
from evalcore.types import TargetOutput

KEY_VERSION = 1
"""Bumped whenever the key's payload changes shape, so old entries are never read under new rules."""

METADATA_KEY = "target_cache"
"""The key of a run's metadata that says what the cache did for it."""

SPAN_KIND = "target_cache"
"""The kind of the trace span a cache hit records."""

_MAX_DEPTH = 6
"""How deep :func:`fingerprint` follows attributes (deeper values are named by their type only)."""


@runtime_checkable
class TargetCache(Protocol):
    """Where target answers are kept between runs."""

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry for ``key``, or ``None``."""
        ...

    def set(self, key: str, value: dict[str, Any], *, target_id: str, variant: str) -> None:
        """Store ``value`` (a JSON object) under ``key`` for ``target_id`` / ``variant``."""
        ...


# -- the key ---------------------------------------------------------------------------------


def fingerprint(value: Any) -> Any:
    """A JSON value that changes when ``value`` would answer differently: the "model and its
    parameters" part of the cache key.

    Rules, in order: JSON scalars as they are; lists, tuples and dicts item by item (dicts by sorted
    key); a chat model (an object with ``name`` and ``complete``) as its class, name and endpoint
    (credentials stripped; counters such as ``retry_count`` and timeouts left out: they do not
    change the answer); a ``functools.partial`` as its function and arguments; a function as its
    qualified name, the sha256 of its bytecode and constants (nested functions included), its
    defaults and the values it closes over; a module or class by name; any other object as its
    class and public attributes (names not starting with ``_``). Beyond a depth of
    :data:`_MAX_DEPTH`, or on a cycle, an object is named by its type only.

    Returns:
        A JSON value (deterministic for equal inputs across processes: no ``id()``, no addresses).
    """
    return _fingerprint(value, 0, set())


def _fingerprint(value: Any, depth: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):  # 0 and 0.0 send the same parameter
        if value != value or value in (float("inf"), float("-inf")):
            return repr(value)
        return int(value) if value.is_integer() else value
    if isinstance(value, Path):
        return {"path": str(value)}
    if depth >= _MAX_DEPTH or id(value) in seen:
        return {"type": _qualname(type(value))}
    seen = seen | {id(value)}
    step = depth + 1
    if isinstance(value, list | tuple | set | frozenset):
        items = [_fingerprint(v, step, seen) for v in value]
        if isinstance(value, set | frozenset):
            items.sort(key=lambda item: json.dumps(item, sort_keys=True, default=str))
        return items
    if isinstance(value, Mapping):
        return {str(k): _fingerprint(v, step, seen) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, functools.partial):
        return {
            "partial": _fingerprint(value.func, step, seen),
            "args": _fingerprint(value.args, step, seen),
            "kwargs": _fingerprint(value.keywords, step, seen),
        }
    if isinstance(value, types.MethodType):
        return {"method": _fingerprint(value.__func__, step, seen), "self": _fingerprint(value.__self__, step, seen)}
    if isinstance(value, types.FunctionType):
        closure = [cell.cell_contents for cell in (value.__closure__ or ()) if _cell_filled(cell)]
        return {
            "function": _qualname(value),
            "code": _code_hash(value.__code__),
            "defaults": _fingerprint(value.__defaults__, step, seen),
            "kwdefaults": _fingerprint(value.__kwdefaults__, step, seen),
            "closure": _fingerprint(closure, step, seen),
        }
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if inspect.isclass(value) or isinstance(value, types.BuiltinFunctionType):
        return {"type": _qualname(value)}
    if hasattr(value, "complete") and isinstance(getattr(value, "name", None), str):  # a chat model
        endpoint = getattr(value, "endpoint", None)
        return {
            "chat_model": _qualname(type(value)),
            "name": value.name,
            "endpoint": strip_userinfo(str(endpoint)).rstrip("/") if endpoint is not None else None,
        }
    attributes = getattr(value, "__dict__", None)
    if attributes is None and hasattr(type(value), "__slots__"):
        attributes = {n: getattr(value, n) for n in _slot_names(type(value)) if hasattr(value, n)}
    public = {k: v for k, v in (attributes or {}).items() if not str(k).startswith("_")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        public = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if not f.name.startswith("_")}
    return {"object": _qualname(type(value)), "attributes": _fingerprint(public, step, seen)}


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises ValueError
    except ValueError:
        return False
    return True


def _slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = getattr(klass, "__slots__", ())
        names.extend([slots] if isinstance(slots, str) else list(slots))
    return [n for n in names if not n.startswith("_")]


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def _code_hash(code: types.CodeType) -> str:
    """sha256 (hex) of a code object's bytecode, names and constants (nested code objects by their
    own hash, so no memory address enters it)."""
    digest = hashlib.sha256(code.co_code)
    digest.update(repr(code.co_names).encode())
    for const in code.co_consts:
        digest.update(_code_hash(const).encode() if isinstance(const, types.CodeType) else repr(const).encode())
    return digest.hexdigest()


def module_hash(path: str | Path | None) -> str | None:
    """sha256 (hex) of the content of the module file that declares a target (``None``: no file,
    e.g. a target built in a notebook; then only :func:`fingerprint` stands for its code).

    Raises:
        OSError: The file exists but cannot be read.
    """
    if not path:
        return None
    file = Path(path)
    if not file.is_file():
        return None
    return hashlib.sha256(file.read_bytes()).hexdigest()


def target_identity(
    *,
    target_id: str,
    variant: str,
    target: Any,
    models: Mapping[str, str | None] | None = None,
    module: str | Path | None = None,
) -> str:
    """Everything about the target that is the same for every case of a run, as one sha256 (hex).

    Args:
        target_id: The target's id.
        variant: The variant's label (``""``: none).
        target: The variant's object as declared (a function, an ``Agent``, a ``functools.partial``...):
            see :func:`fingerprint`.
        models: Model names declared for it (e.g. ``{"declared": spec.model, "run": eval_run.model}``).
        module: The file that declares the target (its content hash: :func:`module_hash`).
    """
    payload = {
        "key_version": KEY_VERSION,
        "target_id": target_id,
        "variant": variant,
        "models": {k: v for k, v in sorted((models or {}).items())},
        "fingerprint": fingerprint(target),
        "module_sha256": module_hash(module),
    }
    return _sha256(payload)


def target_cache_key(identity: str, *, input: Any, repeat_index: int = 0) -> str:
    """The cache key of one case: sha256 (hex) of the target's :func:`target_identity`, the
    case input (its canonical JSON) and the repeat index.

    Raises:
        evalcore.jsonvalue.NotJSONError: ``input`` has no JSON form (such a case is not cached).
    """
    return _sha256({"key_version": KEY_VERSION, "identity": identity, "input": to_json(input), "repeat": repeat_index})


def _sha256(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def is_hit(metadata: Any) -> bool:
    """Whether a run's metadata says its answer came from the target cache (no target call)."""
    block = metadata.get(METADATA_KEY) if isinstance(metadata, Mapping) else None
    return isinstance(block, Mapping) and block.get("hit") is True


# -- the stores ------------------------------------------------------------------------------


class InMemoryTargetCache:
    """A dict-backed :class:`TargetCache` for one process (tests, notebooks)."""

    def __init__(self) -> None:
        self._items: dict[str, str] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry (a fresh copy), or ``None``."""
        text = self._items.get(key)
        return None if text is None else json.loads(text)

    def set(self, key: str, value: dict[str, Any], *, target_id: str, variant: str) -> None:
        """Store a copy of ``value``."""
        self._items[key] = json.dumps(value, sort_keys=True)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, slots=True)
class CacheStat:
    """The entries of one (target, variant) in a :class:`SqliteTargetCache`."""

    target_id: str
    variant: str
    entries: int
    bytes: int
    """Size of the stored answers (UTF-8 JSON), bytes."""
    oldest: float
    """When the oldest entry was stored (Unix seconds)."""
    newest: float
    """When the newest entry was stored (Unix seconds)."""


class SqliteTargetCache(SqliteTable):
    """A :class:`TargetCache` in one SQLite table (stdlib ``sqlite3``, WAL journal), as the judge's
    (:class:`evalcore.judge.cache.SqliteJudgeCache`).

    Safe to share between the tasks of one event loop and between threads (one connection
    guarded by a lock); WAL lets another process (a second CLI run, a worker) use it at the same
    time. What a target answered is stored as it was (as the runs table stores it: never
    redacted, since a hit must return the same answer).

    Args:
        path: The database file (created with its table if absent), or ``":memory:"``.

    Raises:
        sqlite3.DatabaseError: The file is not a SQLite database.
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__(
            path,
            "target_cache",
            "CREATE TABLE IF NOT EXISTS target_cache (key TEXT PRIMARY KEY, target_id TEXT NOT NULL, "
            "variant TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL)",
        )

    def set(self, key: str, value: dict[str, Any], *, target_id: str, variant: str) -> None:
        """Store ``value`` under ``key`` (replacing any previous entry)."""
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO target_cache (key, target_id, variant, value, created) VALUES (?, ?, ?, ?, ?)",
                (key, target_id, variant, text, time.time()),
            )

    def stats(self) -> list[CacheStat]:
        """Entries per (target, variant), sorted by target then variant."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT target_id, variant, COUNT(*), COALESCE(SUM(LENGTH(CAST(value AS BLOB))), 0), "
                "MIN(created), MAX(created) FROM target_cache GROUP BY target_id, variant ORDER BY target_id, variant"
            ).fetchall()
        return [CacheStat(t, v, int(n), int(b), float(lo), float(hi)) for t, v, n, b, lo, hi in rows]

    def clear(self, *, target_id: str | None = None, variant: str | None = None) -> int:
        """Delete entries (all of them, or those of ``target_id``, or of its ``variant``).

        Returns:
            How many entries were deleted.

        Raises:
            ValueError: ``variant`` without ``target_id``.
        """
        if variant is not None and target_id is None:
            raise ValueError("a variant to clear needs its target id")
        where, args = "", tuple[str, ...]()
        if target_id is not None:
            where, args = " WHERE target_id = ?", (target_id,)
            if variant is not None:
                where, args = " WHERE target_id = ? AND variant = ?", (target_id, variant)
        with self._lock:
            cursor = self._conn.execute(f"DELETE FROM target_cache{where}", args)  # where: one of three fixed texts
            deleted = int(cursor.rowcount)
            if target_id is None:
                self._conn.execute("VACUUM")
        return deleted


# -- the wrapper -----------------------------------------------------------------------------


def _repeat_index(ctx: RunContext) -> int:
    """The repeat index of ``ctx``'s run, read from its run id (``<eval run>:<case>#<index>`` when a
    run repeats its cases; no suffix: index 0)."""
    prefix = f"{ctx.eval_run_id}:{ctx.case.id}#"
    if ctx.run_id.startswith(prefix) and ctx.run_id[len(prefix) :].isdigit():
        return int(ctx.run_id[len(prefix) :])
    return 0


def cached_target(
    target: ResolvedTarget, *, cache: TargetCache, identity: str, target_id: str, variant: str
) -> ResolvedTarget:
    """``target`` with each call answered from ``cache`` when the case's key is there, and each
    successful answer stored (see the module's doc for what is keyed, marked and never cached).

    Args:
        target: The resolved target (its kind, name and flags are kept).
        cache: Where answers are read and written.
        identity: :func:`target_identity` of the target.
        target_id: Stored with each entry (``evalsite cache clear --target``).
        variant: Stored with each entry.

    Returns:
        A :class:`~evalcore.targets.ResolvedTarget` whose ``fn`` reads and writes the cache.
    """
    inner = target.fn

    async def call(value: Any, ctx: RunContext) -> Any:
        if ctx.session is not None:  # a conversation played turn by turn: never cached
            ctx.metadata[METADATA_KEY] = {"hit": False, "skipped": "conversation"}
            return await inner(value, ctx)
        try:
            key = target_cache_key(identity, input=value, repeat_index=_repeat_index(ctx))
        except NotJSONError:
            ctx.metadata[METADATA_KEY] = {"hit": False, "skipped": "input is not JSON"}
            return await inner(value, ctx)
        stored = cache.get(key)
        if stored is not None:
            return _answer_from(stored, key, ctx)
        before = set(ctx.metadata)
        started = time.perf_counter()
        result = await inner(value, ctx)  # raises: nothing is stored
        entry = _entry_of(result, ctx, before, elapsed_ms=(time.perf_counter() - started) * 1000.0)
        if entry is not None:
            cache.set(key, entry, target_id=target_id, variant=variant)
            ctx.metadata[METADATA_KEY] = {"hit": False, "stored": True, "key": key[:16]}
        return result

    return dataclasses.replace(target, fn=call)


def _entry_of(result: Any, ctx: RunContext, before: set[str], *, elapsed_ms: float) -> dict[str, Any] | None:
    """What is stored for a successful call, or ``None`` when the answer is not storable (``None``,
    or not JSON: the runner errors such a case)."""
    if isinstance(result, TargetOutput):
        output, model, tokens_in, tokens_out, metadata = (
            result.output,
            result.model,
            result.tokens_in,
            result.tokens_out,
            dict(result.metadata),
        )
    else:
        output, model, tokens_in, tokens_out, metadata = result, None, None, None, {}
    if output is None:
        return None
    # what the target put on ctx.metadata during the call (an agent's tool calls on an error path,
    # a function's own notes) is part of its answer
    added = {k: v for k, v in ctx.metadata.items() if k not in before and k != METADATA_KEY}
    try:
        entry: dict[str, Any] = to_json(
            {
                "output": output,
                "model": model,
                "tokens_in": tokens_in,
                "tokens_out": tokens_out,
                "metadata": metadata,
                "ctx_metadata": added,
                "run_id": ctx.run_id,
                "elapsed_ms": round(elapsed_ms, 3),
                "stored_at": time.time(),
            }
        )
    except NotJSONError:
        return None
    return entry


def _answer_from(stored: dict[str, Any], key: str, ctx: RunContext) -> TargetOutput:
    """The stored answer as the target's, marked as a hit on the run's metadata and in its trace."""
    mark = {
        "hit": True,
        "key": key[:16],
        "source_run_id": stored.get("run_id"),
        "source_elapsed_ms": stored.get("elapsed_ms"),
        "stored_at": stored.get("stored_at"),
        "tokens_in": stored.get("tokens_in"),
        "tokens_out": stored.get("tokens_out"),
    }
    with ctx.tracer.span(SPAN_KIND, "target_cache hit", **mark, model=stored.get("model")) as span:
        span.set(output_preview=str(stored.get("output"))[:200])
    ctx.metadata.update(stored.get("ctx_metadata") or {})
    ctx.metadata[METADATA_KEY] = mark
    metadata = dict(stored.get("metadata") or {})
    metadata[METADATA_KEY] = mark
    # 0 tokens, not None: nothing was spent (None would read as "not reported", and be estimated)
    return TargetOutput(
        output=stored["output"], model=stored.get("model"), tokens_in=0, tokens_out=0, metadata=metadata
    )
