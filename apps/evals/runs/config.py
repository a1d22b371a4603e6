"""A run's parameters: one typed :class:`RunConfig`, each default stated once.

Every entry point that starts a run (``evalsite eval``, the API, the start-run form, a one-case
re-run, the pytest plugin) builds a :class:`RunConfig`; it is validated once, here, and it is what
``EvalRun.config`` stores (:meth:`RunConfig.stored`, with :data:`SCHEMA_VERSION`). Every reader
gets it back typed through :func:`read_run_config`, the one function that reads the stored JSON
(older rows included).

Importable without Django (the pytest plugin reads the defaults before Django is set up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from evalcore.errors import InvalidInputError
from evalcore.runner import check_seconds
from evalcore.scoring import DEFAULT_SCORER_TIMEOUT_S

SCHEMA_VERSION = 1
"""The version of the stored form. Rows written before it existed carry none (read as 0: the
same keys, untyped)."""

Executor = Literal["cli", "task", "queue"]
"""Who executes a run: a CLI process (``evalsite eval``, the pytest plugin), the task worker
(portal and API runs), or the queue's workers (a sharded run)."""


class RunConfigError(InvalidInputError):
    """A run parameter out of range (HTTP 400). ``field`` names it; ``value`` is what was given."""

    def __init__(self, message: str, *, field: str, value: Any) -> None:
        super().__init__(message, field=field)
        self.value = value


class JudgeConfig(BaseModel):
    """The LLM judge a run was graded with (the API key never is stored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The judge model's name."""
    base_url: str = ""
    """Its OpenAI-compatible endpoint, without credentials (``""``: the default endpoint)."""
    samples: int = 1
    """Answers asked per case (majority per axis), >= 1."""

    @field_validator("samples")
    @classmethod
    def _samples(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"samples must be >= 1, got {value}")
        return value


class SimulatorConfig(BaseModel):
    """The LLM-backed user that plays a run's scenario cases without a script
    (:class:`evalcore.simulator.LLMUser`; the API key never is stored: it is read from the
    environment of whoever executes the run, as the judge's is)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The simulator model's name (non-empty)."""
    base_url: str = ""
    """Its OpenAI-compatible endpoint, without credentials (``""``: ``$EVALSITE_JUDGE_BASE_URL``,
    else ``$EVALSITE_MODEL_BASE_URL``, of the executor)."""
    seed: int = 0
    """Sent with every call and part of the reply cache's key, >= 0."""
    cache: bool = True
    """Read and write the simulator's reply cache (``False``: ``--no-simulator-cache``)."""

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the simulator model must be a non-empty name")
        return value

    @field_validator("seed")
    @classmethod
    def _seed(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"seed must be >= 0, got {value}")
        return value


class AutoResume(BaseModel):
    """What the task worker's supervisor saw when it last resumed the run by itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = 0
    """Resumes so far."""
    results: int = 0
    """Stored results at the last resume."""
    suspects: list[tuple[str, int]] = []
    """``(case run id, deaths)`` at the last resume, sorted."""


class RunConfig(BaseModel):
    """Every parameter of one eval run, with its default.

    Frozen: a change is a new value (:meth:`updated`, validated again). Keys the model does not
    declare (an Inspect log's provenance on an imported run) are kept as they are and read by
    no run code.

    Raises:
        pydantic.ValidationError: On construction, a value out of range (use :meth:`parse` for a
            :class:`RunConfigError` naming the field).
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    schema_version: int = SCHEMA_VERSION
    """The stored form's version (:data:`SCHEMA_VERSION`)."""
    concurrency: int = 8
    """Cases at once, >= 1."""
    timeout_s: float | None = 60.0
    """Limit on one case's target call, seconds (``None``: none)."""
    scorer_timeout_s: float | None = DEFAULT_SCORER_TIMEOUT_S
    """Limit on each scorer call, the judge included, seconds (``None``: none)."""
    conversation_timeout_s: float | None = None
    """Limit on a whole conversation case, seconds (``None``: none); ``timeout_s`` bounds each
    of its turns (:mod:`evalcore.conversations`)."""
    repeat: int = 1
    """Runs of each case, >= 1."""
    case_ids: list[str] | None = None
    """Only these cases of the split (a one-case re-run, a pytest selection); ``None``: all."""
    target_kind: str = ""
    """The resolved target's kind (recorded for people; nothing decides on it)."""
    agents_dir: str = ""
    """The agents folder the target was loaded from (``""``: the portal's)."""
    executor: Executor | None = None
    """Who executes the run (:data:`Executor`)."""
    pid: int | None = None
    """A CLI executor's process id."""
    host: str = ""
    """A CLI executor's host name."""
    task_id: str = ""
    """The task worker's task of the run."""
    runner: str = ""
    """``pytest`` for a run of the pytest plugin."""
    judge: JudgeConfig | None = None
    """The LLM judge that grades the run (``None``: no judge)."""
    simulator: SimulatorConfig | None = None
    """The LLM-backed user of its scenario cases without a script (``None``: none; such cases
    are errored). Rows written before it existed read as ``None``."""
    shard_size: int | None = None
    """Cases per shard of a queue run, >= 1 (``None``: ``EVALSITE_SHARD_SIZE``)."""
    early_stop: int | None = None
    """Stop once the first K cases all errored one way, >= 0 (0: never; ``None``: the
    executor's default, see ``apps.evals.runs.earlystop.early_stop_k``)."""
    auto_resume: AutoResume | None = None
    """The supervisor's resumes of a task-worker run."""
    rescored_from: str | None = None
    """The eval run this one re-scored."""
    cache_target: bool = False
    """Answer cases from the target response cache and store new answers in it
    (``--cache-target``; :mod:`evalcore.target_cache`). Rows written before it existed read as ``False``."""

    @field_validator("timeout_s", "scorer_timeout_s", "conversation_timeout_s", mode="before")
    @classmethod
    def _seconds(cls, value: Any, info: Any) -> Any:
        check_seconds(info.field_name, value)  # no bool, NaN, infinity, zero or negative
        return value

    @field_validator("concurrency", "repeat", "shard_size", "early_stop", mode="after")
    @classmethod
    def _counts(cls, value: int | None, info: Any) -> int | None:
        least = 0 if info.field_name == "early_stop" else 1
        if value is not None and value < least:
            raise ValueError(f"{info.field_name} must be >= {least}, got {value}")
        return value

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> RunConfig:
        """Validate ``data`` (field name -> value; a missing field takes its default).

        Raises:
            RunConfigError: The first value out of range, naming its field.
        """
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "config"
            message = str(first.get("ctx", {}).get("error") or first["msg"])
            raise RunConfigError(message, field=field, value=first.get("input")) from None

    def updated(self, **changes: Any) -> RunConfig:
        """This config with ``changes`` (validated like :meth:`parse`).

        Raises:
            RunConfigError: A changed value out of range.
        """
        return self.parse({**self.model_dump(), **changes})

    def stored(self) -> dict[str, Any]:
        """The JSON ``EvalRun.config`` stores: every field, but a field whose default is
        ``None`` only when set (so ``config__has_key="case_ids"`` finds the runs of chosen cases)."""
        data = self.model_dump(mode="json")
        fields = type(self).model_fields
        return {k: v for k, v in data.items() if v is not None or k not in fields or fields[k].default is not None}


def read_run_config(stored: Mapping[str, Any] | None) -> RunConfig:
    """The typed config of a stored run: the one reader of ``EvalRun.config``'s JSON.

    Rows of any :data:`SCHEMA_VERSION` are read (older ones carry no version and keep the same
    keys; a missing key takes its default, as every reader did with ``.get(key, default)``).

    Raises:
        RunConfigError: The row holds a value out of range.
    """
    data = dict(stored or {})
    version = data.get("schema_version", 0)
    if version == 0:
        data["schema_version"] = SCHEMA_VERSION
    return RunConfig.parse(data)
