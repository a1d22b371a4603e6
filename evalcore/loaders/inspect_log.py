"""Inspect eval logs (``.eval`` and ``.json``) read into typed values, without inspect-ai installed.

A ``.json`` log is one JSON object (``version``, ``status``, ``eval``, ``samples``...). An
``.eval`` log is a zip archive: ``header.json`` (the same object without samples) and one
``samples/<id>_epoch_<n>.json`` member per sample and epoch (zstd-compressed by recent Inspect
versions, see :mod:`evalcore.loaders.inspect_zip`); its ``summaries.json``, ``reductions.json``
and ``_journal/`` members are not needed and not read.

:func:`read_inspect_log` checks the file and reads the header at once; :meth:`InspectLog.samples`
then yields one :class:`InspectSample` at a time (an ``.eval`` log's samples are read member by
member, so memory stays O(one sample)). Only the fields Evalsite uses are read (pydantic models
that ignore the rest), so logs of older and newer Inspect versions read alike.

Every problem is a :class:`~evalcore.loaders.errors.CaseBankError` naming the file, for an
``.eval`` log the member (``run.eval:samples/q2_epoch_1.json``), and the field
(``samples[3].scores.includes.value`` in a ``.json`` log): a log that is not a zip or not JSON,
a header with no ``eval``, an eval still running (no ``header.json``), a sample without an id,
an input that is neither text nor chat messages, a score without a value...
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import JsonValue, ValidationError

from evalcore.loaders.errors import CaseBankError
from evalcore.loaders.inspect_schema import Header, SampleIn, Stats, invalid, parse_log_json
from evalcore.loaders.inspect_steps import (
    InspectStep,
    plain_message,
    resolve_attachments,
    steps_from_events,
    steps_from_messages,
    unix,
)
from evalcore.loaders.inspect_zip import MemberTooLarge, read_member
from evalcore.loaders.limits import MAX_INFLATED_MB, MAX_MEMBER_MB

__all__ = ["InspectEvalSpec", "InspectLog", "InspectSample", "InspectScore", "is_inspect_log", "read_inspect_log"]

LOG_SUFFIXES = (".eval", ".json")
"""File suffixes of Inspect logs."""

_SAMPLE_MEMBER = re.compile(r"^samples/(.+)_epoch_([0-9]{1,9})\.json$")
# how a .json log begins (Inspect writes these keys first, in this order)
_JSON_LOG_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')


@dataclass(slots=True, frozen=True)
class InspectEvalSpec:
    """What was evaluated: the header's ``eval`` object.

    Attributes:
        task, task_id: The task's name and id.
        eval_id, run_id: Inspect's ids of this eval and of the ``eval()`` call that ran it.
        model: The model evaluated, e.g. ``openai/gpt-4o``.
        dataset: The dataset's name, when the task gave one.
        created: When the eval started (timezone-aware).
        epochs: How many times each sample ran (1 when the log does not say).
        scorers: The scorers' names, in task order.
        inspect_version: The inspect_ai version that wrote the log, when recorded.
        git_commit, git_dirty: The task's repository revision, when recorded.
    """

    task: str
    task_id: str
    eval_id: str
    run_id: str
    model: str
    dataset: str | None
    created: datetime
    epochs: int
    scorers: tuple[str, ...]
    inspect_version: str | None
    git_commit: str | None
    git_dirty: bool


@dataclass(slots=True)
class InspectScore:
    """One scorer's score of one sample, as Inspect wrote it (mapped by :mod:`.inspect_scores`).

    ``value`` is any JSON value: ``"C"`` / ``"I"`` / ``"P"`` / ``"N"``, a number, a bool, a
    dict or list of those.
    """

    scorer: str
    value: JsonValue
    answer: str | None = None
    explanation: str | None = None
    metadata: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(slots=True)
class InspectSample:
    """One sample of one epoch.

    Attributes:
        id: The sample id as text (Inspect allows ints).
        epoch: 1-based epoch.
        input: Text, or chat messages as ``{"role", "content", ...}`` (:func:`plain_message`).
        target: The target: text or a list of texts.
        output: The final completion (``None`` when the sample errored without one).
        model: The model that answered.
        scores: Every scorer's score, in the log's order (empty when unscored).
        tokens_in, tokens_out: Usage summed over every model (cache reads and writes count as
            input), ``None`` when the log has none.
        total_time_s, working_time_s: Inspect's wall time and working time of the sample.
        started, completed: Unix seconds, when the log records them.
        messages: The conversation as plain messages.
        steps: Model turns and tool calls (from the events; from the messages without them).
        error: The sample's error message, ``None`` when it finished.
        metadata: The sample's own metadata.
        where: Where the sample is, for messages (``run.eval:samples/q1_epoch_1.json``).
    """

    id: str
    epoch: int
    input: Any
    target: str | list[str]
    output: str | None
    model: str
    scores: list[InspectScore]
    tokens_in: int | None
    tokens_out: int | None
    total_time_s: float | None
    working_time_s: float | None
    started: float | None
    completed: float | None
    messages: list[dict[str, Any]]
    steps: list[InspectStep]
    error: str | None
    metadata: dict[str, Any]
    where: str


@dataclass(slots=True)
class InspectLog:
    """An Inspect log whose header was read; :meth:`samples` reads the samples.

    Attributes:
        path: The file as the caller named it.
        format: ``eval`` or ``json``.
        sha256: Hex digest of the file's bytes (an import's identity).
        version: The log format version.
        status: ``success``, ``error`` or ``cancelled``.
        spec: The eval spec.
        error: The eval's error message (status ``error``), else ``None``.
        started, completed: Unix seconds of the eval's start and end, when recorded.
        n_samples: Samples in the log (every epoch counted).
        metrics: Inspect's own metrics, ``{score name: {metric: value}}`` (e.g.
            ``{"includes": {"accuracy": 0.71, "stderr": 0.18}}``); empty when not recorded.
    """

    path: str
    format: str
    sha256: str
    version: int
    status: str
    spec: InspectEvalSpec
    error: str | None
    started: float | None
    completed: float | None
    n_samples: int
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    _read: Callable[[], Iterator[InspectSample]] = field(repr=False, default=lambda: iter(()))

    def samples(self) -> Iterator[InspectSample]:
        """Each sample in turn (by epoch, then in the dataset's order for an ``.eval`` log).

        Raises:
            CaseBankError: A sample that cannot be read (file, member and field named).
        """
        return self._read()


def is_inspect_log(path: str | Path) -> bool:
    """True for an ``.eval`` file, or a ``.json`` file that begins as an Inspect log does."""
    path = Path(path)
    if path.suffix.lower() == ".eval":
        return True
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    with open(path, "rb") as stream:
        return bool(_JSON_LOG_HEAD.match(stream.read(256)))


def read_inspect_log(path: str | Path) -> InspectLog:
    """Open an Inspect log and read its header.

    Raises:
        CaseBankError: No such file, another suffix, not a zip / not JSON, a header that is not
            an Inspect log's, an ``.eval`` log without ``header.json`` (the eval did not finish).
    """
    display = str(path)
    path = Path(path)
    if not path.is_file():
        raise CaseBankError("no such file" if not path.exists() else "not a file", path=display)
    suffix = path.suffix.lower()
    if suffix not in LOG_SUFFIXES:
        raise CaseBankError(f"an Inspect log ends in {' or '.join(LOG_SUFFIXES)}", path=display)
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return (_read_eval if suffix == ".eval" else _read_json)(path, display, digest.hexdigest())


def _read_json(path: Path, display: str, sha256: str) -> InspectLog:
    data = parse_log_json(path.read_bytes(), display)
    if not isinstance(data, dict) or "eval" not in data:
        raise CaseBankError("not an Inspect log: a JSON object with 'eval' and 'samples' is expected", path=display)
    header = _header(data, display)
    raw_samples = data.get("samples")
    if raw_samples is None:
        raw_samples = []
    if not isinstance(raw_samples, list):
        raise CaseBankError("must be a list of samples", path=display, field="samples")

    def read() -> Iterator[InspectSample]:
        for index, raw in enumerate(raw_samples):
            where = f"{display}:samples[{index}]"
            yield _sample(raw, header, path=display, prefix=f"samples[{index}]", where=where)

    return _log(display, "json", sha256, header, len(raw_samples), read)


def _read_eval(path: Path, display: str, sha256: str) -> InspectLog:
    try:
        with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
            names = {info.filename: info for info in archive.infolist()}
            if "header.json" not in names:
                started = "_journal/start.json" in names
                reason = (
                    "no header.json: the Inspect eval did not finish (still running, or its process died); "
                    "only finished logs are imported"
                    if started
                    else "not an Inspect .eval log (no header.json in the archive)"
                )
                raise CaseBankError(reason, path=display)
            samples = [name for name in names if _SAMPLE_MEMBER.match(name)]
            total = _total_budget(display, [names["header.json"], *(names[name] for name in samples)])
            budget = _Budget(total)
            data = _member_json(archive, raw, names["header.json"], display, budget)
            header = _header(data, f"{display}:header.json")
            after_header = budget.left
    except zipfile.BadZipFile as exc:
        raise CaseBankError(f"not a readable zip archive (an .eval log is one): {exc}", path=display) from None
    ids = ((data.get("eval") or {}).get("dataset") or {}).get("sample_ids") or []
    order = {str(sample_id): i for i, sample_id in enumerate(ids if isinstance(ids, list) else [])}
    members = []
    for name in samples:
        found = _SAMPLE_MEMBER.match(name)
        if found:
            members.append((int(found.group(2)), order.get(found.group(1), len(order)), found.group(1), name))
    members.sort()

    def read() -> Iterator[InspectSample]:
        budget = _Budget(total)  # each reading of the samples counts anew, after the header
        budget.left = after_header
        with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
            for *_, name in members:
                where = f"{display}:{name}"
                data = _member_json(archive, raw, archive.getinfo(name), display, budget)
                yield _sample(data, header, path=where, prefix="", where=where)

    return _log(display, "eval", sha256, header, len(members), read)


class _Budget:
    """The bytes a log's members may still decompress to (the whole log's limit, counted down as
    members are read)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.left = total


def _total_budget(display: str, members: list[zipfile.ZipInfo]) -> int:
    """The most bytes the members read of one ``.eval`` log (its header and samples) may
    decompress to in all (:data:`~evalcore.loaders.limits.MAX_INFLATED_MB`), checked first
    against the sizes the archive declares, before any member is read: twelve samples of 200 MiB
    each, every one under the per-member limit, took 3.8 GB before failing with ``MemoryError``.

    Raises:
        CaseBankError: The declared sizes add up to more than the limit (or the limit is unset
            to something that is not a positive whole number).
    """
    try:
        limit_mb = MAX_INFLATED_MB.value()
        member_mb = MAX_MEMBER_MB.value()
    except ValueError as exc:
        raise CaseBankError(str(exc), path=display) from None
    for info in members:  # one member over its own limit is named (the more precise refusal)
        if info.file_size > member_mb << 20:
            raise CaseBankError(_member_too_large(member_mb), path=f"{display}:{info.filename}")
    declared = sum(info.file_size for info in members)
    if declared > limit_mb << 20:
        raise CaseBankError(_too_large_in_all(limit_mb, f"{declared / (1 << 20):,.0f} MiB"), path=display)
    return limit_mb << 20


def _member_too_large(limit_mb: int) -> str:
    return (
        f"decompresses to more than {limit_mb} MiB, the limit per .eval member "
        f"({MAX_MEMBER_MB.how_to_raise()}); nothing imported"
    )


def _too_large_in_all(limit_mb: int, size: str) -> str:
    return (
        f"its header and samples decompress to {size} in all, over the limit of {limit_mb} MiB per .eval log "
        f"({MAX_INFLATED_MB.how_to_raise()}); nothing imported"
    )


def _member_json(
    archive: zipfile.ZipFile, raw: Any, info: zipfile.ZipInfo, display: str, budget: _Budget | None = None
) -> Any:
    where = f"{display}:{info.filename}"
    try:
        limit_mb = MAX_MEMBER_MB.value()
    except ValueError as exc:
        raise CaseBankError(str(exc), path=where) from None
    limit = limit_mb << 20
    whole_log = budget is not None and budget.left < limit  # the log's budget is the tighter bound
    if budget is not None:
        limit = min(limit, budget.left)
    try:
        data = read_member(archive, raw, info, limit=limit)
    except MemberTooLarge:
        if whole_log and budget is not None:
            raise CaseBankError(
                _too_large_in_all(budget.total >> 20, f"more than {budget.total >> 20} MiB"), path=display
            ) from None
        raise CaseBankError(_member_too_large(limit_mb), path=where) from None
    except zipfile.BadZipFile as exc:
        raise CaseBankError(f"damaged member ({exc})", path=where) from None
    except NotImplementedError as exc:
        raise CaseBankError(f"cannot decompress this member ({exc})", path=where) from None
    if budget is not None:
        budget.left -= len(data)  # counted as read: a member may understate its size
    return parse_log_json(data, where)


def _header(data: Any, where: str) -> Header:
    if not isinstance(data, dict):
        raise CaseBankError("the log header must be a JSON object", path=where)
    try:
        return Header.model_validate({k: v for k, v in data.items() if k != "samples"})
    except ValidationError as exc:
        raise invalid(exc, where, "") from None


def _log(
    display: str, fmt: str, sha256: str, header: Header, n: int, read: Callable[[], Iterator[InspectSample]]
) -> InspectLog:
    spec = header.eval
    stats = header.stats or Stats()
    return InspectLog(
        path=display,
        format=fmt,
        sha256=sha256,
        version=header.version,
        status=header.status,
        spec=InspectEvalSpec(
            task=spec.task,
            task_id=spec.task_id,
            eval_id=spec.eval_id,
            run_id=spec.run_id,
            model=spec.model,
            dataset=spec.dataset.name,
            created=spec.created,
            epochs=spec.config.epochs or 1,
            scorers=tuple(s.name for s in spec.scorers or []),
            inspect_version=spec.packages.get("inspect_ai"),
            git_commit=spec.revision.commit if spec.revision else None,
            git_dirty=bool(spec.revision.dirty) if spec.revision else False,
        ),
        error=header.error.message if header.error and header.error.message else None,
        started=unix(stats.started_at),
        completed=unix(stats.completed_at),
        n_samples=n,
        metrics=header.results.metrics() if header.results else {},
        _read=lambda: _once_each(read(), display),
    )


def _once_each(samples: Iterator[InspectSample], display: str) -> Iterator[InspectSample]:
    """The samples, refusing a (sample id, epoch) met twice: Inspect writes each once, and a
    repeated one would stand for two results where one can be stored."""
    seen: dict[tuple[str, int], str] = {}
    for sample in samples:
        key = (sample.id, sample.epoch)
        here = sample.where.removeprefix(f"{display}:") if sample.where != display else "the log"
        first = seen.setdefault(key, here)
        if first != here:
            raise CaseBankError(
                f"sample {sample.id!r} epoch {sample.epoch} appears twice, in {first} and in {here}: "
                "a log holds each (sample, epoch) once; nothing imported",
                path=display,
            )
        yield sample


def _tokens_in(usage: Any) -> int:
    """Input tokens of one model's usage: cache reads and writes count as input."""
    return int(usage.input_tokens + (usage.input_tokens_cache_read or 0) + (usage.input_tokens_cache_write or 0))


def _first_scorer(header: Header) -> str:
    """The name an old log's single ``score`` goes under: the eval's first scorer, as inspect_ai
    names it when it reads such a log."""
    if header.eval.scorers:
        return header.eval.scorers[0].name
    if header.results and header.results.scores:
        return header.results.scores[0].name
    return "score"


def _migrated(raw: dict[str, Any], header: Header) -> dict[str, Any]:
    """A sample of an older log in today's shape, as inspect_ai's own reader migrates it: one
    ``score`` becomes ``scores`` under the first scorer's name, and a ``transcript`` (its
    ``events`` and ``content``) becomes ``events`` and ``attachments``."""
    if "score" not in raw and "transcript" not in raw:
        return raw
    raw = dict(raw)
    if "score" in raw and "scores" not in raw:
        score = raw.pop("score")
        raw["scores"] = {_first_scorer(header): score} if score is not None else None
    transcript = raw.pop("transcript", None)
    if isinstance(transcript, dict):
        raw.setdefault("events", transcript.get("events") or [])
        raw.setdefault("attachments", transcript.get("content") or {})
    return raw


def _sample(raw: Any, header: Header, *, path: str, prefix: str, where: str) -> InspectSample:
    def fail(reason: str, name: str) -> CaseBankError:
        return CaseBankError(reason, path=path, field=f"{prefix}.{name}" if prefix else name)

    if not isinstance(raw, dict):
        raise CaseBankError("a sample must be a JSON object", path=path, field=prefix or None)
    model = header.eval.model
    raw = _migrated(raw, header)
    found = raw.get("attachments")
    attachments = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    raw = resolve_attachments({k: v for k, v in raw.items() if k not in ("attachments", "events_data")}, attachments)
    try:
        sample = SampleIn.model_validate(raw)
    except ValidationError as exc:
        raise invalid(exc, path, prefix) from None
    if isinstance(sample.id, bool) or not isinstance(sample.id, str | int) or sample.id == "":
        raise fail("the sample id must be text or an integer", "id")
    if isinstance(sample.input, list) and all(isinstance(m, dict) and "role" in m for m in sample.input):
        value_in: Any = [plain_message(m) for m in sample.input if isinstance(m, dict)]
    elif isinstance(sample.input, str):
        value_in = sample.input
    else:
        raise fail("the input must be text or a list of chat messages (objects with a 'role')", "input")
    target = sample.target
    if not (isinstance(target, str) or (isinstance(target, list) and all(isinstance(t, str) for t in target))):
        raise fail("the target must be text or a list of texts", "target")
    for index, message in enumerate(sample.messages):
        if not message.get("role"):
            raise fail("a chat message needs a 'role'", f"messages[{index}].role")
    messages = [plain_message(m) for m in sample.messages]
    answering = sample.output.model or model
    has_events = any(e.get("event") in ("model", "tool") for e in sample.events)
    steps = steps_from_events(sample.events) if has_events else steps_from_messages(messages, answering)
    usage = list(sample.model_usage.values())
    completion = sample.output.text()
    return InspectSample(
        id=str(sample.id),
        epoch=sample.epoch,
        input=value_in,
        target=target if isinstance(target, str) else list(target),  # type: ignore[arg-type]
        output=completion if completion or sample.error is None else None,
        model=answering,
        scores=[
            InspectScore(name, s.value, s.answer, s.explanation, dict(s.metadata or {}))
            for name, s in (sample.scores or {}).items()
        ],
        tokens_in=sum(_tokens_in(u) for u in usage) if usage else None,
        tokens_out=sum(u.output_tokens for u in usage) if usage else None,
        total_time_s=sample.total_time,
        working_time_s=sample.working_time,
        started=unix(sample.started_at),
        completed=unix(sample.completed_at),
        messages=messages,
        steps=steps,
        error=(sample.error.message or "sample error") if sample.error else None,
        metadata=dict(sample.metadata or {}),
        where=where,
    )
