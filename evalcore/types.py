"""Typed values the engine passes around: cases, scores, per-case results.

Everything here is plain data: records go to and from JSON through :mod:`evalcore.serial`
(pydantic ``TypeAdapter``s over these dataclasses), and nothing imports a web framework, so the
engine runs in a notebook or plain pytest.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field

from evalcore.jsonvalue import MISSING, Missing, json_encoder, to_json

JSON = Any
"""Any JSON value: dict, list, str, int, float (finite), bool or None."""

SPLITS: tuple[str, ...] = ("train", "dev", "test")
"""The split names, in their canonical order. ``test`` is the held-out lockbox."""


def _is_missing(value: Any) -> bool:
    return value is MISSING


@dataclass(slots=True)
class Case:
    """One eval case: an input, an optional expected value, tags and a split.

    Attributes:
        id: Unique within its eval set.
        input: Any JSON value handed to the target.
        expected: Any JSON value, or :data:`MISSING` when the case has no reference answer (then
            left out of the case's record, see :func:`evalcore.serial.to_record`).
        tags: Free labels for filtering.
        split: ``"train"``, ``"dev"``, ``"test"``, or ``None`` before assignment.
        metadata: Free JSON object (e.g. a human ``is_correct`` label, a source line number).
    """

    id: str
    input: JSON
    expected: Annotated[JSON, Field(exclude_if=_is_missing)] = MISSING
    tags: list[str] = field(default_factory=list)
    split: str | None = None
    metadata: dict[str, JSON] = field(default_factory=dict)

    @property
    def has_expected(self) -> bool:
        """True when the case carries an expected value (``null`` counts as one)."""
        return self.expected is not MISSING


ScoreValue = bool | float | str | None
"""A score's value: ``bool`` (pass/fail), ``float`` in 0..1, a ``str`` label, or ``None`` on error."""


@dataclass(slots=True)
class Score:
    """One scorer's verdict on one case (a *score*; aggregates are *metrics*, see report.py).

    Attributes:
        name: The metric name, e.g. ``"numeric_match"`` or ``"citation_set.recall"``.
        value: ``bool``, ``float`` in 0..1, ``str`` label, or ``None`` when ``error`` is set.
        passed: The verdict, or ``None`` for a score that only measures (e.g. a recall figure).
            A ``bool`` value is a verdict: left ``None``, it becomes the value (``Score("ok",
            False)`` fails the case; a pass/fail value is never read as a measurement).
        explanation: Human-readable why, shown in the portal.
        error: Set when the scorer itself failed; then ``value`` is ``None`` and the score is
            left out of aggregates (an error is never a 0 that looks like a real verdict).
        metadata: Extra detail (per-argument matches, raw judge text, ...).
    """

    name: str
    value: ScoreValue
    passed: bool | None = None
    explanation: str | None = None
    error: str | None = None
    metadata: dict[str, JSON] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) and self.passed is None and self.error is None:
            self.passed = self.value
        if isinstance(self.value, float | int) and not isinstance(self.value, bool):
            value = float(self.value)
            if not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"score {self.name!r}: numeric value must be in 0..1, got {value!r}")
            self.value = value

    @classmethod
    def failure(cls, name: str, error: str, **metadata: JSON) -> Score:
        """A score recording that the scorer failed (no value, no verdict)."""
        return cls(name=name, value=None, passed=None, error=error, metadata=dict(metadata))

    @property
    def numeric(self) -> float | None:
        """The value as a number in 0..1 (bools as 0/1), or ``None`` for labels and errors."""
        if self.error is not None or self.value is None or isinstance(self.value, str):
            return None
        return float(self.value)


class CaseStatus(StrEnum):
    """Outcome of one case.

    * ``passed``: at least one verdict says pass and none says fail.
    * ``failed``: a verdict says fail (even when another scorer errored: the outcome is known).
    * ``errored``: the target failed, or a scorer failed and its missing verdict could change
      the outcome (no verdict says fail). Never a verdict: shown apart from ``failed``.
    * ``unscored``: nothing judged the case (no scorer, or only measurements such as a 0..1
      score without a threshold). Counted in ``n``, never in ``passed``.
    """

    PASSED = "passed"
    FAILED = "failed"
    ERRORED = "errored"
    UNSCORED = "unscored"


class StatusReason(StrEnum):
    """Why a case got its status (machine-readable; :data:`REASON_TEXT` says it in words)."""

    VERDICTS_PASS = "verdicts_pass"
    """passed: every verdict says pass."""
    VERDICT_FAILED = "verdict_failed"
    """failed: a verdict says fail."""
    FAILED_SCORER_ERRORED = "failed_scorer_errored"
    """failed: a verdict says fail; another scorer errored, but the outcome is already known."""
    TARGET_ERROR = "target_error"
    """errored: the target raised, timed out or returned nothing usable."""
    SCORER_ERROR = "scorer_error"
    """errored: a scorer failed and no verdict says fail, so the missing verdict could change it."""
    NO_SCORER = "no_scorer"
    """unscored: no scorer ran on the case."""
    NO_VERDICT = "no_verdict"
    """unscored: the scorers only measured (e.g. a 0..1 score with no threshold)."""


REASON_TEXT: dict[str, str] = {
    StatusReason.VERDICTS_PASS: "every verdict says pass",
    StatusReason.VERDICT_FAILED: "a verdict says fail",
    StatusReason.FAILED_SCORER_ERRORED: "failed (another scorer errored, outcome already known)",
    StatusReason.TARGET_ERROR: "errored: the target failed",
    StatusReason.SCORER_ERROR: "errored: a scorer failed and its missing verdict could change the outcome",
    StatusReason.NO_SCORER: "unscored: no scorer judged this case",
    StatusReason.NO_VERDICT: "unscored: the scores only measure (no verdict; a 0..1 score needs a threshold)",
}
"""Each :class:`StatusReason` in words, as the case page shows it."""


@dataclass(slots=True, frozen=True)
class CaseOutcome:
    """A case's status and why (see :func:`case_outcome`)."""

    status: CaseStatus
    reason: StatusReason

    @property
    def text(self) -> str:
        """The reason in words."""
        return REASON_TEXT[self.reason]


def _field(score: Any, key: str) -> Any:
    return score.get(key) if isinstance(score, dict) else getattr(score, key, None)


def case_outcome(*, target_errored: bool, scores: Iterable[Score | dict[str, Any]]) -> CaseOutcome:
    """The status of one case from its target error and its scores (the verdict rule).

    A case is passed only when at least one verdict (``passed`` True/False) says pass and none
    says fail. A failing verdict decides the case even if another scorer errored. A scorer error
    with no failing verdict leaves the outcome open: errored. A case with no verdict at all is
    unscored, never passed.

    Args:
        target_errored: The target raised, timed out or returned nothing usable.
        scores: :class:`Score` objects or their stored dict form (``passed`` / ``error`` keys).

    Returns:
        The :class:`CaseOutcome`.
    """
    if target_errored:
        return _TARGET_ERROR
    seen = errored = passing = failing = False
    for score in scores:
        seen = True
        if type(score) is Score:  # the engine's own scores: attributes read directly
            if score.error is not None:
                errored = True
                continue
            verdict = score.passed
            if verdict is None and type(score.value) is bool:
                verdict = score.value
        else:
            if _field(score, "error") is not None:
                errored = True
                continue
            verdict = _field(score, "passed")
            if verdict is None and isinstance(_field(score, "value"), bool):
                verdict = _field(score, "value")  # a stored pass/fail value is a verdict (see Score.passed)
        if verdict is True:
            passing = True
        elif verdict is False:
            failing = True
    if failing:
        return _FAILED_SCORER_ERRORED if errored else _VERDICT_FAILED
    if errored:
        return _SCORER_ERROR
    if passing:
        return _VERDICTS_PASS
    return _NO_VERDICT if seen else _NO_SCORER


# the outcomes, made once (frozen: shared safely)
_TARGET_ERROR = CaseOutcome(CaseStatus.ERRORED, StatusReason.TARGET_ERROR)
_FAILED_SCORER_ERRORED = CaseOutcome(CaseStatus.FAILED, StatusReason.FAILED_SCORER_ERRORED)
_VERDICT_FAILED = CaseOutcome(CaseStatus.FAILED, StatusReason.VERDICT_FAILED)
_SCORER_ERROR = CaseOutcome(CaseStatus.ERRORED, StatusReason.SCORER_ERROR)
_VERDICTS_PASS = CaseOutcome(CaseStatus.PASSED, StatusReason.VERDICTS_PASS)
_NO_VERDICT = CaseOutcome(CaseStatus.UNSCORED, StatusReason.NO_VERDICT)
_NO_SCORER = CaseOutcome(CaseStatus.UNSCORED, StatusReason.NO_SCORER)


@dataclass(slots=True)
class ErrorInfo:
    """An error kept with a case: the exception type and its message."""

    type: str
    message: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        """Build from an exception, keeping its class name and message."""
        return cls(type=type(exc).__name__, message=str(exc) or repr(exc))


@dataclass(slots=True)
class TargetOutput:
    """What a target may return instead of a bare value: the output plus run metadata.

    Attributes:
        output: The answer (any JSON value).
        model: Name of the model that produced it, if any.
        tokens_in: Prompt tokens used, if known.
        tokens_out: Completion tokens used, if known.
        metadata: Anything else worth storing on the run (finish reason, tool calls, ...).
    """

    output: JSON
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    metadata: dict[str, JSON] = field(default_factory=dict)


@dataclass(slots=True)
class RunRecord:
    """The target-side record of one case's execution (the *run*), before scoring.

    Inference and scoring are separate steps: a stored ``RunRecord`` can be scored again
    later without calling the target (see :func:`evalcore.scoring.score_run`).

    Attributes:
        case_id: The case's id.
        run_id: Unique id of this run (``<eval run id>:<case id>[#<repeat>]``).
        trace_id: Trace id grouping the run's events (same shape as ``run_id``).
        repeat_index: 0-based index when a case is repeated.
        output: The target's answer, ``None`` when it errored.
        error: Set when the target raised, timed out or returned nothing usable.
        started_at: Unix time in seconds.
        elapsed_ms: Wall time of the target call in milliseconds.
        model, tokens_in, tokens_out: From the target's :class:`TargetOutput`, if any.
        metadata: Target-reported metadata plus the eval run id / variant / split.
    """

    case_id: str
    run_id: str
    trace_id: str
    repeat_index: int = 0
    output: JSON = None
    error: ErrorInfo | None = None
    started_at: float = 0.0
    elapsed_ms: float = 0.0
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    metadata: dict[str, JSON] = field(default_factory=dict)


@dataclass(slots=True)
class CaseResult:
    """A scored case: its run record plus the scores and the verdict.

    Attributes:
        case: The case that was run.
        run: The run record (output, error, timings, tokens).
        scores: Every score produced by every scorer.
    """

    case: Case
    run: RunRecord
    scores: list[Score] = field(default_factory=list)

    @property
    def case_id(self) -> str:
        return self.case.id

    @property
    def scorer_errors(self) -> list[Score]:
        """Scores whose scorer failed."""
        return [s for s in self.scores if s.error is not None]

    @property
    def outcome(self) -> CaseOutcome:
        """The status and its reason (see :func:`case_outcome`)."""
        return case_outcome(target_errored=self.run.error is not None, scores=self.scores)

    @property
    def status(self) -> CaseStatus:
        """``passed`` / ``failed`` / ``errored`` / ``unscored`` (see :class:`CaseStatus`)."""
        return self.outcome.status

    @property
    def passed(self) -> bool:
        """True only when at least one verdict says pass and none says fail (status ``passed``).

        A case that nothing judged (no scorer, or only measurements) is *unscored*, not passed.
        """
        return self.status is CaseStatus.PASSED


def expected_hash(expected: JSON | Missing, *, plain: JSON = MISSING) -> str:
    """sha256 hex of an expected value as scored: canonical JSON (sorted keys), ``MISSING`` apart.

    Stored with each result so a later edit of the case can be detected (equal hashes: the
    case's expected value is what the result was scored against). ``plain``: the value's
    :func:`~evalcore.jsonvalue.to_json` form when the caller has it already.

    Raises:
        ValueError: On a non-finite float (see :func:`evalcore.jsonvalue.to_json`).
    """
    if expected is MISSING:
        text = '{"missing":true}'
    else:
        text = '{"expected":' + _canonical(to_json(expected) if plain is MISSING else plain) + "}"
    return hashlib.sha256(text.encode()).hexdigest()


_canonical = json_encoder(sort_keys=True, compact=True)
