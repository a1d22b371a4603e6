"""Request and response schemas of the evals JSON API (``XIn`` / ``XOut``), and its error type.

Output schemas read model rows and query results directly (``resolve_*`` for computed
fields): a route returns the objects, ninja validates and serialises them.

Pages of rows share one shape: ``{items, page, page_size, total, pages}``
(:class:`apps.evals.api.pagination.Pages`, ninja's page-number pagination); ``page`` is 1-based and a
page past the end is empty (not an error), so a client can always ask for "the next one".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Schema
from ninja.errors import HttpError
from pydantic import Field

from apps.evals.api.pagination import PageIn
from apps.evals.api.read_models import fields_of
from apps.evals.models import EvalResult, EvalRun, EvalRunStatus, ResultStatus, Split
from apps.evals.queries.compare import CompareRow, CompareView, ScorerDelta
from apps.evals.runs.liveness import executor_label
from evalcore.conversations import report_turns
from evalcore.stats import TOO_FEW_CASES, ConfidenceInterval, PairedCounts, Verdict, too_few_cases

RunSplit = Literal["train", "dev", "test", "all"]
"""A run's split: one of ``evalcore.splits.SPLIT_CHOICES`` (checked in tests)."""


class ApiError(HttpError):
    """A client error answered as ``{"message", "field"}`` with its HTTP status.

    Raised by operations to point at the offending input; ``evalsite.api`` renders it.

    Args:
        status_code: 400, 403, 404, ...
        message: Human-readable reason.
        field: The request field at fault (``None`` when no single field is).
    """

    def __init__(self, status_code: int, message: str, field: str | None = None) -> None:
        super().__init__(status_code, message)
        self.field = field


class ErrorOut(Schema):
    """Every error body: a message and the field at fault (``null`` when none)."""

    message: str
    field: str | None = None


class EvalCaseOut(Schema):
    id: int
    case_id: str
    split: str
    tags: list[str]
    input: Any = None
    expected: Any = None
    has_expected: bool
    metadata: dict[str, Any] = {}


class CaseFilterIn(Schema):
    split: Split | None = None
    tag: str | None = None


class SimulatorIn(Schema):
    """The LLM-backed user of the run's scenario cases without a script (its API key is the task
    worker's, from its environment: never sent nor stored)."""

    model: str = Field(min_length=1, max_length=200, description="the simulator model's name")
    base_url: str = Field(
        "", max_length=2000, description="its OpenAI-compatible endpoint (default: the judge's); credentials dropped"
    )
    seed: int = Field(0, ge=0, description="sent with every call, part of the reply cache's key")
    cache: bool = Field(True, description="read and write the simulator's reply cache")


class RunIn(Schema):
    """Start a run: the test split (or ``all``) needs ``allow_test``."""

    set_id: int
    target_id: str = Field(min_length=1, max_length=200)
    variant: str | None = Field(None, max_length=200)
    split: RunSplit = "dev"
    allow_test: bool = False
    name: str | None = Field(
        None, max_length=200, description="the run's name (default: set · target/variant · split · #n)"
    )
    simulator: SimulatorIn | None = Field(None, description="an LLM-backed user simulator (default: none)")


class RunCreatedOut(Schema):
    id: str
    name: str = Field("", description="the run's human name (the id stays its address)")
    status: str
    url: str
    api_url: str
    websocket_url: str
    n_total: int
    task_id: str | None = None


class EvalRunOut(Schema):
    """An eval run's summary row (needs ``eval_set`` and ``created_by`` joined)."""

    id: str
    set_id: int
    set_name: str
    target_id: str
    variant: str
    split: str
    model: str
    git_sha: str
    git_dirty: bool
    status: str
    started: datetime | None
    finished: datetime | None
    n_total: int
    n_done: int
    n_passed: int
    n_failed: int
    n_errored: int
    n_unscored: int = Field(0, description="cases nothing judged: counted in n_done, never in n_passed")
    pass_rate: float | None
    source_eval_run_id: str | None
    created_by: str | None
    error: str
    heartbeat_at: datetime | None = None
    executor: str = ""
    name: str = ""
    notes: str = ""
    pinned: bool = Field(False, description="the pinned baseline of its set and target")

    @staticmethod
    def resolve_set_id(run: EvalRun) -> int:
        return run.eval_set_id

    @staticmethod
    def resolve_set_name(run: EvalRun) -> str:
        return run.eval_set.name

    @staticmethod
    def resolve_created_by(run: EvalRun) -> str | None:
        return run.created_by.get_username() if run.created_by else None

    @staticmethod
    def resolve_executor(run: EvalRun) -> str:
        return executor_label(run)


class RunFilterIn(Schema):
    set_id: int | None = None
    target_id: str | None = None
    variant: str | None = None
    split: RunSplit | None = None
    status: EvalRunStatus | None = None


class ResultOut(Schema):
    """One case's result. ``seq`` is the result's arrival order (the live-progress cursor)."""

    seq: int
    case_id: str
    repeat_index: int
    split: str
    status: ResultStatus
    reason: str = Field(description="why the case got its status (evalcore.types.StatusReason)")
    passed: bool
    score: float | None
    scores: list[dict[str, Any]]
    run_id: str
    trace_id: str
    output: Any = None
    expected: Any = Field(None, description="the expected value this result was scored against")
    expected_hash: str = Field(
        "", description="sha256 of that value (evalcore.types.expected_hash); empty on results stored before it"
    )
    error: dict[str, Any] | None = None
    elapsed_ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    turns: list[dict[str, Any]] | None = Field(
        None,
        description="a conversation case's per-turn results (evalcore.conversations.report_turns); null otherwise",
    )

    # the trace's columns live on the result's traces.Run (``run`` joined)
    @staticmethod
    def resolve_seq(result: EvalResult) -> int:
        return result.pk

    @staticmethod
    def resolve_reason(result: EvalResult) -> str:
        return result.outcome.reason.value

    @staticmethod
    def resolve_run_id(result: EvalResult) -> str:
        return result.run.run_id

    @staticmethod
    def resolve_trace_id(result: EvalResult) -> str:
        return result.run.trace_id

    @staticmethod
    def resolve_output(result: EvalResult) -> Any:
        return result.run.final_answer

    @staticmethod
    def resolve_error(result: EvalResult) -> Any:
        return result.run.error

    @staticmethod
    def resolve_elapsed_ms(result: EvalResult) -> float | None:
        return result.run.elapsed_ms

    @staticmethod
    def resolve_tokens_in(result: EvalResult) -> int | None:
        return result.run.tokens_in

    @staticmethod
    def resolve_tokens_out(result: EvalResult) -> int | None:
        return result.run.tokens_out

    @staticmethod
    def resolve_turns(result: EvalResult) -> list[dict[str, Any]] | None:
        return report_turns(result.run.metadata, result.scores)


class ResultPageOut(Schema):
    items: list[ResultOut]
    page: int
    page_size: int
    total: int
    pages: int


class ResultFilterIn(PageIn):
    status: ResultStatus | None = None
    search: str | None = Field(None, max_length=300, description="case id substring")
    order: Literal["arrival", "score", "-score", "case"] | None = None
    text: str | None = Field(None, max_length=300, description="words in the input, expected value or output")
    tag: str | None = Field(None, max_length=200)
    meta: str | None = Field(None, max_length=300, description="key=value on the case's metadata")
    score_min: float | None = Field(None, ge=0, le=1)
    score_max: float | None = Field(None, ge=0, le=1)
    latency_min_ms: float | None = Field(None, ge=0)
    latency_max_ms: float | None = Field(None, ge=0)
    tokens_min: int | None = Field(None, ge=0)
    tokens_max: int | None = Field(None, ge=0)


class EvalRunDetailOut(Schema):
    """An eval run, its configuration and report, and one page of its results."""

    run: EvalRunOut
    scorer_specs: list[dict[str, Any]]
    config: dict[str, Any]
    summary: dict[str, Any]
    last_seq: int
    results: ResultPageOut


class CompareIn(PageIn):
    a: str = Field(min_length=1, max_length=32)
    b: str = Field(min_length=1, max_length=32)
    only: Literal["flips", "regressions", "improvements", "same"] | None = None
    scorers: bool = Field(False, description="add per-scorer deltas (reads every score of both runs; cached)")


@fields_of(PairedCounts)
class PairedCountsOut(Schema):
    # properties of PairedCounts
    n: int
    pass_rate_a: float | None
    pass_rate_b: float | None
    delta: float | None


@fields_of(
    ConfidenceInterval,
    describe={
        "resamples": "bootstrap resamples; 0 for a closed-form interval",
        "method": "bootstrap (paired percentile) or newcombe (Newcombe 1998)",
    },
)
class IntervalOut(Schema):
    """A 95% interval of a delta (B minus A, 0..1 scale); ``null`` instead below the minimum n,
    with the reason beside it (``..._reason``: "too few cases (n=1; an interval needs at least 10)")."""


@fields_of(Verdict)
class VerdictOut(Schema):
    pass


@fields_of(
    ScorerDelta,
    nested={ConfidenceInterval: IntervalOut},
    describe={
        "p_value": "paired sign-flip randomization test, two-sided",
        "p_holm": "p_value corrected over the comparison's scorers (Holm)",
    },
)
class ScorerDeltaOut(Schema):
    # properties of ScorerDelta, and a reason computed here
    delta: float | None
    interval_reason: str | None = Field(description="why interval is null (too few cases), else null")
    significant: bool = Field(description="p_holm < 0.05 and the interval excludes 0")

    @staticmethod
    def resolve_interval_reason(delta: ScorerDelta) -> str | None:
        return None if delta.interval is not None else too_few_cases(delta.n) or TOO_FEW_CASES


class CompareSideOut(Schema):
    seq: int
    status: str
    passed: bool
    score: float | None
    run_id: str

    @staticmethod
    def resolve_seq(result: EvalResult) -> int:
        return result.pk

    @staticmethod
    def resolve_run_id(result: EvalResult) -> str:
        return result.run.run_id


@fields_of(CompareRow, nested={EvalResult: CompareSideOut})
class CompareRowOut(Schema):
    pass


@fields_of(
    CompareView,
    nested={PairedCounts: PairedCountsOut, Verdict: VerdictOut, ScorerDelta: ScorerDeltaOut},
    exclude={"run_a", "run_b", "interval", "rows", "num_pages", "cases_in_both"},
)
class CompareOut(Schema):
    """Two runs aligned per case: flips first, the paired statistics, one page of rows.

    Read from a :class:`apps.evals.queries.compare.CompareView` (``scorer_deltas`` set on it
    by the route when asked for).
    """

    # CompareView's fields under the API's names, and a reason computed here
    a: EvalRunOut
    b: EvalRunOut
    pass_rate_interval: IntervalOut | None
    pass_rate_interval_reason: str | None = Field(
        description="why pass_rate_interval is null: too few cases in both runs (the verdict is then too_few_cases)"
    )
    items: list[CompareRowOut]
    pages: int

    @staticmethod
    def resolve_a(view: CompareView) -> EvalRun:
        return view.run_a

    @staticmethod
    def resolve_b(view: CompareView) -> EvalRun:
        return view.run_b

    @staticmethod
    def resolve_pass_rate_interval(view: CompareView) -> ConfidenceInterval | None:
        return view.interval

    @staticmethod
    def resolve_pass_rate_interval_reason(view: CompareView) -> str | None:
        # distinct cases, never (case, repeat) pairs
        return None if view.interval is not None else too_few_cases(view.cases_in_both) or TOO_FEW_CASES

    @staticmethod
    def resolve_items(view: CompareView) -> list[CompareRow]:
        return view.rows

    @staticmethod
    def resolve_pages(view: CompareView) -> int:
        return view.num_pages
