"""Reads of conversation cases for the pages: a case's transcript, the run table's turn columns,
the set page's kind of case, and two runs' conversations aligned turn by turn.

A conversation case (:mod:`evalcore.conversations`) stores what each turn played in its trace
run's ``metadata["turns"]`` (``turn``, ``user``, ``final_response``, ``tool_calls``, ``error``),
the turn that ended an errored case in ``metadata["errored_turn"]``, and each turn's score in
the case-level score's ``metadata["turns"]`` (one entry per turn, ``null`` where that scorer did
not score the turn). A turn's status follows the case rule (:func:`evalcore.types.case_outcome`)
over that turn's scores, as the JSON report's ``turns`` block does
(:func:`evalcore.conversations.report_turns`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Func, IntegerField, OuterRef, Subquery
from django.db.models.fields.json import KeyTextTransform

from apps.evals.models import EvalCase, EvalResult, EvalRun
from apps.evals.queries.cached import while_unchanged
from apps.traces.models import Event
from evalcore.conversations import (
    ConversationError,
    Turn,
    is_conversation_input,
    parse_conversation,
    report_turns,
)
from evalcore.jsonvalue import MISSING
from evalcore.simulator import first_divergence
from evalcore.tracing import SPAN_BEGIN, SPAN_END
from evalcore.types import JSON, case_outcome

NOT_PLAYED = "not played"
"""The status of a turn the case never reached (it errored at an earlier turn)."""

FAILING = frozenset({"failed", "errored"})


class TurnCount(Func):
    """The length of a JSON column's ``turns`` array, ``NULL`` when it has no such array.

    SQLite's JSON1 ``json_array_length`` / PostgreSQL's ``jsonb_array_length`` (guarded by the
    value's type: PostgreSQL raises on a non-array)."""

    output_field = IntegerField()
    template = (
        "CASE WHEN json_type(%(expressions)s, '$.turns') = 'array' "
        "THEN json_array_length(%(expressions)s, '$.turns') END"
    )

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = (
            "CASE WHEN jsonb_typeof(%(expressions)s -> 'turns') = 'array' "
            "THEN jsonb_array_length(%(expressions)s -> 'turns') END"
        )
        return self.as_sql(compiler, connection, template=template, **extra)


def turn_statuses(scores: Any, *, n_played: int, errored_turn: int | None) -> list[str]:
    """Each played turn's status (``passed`` / ``failed`` / ``errored`` / ``unscored``), from a
    result's stored scores (their ``metadata["turns"]``) and the turn the case errored at.

    Args:
        scores: The result's stored scores (a list of score objects; anything else reads as none).
        n_played: Turns played (at least the errored turn; more when the scores cover more).
        errored_turn: 1-based turn whose target call raised or timed out, or ``None``.
    """
    per_name: list[tuple[Any, list[Any]]] = []
    for score in scores if isinstance(scores, list) else []:
        metadata = score.get("metadata") if isinstance(score, dict) else None
        per = metadata.get("turns") if isinstance(metadata, dict) else None
        if isinstance(per, list):
            per_name.append((score.get("name"), per))
    n = max([n_played, errored_turn or 0, *(len(per) for _, per in per_name)])
    statuses = []
    for index in range(n):
        turn_scores = [
            {"name": name, **per[index]} for name, per in per_name if index < len(per) and isinstance(per[index], dict)
        ]
        errored = errored_turn == index + 1
        statuses.append(case_outcome(target_errored=errored, scores=turn_scores).status.value)
        if errored:
            break
    return statuses


def first_failing(statuses: Sequence[str]) -> int | None:
    """The first turn (1-based) that failed or errored, ``None`` when none did."""
    return next((index + 1 for index, status in enumerate(statuses) if status in FAILING), None)


@dataclass(frozen=True, slots=True)
class RowConversation:
    """The run table's conversation cell of one result.

    Attributes:
        n_turns: The case's turns (from the set's case; the turns played when it left the set).
        first_failing: The first turn that failed or errored (1-based), ``None`` when none did.
    """

    n_turns: int
    first_failing: int | None


def attach_conversations(results: Iterable[EvalResult]) -> None:
    """Set ``result.conversation`` (a :class:`RowConversation`, ``None`` for a single-turn case)
    on each of ``results``: one query for the page's rows, reading the case input's turn count
    and the errored turn in the database (never the whole input nor the played turns).

    Reads ``scores`` of the given results (the table's rows load them)."""
    listed = list(results)
    if not listed:
        return
    case = EvalCase.objects.filter(eval_set_id=OuterRef("eval_run__eval_set_id"), case_id=OuterRef("case_id"))
    rows = (
        EvalResult.objects.filter(pk__in=[r.pk for r in listed])
        .annotate(
            n_turns=Subquery(case.annotate(n=TurnCount("input")).values("n")[:1]),
            errored_turn=KeyTextTransform("errored_turn", "run__metadata"),
            n_played=TurnCount("run__metadata"),
        )
        .values_list("pk", "n_turns", "errored_turn", "n_played")
    )
    found = {pk: (n_turns, errored, played) for pk, n_turns, errored, played in rows}
    for result in listed:
        n_turns, errored, played = found.get(result.pk, (None, None, None))
        conversation = None
        if n_turns is not None or played is not None:
            statuses = turn_statuses(result.scores, n_played=played or 0, errored_turn=_int(errored))
            conversation = RowConversation(n_turns if n_turns is not None else len(statuses), first_failing(statuses))
        setattr(result, "conversation", conversation)  # noqa: B010 - a display attribute, not a model field


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def conversation_turns(value: Any) -> int | None:
    """The number of turns of a case ``input``, ``None`` when it is not a conversation."""
    return len(value["turns"]) if is_conversation_input(value) and isinstance(value["turns"], list) else None


def mark_conversations(cases: Iterable[EvalCase]) -> None:
    """Set ``case.n_turns`` (turns of a conversation case, ``None`` for a single-turn case) on
    each of ``cases`` (their ``input`` loaded)."""
    for case in cases:
        setattr(case, "n_turns", conversation_turns(case.input))  # noqa: B010 - a display attribute


@dataclass(slots=True)
class TranscriptTurn:
    """One turn of a conversation case's transcript.

    Attributes:
        number: 1-based.
        user: The user's message.
        played: The case reached this turn (``False`` after a turn that errored).
        final_response, tool_calls: The agent's answer and its tool calls (``{"name", "arguments"}``).
        error: ``{"type", "message"}`` when this turn's target call raised or timed out.
        status: ``passed`` / ``failed`` / ``errored`` / ``unscored``, or :data:`NOT_PLAYED`.
        scores: This turn's scores (``{"name", "value", "passed", "explanation", "error"}``).
        has_expected_response, expected_response: The expected final response, if the turn states one.
        expected_calls: The expected tool calls, ``None`` when the turn states none.
        rubric: The turn's rubric for the judge, if any.
        first_failing: This is the first turn that failed or errored.
    """

    number: int
    user: str
    played: bool
    final_response: JSON = None
    tool_calls: list[Any] = field(default_factory=list)
    error: dict[str, Any] | None = None
    status: str = NOT_PLAYED
    scores: list[dict[str, Any]] = field(default_factory=list)
    has_expected_response: bool = False
    expected_response: JSON = None
    expected_calls: list[Any] | None = None
    rubric: str | None = None
    first_failing: bool = False

    @property
    def expected_calls_value(self) -> dict[str, Any]:
        """The expected calls as the diff reads them (``{"tool_calls": [...]}``)."""
        return {"tool_calls": self.expected_calls or []}

    @property
    def calls_value(self) -> dict[str, Any]:
        """The calls made, as the diff reads them (``{"tool_calls": [...]}``)."""
        return {"tool_calls": self.tool_calls}


@dataclass(slots=True)
class Transcript:
    """A conversation case of one run, turn by turn.

    Attributes:
        turns: Every turn of the case (those not reached too, marked not played).
        n_played: Turns the case played.
        first_failing: The first turn that failed or errored (1-based), ``None`` when none did.
        session_state: The session's state at the end, when the run recorded it.
    """

    turns: list[TranscriptTurn]
    n_played: int
    first_failing: int | None
    session_state: Any = None

    @property
    def n_turns(self) -> int:
        return len(self.turns)


def case_transcript(result: EvalResult, case: EvalCase | None, expected: Any = MISSING) -> Transcript | None:
    """The transcript of ``result`` (its ``run`` loaded), ``None`` for a single-turn case.

    Args:
        result: The result of a conversation case.
        case: The set's case (its user messages and number of turns), ``None`` when it left the set.
        expected: The expected value the result was scored against (``MISSING``: none); its
            per-turn expectations are shown beside each turn. When it cannot be read as a
            conversation's expectations, the turns are shown without them.
    """
    metadata = result.run.metadata if isinstance(result.run.metadata, dict) else {}
    recorded = metadata.get("turns")  # a list of played turns; other targets may store anything here
    played = [t for t in recorded if isinstance(t, dict)] if isinstance(recorded, list) else []
    conversation_turns_: tuple[Turn, ...] = ()
    if case is not None and is_conversation_input(case.input):
        try:
            conversation = parse_conversation(case.input, None if expected is MISSING else expected)
        except ConversationError:
            try:  # an expected value that no longer fits the turns: the turns without it
                conversation = parse_conversation(case.input, None)
            except ConversationError:
                conversation = None
        if conversation is not None:
            conversation_turns_ = conversation.turns
    if not conversation_turns_ and not played:
        return None
    reported = report_turns(metadata, result.scores) or []
    errored_turn = _int(metadata.get("errored_turn"))
    statuses = turn_statuses(result.scores, n_played=len(played), errored_turn=errored_turn)
    statuses = statuses[: len(played)] if played else statuses
    first = first_failing(statuses)
    turns: list[TranscriptTurn] = []
    for index in range(max(len(conversation_turns_), len(played))):
        spec = conversation_turns_[index] if index < len(conversation_turns_) else None
        record = reported[index] if index < len(reported) else None
        status = statuses[index] if index < len(statuses) else NOT_PLAYED
        turn = TranscriptTurn(
            number=index + 1,
            user=spec.user if spec is not None else str((record or {}).get("user", "")),
            played=record is not None,
            status=status if record is not None else NOT_PLAYED,
            first_failing=first == index + 1,
        )
        if record is not None:
            turn.final_response = record.get("final_response")
            calls = record.get("tool_calls")
            turn.tool_calls = calls if isinstance(calls, list) else []
            error = record.get("error")
            turn.error = error if isinstance(error, dict) else None
            turn.scores = [s for s in record.get("scores") or [] if isinstance(s, dict)]
        if spec is not None:
            turn.has_expected_response = spec.final_response is not None
            turn.expected_response = spec.final_response
            turn.expected_calls = spec.tool_calls
            turn.rubric = spec.rubric
        turns.append(turn)
    return Transcript(turns, len(played), first, metadata.get("session_state"))


@dataclass(slots=True)
class AlignedTurn:
    """One turn of two runs' plays of a conversation, side by side.

    Attributes:
        number: 1-based.
        user: The user's message.
        a, b: That turn in each run.
        differs: The two answers differ (final response, tool calls or error; or one run never
            reached the turn).
        first_divergence: This is the first turn where they differ.
    """

    number: int
    user: str
    a: TranscriptTurn
    b: TranscriptTurn
    differs: bool
    first_divergence: bool


@dataclass(slots=True)
class Alignment:
    """Two runs' transcripts of one conversation case, turn by turn.

    Attributes:
        turns: The aligned turns.
        first_divergence: The first turn (1-based) where the answers differ, ``None`` when none does.
    """

    turns: list[AlignedTurn]
    first_divergence: int | None


def align_transcripts(a: EvalResult, b: EvalResult, case: EvalCase | None) -> Alignment | None:
    """The two results' conversations turn by turn (their ``run`` loaded), ``None`` for a
    single-turn case. Divergence: :func:`evalcore.simulator.first_divergence`."""
    left, right = case_transcript(a, case), case_transcript(b, case)
    if left is None or right is None:
        return None
    played_a = (a.run.metadata or {}).get("turns") if isinstance(a.run.metadata, dict) else None
    played_b = (b.run.metadata or {}).get("turns") if isinstance(b.run.metadata, dict) else None
    first = first_divergence(played_a, played_b)
    turns = []
    for index in range(max(left.n_turns, right.n_turns)):
        ta = left.turns[index] if index < left.n_turns else TranscriptTurn(index + 1, "", False)
        tb = right.turns[index] if index < right.n_turns else TranscriptTurn(index + 1, "", False)
        differs = (ta.played or tb.played) and (
            ta.played != tb.played
            or (ta.final_response, ta.tool_calls, ta.error) != (tb.final_response, tb.tool_calls, tb.error)
        )
        turns.append(AlignedTurn(index + 1, ta.user or tb.user, ta, tb, bool(differs), first == index + 1))
    return Alignment(turns, first)


@dataclass(frozen=True, slots=True)
class TurnFlips:
    """Turn ``turn`` of the conversation cases both runs played that far.

    Attributes:
        turn: 1-based.
        n: (case, repeat) pairs where both runs played this turn.
        of: Conversation pairs in both runs (the coverage is ``n = n/of``).
        a_only: Turns passed in A and not in B (pass → fail).
        b_only: Turns passed in B and not in A (fail → pass).
    """

    turn: int
    n: int
    of: int
    a_only: int
    b_only: int


def turn_flips(run_a: EvalRun, run_b: EvalRun) -> list[TurnFlips]:
    """Per turn index, the flips between two runs over their shared conversation cases (empty
    when the set has none). A turn that is not ``passed`` (failed, errored, unscored) is not a
    pass; a turn one run never reached is not compared (it lowers that turn's ``n``).

    Two queries (each run's conversation results: scores and errored turn), cached while neither
    run changes (:func:`~apps.evals.queries.cached.while_unchanged`)."""
    return while_unchanged("turn-flips.1", (run_a, run_b), lambda: _turn_flips(run_a, run_b))


def _turn_flips(run_a: EvalRun, run_b: EvalRun) -> list[TurnFlips]:
    conversations = EvalCase.objects.filter(eval_set_id=run_a.eval_set_id, input__has_key="turns").values("case_id")

    def statuses_of(run: EvalRun) -> dict[tuple[str, int], list[str]]:
        rows = (
            EvalResult.objects.filter(eval_run=run, case_id__in=conversations)
            .annotate(
                errored_turn=KeyTextTransform("errored_turn", "run__metadata"), n_played=TurnCount("run__metadata")
            )
            .values_list("case_id", "repeat_index", "scores", "errored_turn", "n_played")
        )
        return {
            (case_id, repeat): turn_statuses(scores, n_played=played or 0, errored_turn=_int(errored))
            for case_id, repeat, scores, errored, played in rows
        }

    side_a, side_b = statuses_of(run_a), statuses_of(run_b)
    pairs = [(side_a[key], side_b[key]) for key in side_a.keys() & side_b.keys()]
    if not pairs:
        return []
    n_turns = max(max(len(a), len(b)) for a, b in pairs)
    out = []
    for index in range(n_turns):
        both = [(a[index], b[index]) for a, b in pairs if index < len(a) and index < len(b)]
        a_only = sum(1 for x, y in both if x == "passed" and y != "passed")
        b_only = sum(1 for x, y in both if y == "passed" and x != "passed")
        out.append(TurnFlips(index + 1, len(both), len(pairs), a_only, b_only))
    return out


PLAYING_SHOWN = 20
"""In-flight cases the live run page looks at, at most (a run's concurrency is usually lower)."""


@dataclass(frozen=True, slots=True)
class PlayingCase:
    """A conversation case being played right now (the live run page).

    Attributes:
        case_id: The case (``#n`` appended for a repeat).
        done: Turns finished so far.
        total: The case's turns (from its turn spans), ``None`` if not known yet.
        current: The user's message of the turn being played (a preview), ``""`` between turns.
    """

    case_id: str
    done: int
    total: int | None
    current: str


def playing_turns(eval_run: EvalRun) -> list[PlayingCase]:
    """The conversation cases of a live run that are being played, with their turns done / total.

    Read from what the result writer already commits while a case plays: the run's in-flight
    trace runs (``EvalRun.in_flight``, ids ``<eval run id>:<case id>``) and their ``turn`` spans
    (:func:`evalcore.inference` opens one per turn with ``turn`` and ``turns``). One query, on the
    events' ``(run, seq)`` index; a single-turn case has no turn span and is not listed. Empty
    when nothing is in flight.
    """
    ids = [r for r in eval_run.in_flight or [] if isinstance(r, str)][:PLAYING_SHOWN]
    if not ids:
        return []
    rows = (
        Event.objects.filter(run__run_id__in=ids, type__in=(SPAN_BEGIN, SPAN_END), name__startswith="turn ")
        .order_by("run_id", "seq")
        .values_list("run__run_id", "type", "payload")
    )
    found: dict[str, dict[str, Any]] = {}
    for run_id, kind, payload in rows:
        if not isinstance(payload, dict) or payload.get("kind") != "turn":
            continue
        state = found.setdefault(run_id, {"done": 0, "total": None, "current": ""})
        total = payload.get("turns")
        if isinstance(total, int):
            state["total"] = total
        if kind == SPAN_END:
            state["done"] += 1
            state["current"] = ""
        else:
            state["current"] = str(payload.get("input_preview") or "")
    prefix = f"{eval_run.pk}:"
    playing = []
    for run_id in ids:
        seen = found.get(run_id)
        if seen is not None:
            playing.append(PlayingCase(run_id.removeprefix(prefix), seen["done"], seen["total"], seen["current"]))
    return playing
